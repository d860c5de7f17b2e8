//! Browser continuity: waking a bound chat conversation when work on the workstation settles
//! (spec/extension.md §5, §7). Pure Rust: no browser API, no clock (every function that
//! needs the time takes `now_ms`), and every state, event and action type is serde data so
//! the extension shell can persist it in `chrome.storage` and pass it through
//! `serde-wasm-bindgen`.
//!
//! # How the shell drives it
//!
//! ```text
//! native port chunk ──► SseParser::push(bytes) ──► [PushEvent] ──► Continuity::on_push_event(ev, now)
//! timer (next_deadline_ms) ──────────────────────────────────────► Continuity::on_tick(now)
//!                                        ▼
//!                      [ContinuityAction]: Wake(w) → deliver   Suppressed(w) → popup only
//!                                          Resync → GET /push/state → Continuity::on_state(hello, now)
//! ```
//!
//! - [`push_event`]: [`SseParser`] (incremental, bounded: [`PushStreamError::BlockTooLarge`]),
//!   the typed [`PushEvent`]s (`hello`, `agent_working`, `agent_settled`, `agent_output`,
//!   `agent_gone`, `exec_completed`, `lagged`; unknown names are skipped), and [`Backoff`]
//!   (reconnect delays 2 s doubling to 15 s; `on_success` resets; call `SseParser::reset`
//!   on reconnect).
//! - [`bindings`]: [`ConvTarget`] (the page's scope, built by the shell from
//!   `ext_adapters::identify`: `Scope::Conversation` → `Conversation`, `ProjectConversation`
//!   / `ProjectHome` → `Project`, `NewChat` on ChatGPT or z.ai → `PendingRoot`, on DeepSeek
//!   → `Conversation`), [`WorkspaceRef`] (Herdr workspace id or managed root), [`Binding`],
//!   [`Bindings`] with bind / unbind / set_auto / list / register_page (pending → first
//!   `/c/<id>` of the same tab — on z.ai also of any tab while the row's tab URL is the
//!   root — once; a Project binding follows its tab) /
//!   set_project_active / move_conversation. Errors are [`BindError`] with `code()`.
//! - [`wake`]: the per-binding decisions (`round`, `partial`, `exec`; duplicates never
//!   wake twice; `hello` reconciles a settle missed offline).
//! - [`progress`]: progress ticks ([`ProgressSettings`], default 60 s tick / 1200 s
//!   cooldown, 0 = off, max 86 400) and the output fingerprint. A tick reports a working
//!   pane's `agent_output`, else its summary, else its terminal title — so passing a fresh
//!   `/push/state` to `on_state` before ticking keeps titles current.
//! - [`render`]: wake texts in English, Chinese and Japanese ([`Lang::from_tag`]), each
//!   starting with a fixed prefix ([`render::is_wake_text`]).
//! - [`delivery_guard`]: [`DeliveryGuard`] — `begin(tab, &wake, now)` (one in flight per
//!   tab, same text within 8 s dropped), [`delivery_guard::composer_decision`] (insert /
//!   submit only / replace our own wake / `user-typing`), `finish(tab, wake_id, outcome,
//!   now)`, and the pending list for the popup (`pending`, `take_pending` = "send now",
//!   `next_retry` only for wakes that certainly never reached the page), and the
//!   write-ahead record a restarted service worker recovers (`accept`,
//!   `recover_after_restart`: redeliver what never began, report what was in flight).
//! - [`keepalive`]: the `h2w-keepalive` alarm's period (one minute; shorter only for an
//!   unpacked install that asks for it, e.g. the e2e tests).
//! - [`handoff`]: [`Transfers`] / [`Transfer`] — `start` (refuses `binding_required`,
//!   `workspace_busy`, `handoff_active`), `packet_request`, `on_source_reply` (packet
//!   between `<<<HERDR_HANDOFF_V1 id=…>>>` and `<<<END_HERDR_HANDOFF_V1>>>`, ≤ 24 000
//!   chars), `open_target`, `begin_seed` (the seed, once), `on_seed_outcome`, `commit`
//!   (moves bindings only with a confirmed seed in a new conversation). While a transfer
//!   runs, `Transfers::blocks_wakes(conv_key)` is true: do not deliver its wakes.
//! - [`Continuity`] (in `state`): the whole state. Main calls:
//!   `bind(target, workspace, label, tab, now)`, `unbind(conv_key, workspace?)`,
//!   `set_auto(conv_key, on)`, `list()`, `register_page(target, tab, now)`,
//!   `on_push_event(ev, now)`, `on_state(hello, now)`, `on_tick(now)`,
//!   `next_deadline_ms()`, `suppressed()`. A settle wake waits up to [`OUTPUT_WAIT_MS`] for
//!   its pane's `agent_output`, so call `on_tick` at `next_deadline_ms()`.
//!
//! Nothing is ever returned as [`ContinuityAction::Wake`] for a conversation whose Auto is
//! off (the default); such wakes come back as `Suppressed` and must not be sent.

pub mod bindings;
pub mod delivery_guard;
pub mod fleet;
pub mod handoff;
pub mod keepalive;
pub mod progress;
pub mod push_event;
pub mod render;
pub mod state;
pub mod wake;

pub use bindings::{BindError, Binding, BindingStatus, BindingView, Bindings, ConvTarget, Moved, TabRef, WorkspaceRef};
pub use delivery_guard::{Blocked, ComposerAction, DeliveryGuard, DeliveryOutcome, PendingReason, PendingWake};
pub use handoff::{HandoffError, SeedOutcome, Transfer, TransferStatus, Transfers};
pub use progress::{ProgressSettings, SettingsError, SettingsProblem};
pub use push_event::{Backoff, Hello, PushEvent, PushStreamError, SettledStatus, SseParser};
pub use render::{Lang, WakeKind};
pub use state::{Continuity, ContinuityAction, Settings, Wake, OUTPUT_POLL_MS, OUTPUT_WAIT_MS};

#[cfg(test)]
mod tests;

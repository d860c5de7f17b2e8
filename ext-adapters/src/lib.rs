//! ext-adapters: everything site-specific about the chat pages the extension works in, as
//! pure data and functions (native for tests, `wasm32-unknown-unknown` for the service
//! worker). One adapter per site (z.ai, DeepSeek, ChatGPT) implements [`SiteAdapter`]:
//!
//! - URL → [`ConversationIdentity`] (`site`),
//! - the [`SelectorSet`] a content script uses to snapshot the page (`selectors`),
//! - interpretation of a [`PageSnapshot`] into roles, latest reply and "finished" (`interpret`),
//! - the [`ComposerStrategy`] (how to insert and send text) (`composer`),
//! - which binding migration applies ([`migration`]).
//!
//! The messages exchanged with the content script are defined in [`messages`]. A
//! [`PageView`] feeds ext-core directly: `pending_folds` (folding decisions),
//! `reply_snapshot_event` (the loop engine) and `transcript` (reload recovery).

pub mod adapter;
pub mod composer;
pub mod interpret;
pub mod messages;
pub mod migration;
pub mod reply_text;
pub mod selectors;
pub mod site;
pub mod sites;
pub mod url;

pub use adapter::{adapter_for_site, adapter_for_url, identify, interpret, IdentityError, MigrationRule, SiteAdapter};
pub use composer::{ComposerStrategy, InsertMethod, SubmitMethod};
pub use interpret::{BusyReason, Entry, LatestReply, PageView};
pub use messages::{Action, ContentMessage, PageSnapshot, RootSnapshot, WorkerMessage};
pub use selectors::SelectorSet;
pub use site::{ConversationIdentity, Scope, Site};

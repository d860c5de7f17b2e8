//! Handing a bound conversation over to a fresh one (spec/extension.md §7.7): the source
//! conversation writes a continuity packet, a new conversation is opened and seeded with
//! it, and only once the seed is confirmed there do the bindings move.
//!
//! ```text
//! summary_requested ─(packet in the first new reply)─► summary_ready ─► target_opening
//!   ─(begin_seed: the one and only seed)─► seed_submitting ─┬─(probe confirms)─► committed
//!                                                           ├─(unsure)─► seed_uncertain ─(probe confirms)─► committed
//!                                                           └─► failed
//! ```
//!
//! A seed is handed out once; an uncertain seed is never sent again by this machine (the
//! user decides after looking at the target). While a transfer of a conversation is in
//! progress its wakes are paused ([`Transfers::blocks_wakes`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

use super::bindings::{BindError, BindingScope, BindingStatus, Bindings, ConvTarget, Moved};
use super::render::Lang;

pub const PACKET_OPEN: &str = "<<<HERDR_HANDOFF_V1";
pub const PACKET_CLOSE: &str = "<<<END_HERDR_HANDOFF_V1>>>";
pub const SEED_OPEN: &str = "[HERDR_CONTINUITY_TRANSFER";
pub const SEED_CLOSE: &str = "[/HERDR_CONTINUITY_TRANSFER]";
/// Longest packet accepted, in characters.
pub const MAX_PACKET_CHARS: usize = 24_000;
/// How long transfer records are kept.
pub const TRANSFER_KEEP_MS: u64 = 7 * 24 * 60 * 60 * 1_000;

/// How long the source conversation has to write its packet before the configured LLM
/// may summarise the transcript instead.
pub const FALLBACK_GRACE_MS: u64 = 60_000;
/// Longest transcript handed to the fallback summariser (head and tail kept).
pub const MAX_FALLBACK_TRANSCRIPT_CHARS: usize = 70_000;

/// A transcript cut to [`MAX_FALLBACK_TRANSCRIPT_CHARS`]: the start (the task) and the end
/// (the latest state) are kept, the middle is replaced by a marker.
pub fn bounded_transcript(text: &str) -> String {
    let count = text.chars().count();
    if count <= MAX_FALLBACK_TRANSCRIPT_CHARS {
        return text.to_owned();
    }
    let marker = format!("\n\n[… {} characters omitted …]\n\n", count - MAX_FALLBACK_TRANSCRIPT_CHARS);
    let keep = MAX_FALLBACK_TRANSCRIPT_CHARS.saturating_sub(marker.chars().count());
    let head = keep / 3;
    let tail = keep - head;
    let head_text: String = text.chars().take(head).collect();
    let tail_text: String = text.chars().skip(count - tail).collect();
    format!("{head_text}{marker}{tail_text}")
}

/// `ht:<ms base36>:<nonce base36>`; the nonce comes from the caller's randomness.
pub fn transfer_id(now_ms: u64, nonce: u64) -> String {
    format!("ht:{}:{}", base36(now_ms), base36(nonce))
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferStatus {
    SummaryRequested,
    SummaryReady,
    TargetOpening,
    SeedSubmitting,
    SeedUncertain,
    Committed,
    Failed,
}

impl TransferStatus {
    pub fn finished(self) -> bool {
        matches!(self, TransferStatus::Committed | TransferStatus::Failed)
    }
}

/// Why a handoff step is refused; `code()` is the wire name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum HandoffError {
    /// An agent of a bound workspace is working.
    WorkspaceBusy,
    /// The conversation has no binding.
    BindingRequired,
    /// Another transfer of this conversation is in progress.
    HandoffActive { id: String },
    /// The step does not apply in the current status.
    WrongStatus { status: TransferStatus, step: &'static str },
    /// The bindings changed since the transfer started; nothing was moved.
    BindingsChanged,
    /// The seed is not confirmed in a new conversation.
    NotConfirmed,
    Packet(PacketError),
    Bind(BindError),
}

impl HandoffError {
    pub fn code(&self) -> &'static str {
        match self {
            HandoffError::WorkspaceBusy => "workspace_busy",
            HandoffError::BindingRequired => "binding_required",
            HandoffError::HandoffActive { .. } => "handoff_active",
            HandoffError::WrongStatus { .. } => "wrong_status",
            HandoffError::BindingsChanged => "bindings_changed",
            HandoffError::NotConfirmed => "seed_not_confirmed",
            HandoffError::Packet(_) => "packet_invalid",
            HandoffError::Bind(e) => e.code(),
        }
    }
}

impl fmt::Display for HandoffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandoffError::WorkspaceBusy => write!(f, "workspace_busy: a bound workspace still has a working agent"),
            HandoffError::BindingRequired => write!(f, "binding_required: bind this conversation to a workspace first"),
            HandoffError::HandoffActive { id } => write!(f, "handoff_active: transfer {id} is still in progress"),
            HandoffError::WrongStatus { status, step } => write!(f, "cannot {step} while the transfer is {status:?}"),
            HandoffError::BindingsChanged => write!(f, "bindings_changed: the source bindings changed during the transfer"),
            HandoffError::NotConfirmed => write!(f, "seed_not_confirmed: the seed is not seen in a new conversation"),
            HandoffError::Packet(e) => write!(f, "packet_invalid: {e}"),
            HandoffError::Bind(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for HandoffError {}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum PacketError {
    /// No opening marker with an id.
    Missing,
    /// A packet for another transfer.
    IdMismatch { found: String },
    /// Opened but never closed (the reply may still be streaming).
    Unterminated,
    Empty,
    TooLong { chars: usize },
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketError::Missing => write!(f, "no {PACKET_OPEN} id=…>>> marker in the reply"),
            PacketError::IdMismatch { found } => write!(f, "the packet belongs to transfer {found:?}"),
            PacketError::Unterminated => write!(f, "the packet has no {PACKET_CLOSE} end marker"),
            PacketError::Empty => write!(f, "the packet is empty"),
            PacketError::TooLong { chars } => write!(f, "the packet has {chars} characters, more than {MAX_PACKET_CHARS}"),
        }
    }
}

/// The packet body of transfer `id` from an assistant reply. With several packets the last
/// complete one counts (a model may quote the format before writing the real one).
pub fn extract_packet(reply: &str, id: &str) -> Result<String, PacketError> {
    let mut result = Err(PacketError::Missing);
    let mut rest = reply;
    while let Some(open) = rest.find(PACKET_OPEN) {
        let after = &rest[open + PACKET_OPEN.len()..];
        rest = after;
        let Some(header) = after.strip_prefix(" id=") else { continue };
        let Some(end) = header.find(">>>") else { continue };
        let found = header[..end].trim();
        if found.is_empty() || found.contains(char::is_whitespace) {
            continue;
        }
        let body_and_rest = &header[end + 3..];
        if found != id {
            if result == Err(PacketError::Missing) {
                result = Err(PacketError::IdMismatch { found: found.to_owned() });
            }
            continue;
        }
        let Some(close) = body_and_rest.find(PACKET_CLOSE) else {
            if result.is_err() {
                result = Err(PacketError::Unterminated);
            }
            continue;
        };
        let body = body_and_rest[..close].trim();
        let chars = body.chars().count();
        result = if body.is_empty() {
            Err(PacketError::Empty)
        } else if chars > MAX_PACKET_CHARS {
            Err(PacketError::TooLong { chars })
        } else {
            Ok(body.to_owned())
        };
        rest = &body_and_rest[close + PACKET_CLOSE.len()..];
    }
    result
}

/// The request asking the source conversation for its packet (our own wording).
pub fn packet_request(id: &str, lang: Lang) -> String {
    let markers = format!("{PACKET_OPEN} id={id}>>>\n…\n{PACKET_CLOSE}");
    match lang {
        Lang::En => format!("We are moving this work to a new conversation. Write one handoff packet for it: the goal, what is done, what is open, the decisions made and why, the files and workspaces involved, and the very next steps. Keep it under {MAX_PACKET_CHARS} characters and put it between these exact lines, with nothing else inside:\n{markers}"),
        Lang::Zh => format!("我们要把这项工作转到一个新对话中。请为它写一份交接包：目标、已完成的部分、未完成的部分、做过的决定及原因、涉及的文件和工作区，以及接下来的具体步骤。不超过 {MAX_PACKET_CHARS} 个字符，并且只放在下面这两行标记之间：\n{markers}"),
        Lang::Ja => format!("この作業を新しい会話に移します。引き継ぎパケットを一つ書いてください：目的、完了したこと、残っていること、決めたこととその理由、関係するファイルとワークスペース、そして次にやること。{MAX_PACKET_CHARS} 文字以内で、次の二行の目印の間にだけ書いてください：\n{markers}"),
    }
}

/// The seed for the target conversation: a short introduction and the marked packet.
pub fn seed_text(id: &str, packet: &str, lang: Lang) -> String {
    let intro = match lang {
        Lang::En => "This conversation continues earlier work. The handoff packet below describes where it stands; read it and carry on from its next steps.",
        Lang::Zh => "本对话接续之前的工作。下面的交接包说明了当前进展；请阅读后从其中的下一步继续。",
        Lang::Ja => "この会話は以前の作業の続きです。下の引き継ぎパケットに現状がまとめてあります。読んだうえで、次の手順から続けてください。",
    };
    format!("{intro}\n\n{SEED_OPEN} id={id}]\n{packet}\n{SEED_CLOSE}")
}

/// True when a user message in the target carries the seed of transfer `id`.
pub fn has_seed_marker(text: &str, id: &str) -> bool {
    text.contains(&format!("{SEED_OPEN} id={id}]"))
}

/// How the seed delivery went, as the content script reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "reason", rename_all = "snake_case")]
pub enum SeedOutcome {
    /// Submitted and acknowledged by the page.
    Submitted,
    /// Unknown whether it went out (`insert-failed`, `submit-failed`, `no-response`,
    /// `context-invalidated`).
    Uncertain(String),
    /// Certainly not sent.
    Failed(String),
}

/// One transfer record (`herdrConversationTransfers[id]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    pub id: String,
    /// The binding key of the source scope (conversation or Project key).
    pub source_conv_key: String,
    /// The conversation the request was typed into.
    pub source_page_key: String,
    pub site: String,
    pub source_scope: BindingScope,
    /// The bindings (key) that will move, as they were at the start.
    pub binding_keys: Vec<String>,
    pub status: TransferStatus,
    /// A fingerprint of the last assistant reply before the request; the packet must be in
    /// a newer one.
    pub pre_request_reply: String,
    pub packet: Option<String>,
    pub target_conv_key: Option<String>,
    pub failure: Option<String>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

impl Transfer {
    fn step(&mut self, from: &[TransferStatus], to: TransferStatus, step: &'static str, now_ms: u64) -> Result<(), HandoffError> {
        if !from.contains(&self.status) {
            return Err(HandoffError::WrongStatus { status: self.status, step });
        }
        self.status = to;
        self.updated_at_ms = now_ms;
        Ok(())
    }

    /// A new assistant reply in the source. Ok(true) when it carried the packet; Ok(false)
    /// when it is the reply from before the request or still lacks a complete packet.
    pub fn on_source_reply(&mut self, reply: &str, now_ms: u64) -> Result<bool, HandoffError> {
        if self.status != TransferStatus::SummaryRequested {
            return Err(HandoffError::WrongStatus { status: self.status, step: "take a packet" });
        }
        if reply_fingerprint(reply) == self.pre_request_reply {
            return Ok(false);
        }
        match extract_packet(reply, &self.id) {
            Ok(packet) => {
                self.packet = Some(packet);
                self.step(&[TransferStatus::SummaryRequested], TransferStatus::SummaryReady, "take a packet", now_ms)?;
                Ok(true)
            }
            Err(PacketError::Missing | PacketError::Unterminated) => Ok(false),
            Err(e) => Err(HandoffError::Packet(e)),
        }
    }

    /// Whether the source has had its grace period and the fallback summariser may run.
    pub fn fallback_due(&self, now_ms: u64) -> bool {
        self.status == TransferStatus::SummaryRequested && now_ms.saturating_sub(self.created_at_ms) >= FALLBACK_GRACE_MS
    }

    /// Where the target conversation is opened: a Project's launcher for a Project
    /// binding, else the site's new-chat page (the origin of the source conversation).
    pub fn launch_url(&self) -> String {
        if self.source_scope == BindingScope::Project {
            return self.source_conv_key.clone();
        }
        let origin_end = self
            .source_page_key
            .find("://")
            .map(|i| i + 3)
            .and_then(|start| self.source_page_key[start..].find('/').map(|j| start + j))
            .unwrap_or(self.source_page_key.len());
        format!("{}/", &self.source_page_key[..origin_end])
    }

    /// A packet from elsewhere (the configured LLM's summary after the grace period).
    pub fn use_fallback_packet(&mut self, packet: &str, now_ms: u64) -> Result<(), HandoffError> {
        let body = packet.trim();
        let chars = body.chars().count();
        if body.is_empty() {
            return Err(HandoffError::Packet(PacketError::Empty));
        }
        if chars > MAX_PACKET_CHARS {
            return Err(HandoffError::Packet(PacketError::TooLong { chars }));
        }
        self.step(&[TransferStatus::SummaryRequested], TransferStatus::SummaryReady, "take a packet", now_ms)?;
        self.packet = Some(body.to_owned());
        Ok(())
    }

    /// The target page is being opened.
    pub fn open_target(&mut self, now_ms: u64) -> Result<(), HandoffError> {
        self.step(&[TransferStatus::SummaryReady], TransferStatus::TargetOpening, "open the target", now_ms)
    }

    /// Hands out the seed text, exactly once.
    pub fn begin_seed(&mut self, lang: Lang, now_ms: u64) -> Result<String, HandoffError> {
        let packet = self.packet.clone().ok_or(HandoffError::WrongStatus { status: self.status, step: "seed" })?;
        self.step(&[TransferStatus::TargetOpening], TransferStatus::SeedSubmitting, "seed", now_ms)?;
        Ok(seed_text(&self.id, &packet, lang))
    }

    /// The content script's report on the seed.
    pub fn on_seed_outcome(&mut self, outcome: SeedOutcome, now_ms: u64) -> Result<(), HandoffError> {
        match outcome {
            SeedOutcome::Submitted => {
                self.step(&[TransferStatus::SeedSubmitting], TransferStatus::SeedSubmitting, "record the seed", now_ms)
            }
            SeedOutcome::Uncertain(reason) => {
                self.step(&[TransferStatus::SeedSubmitting], TransferStatus::SeedUncertain, "record the seed", now_ms)?;
                self.failure = Some(reason);
                Ok(())
            }
            SeedOutcome::Failed(reason) => {
                self.step(&[TransferStatus::SeedSubmitting], TransferStatus::Failed, "record the seed", now_ms)?;
                self.failure = Some(reason);
                Ok(())
            }
        }
    }

    /// Gives up (user cancel, timeout).
    pub fn fail(&mut self, reason: &str, now_ms: u64) {
        if !self.status.finished() {
            self.status = TransferStatus::Failed;
            self.failure = Some(reason.to_owned());
            self.updated_at_ms = now_ms;
        }
    }

    /// The probe of the target page confirmed the seed there (`seed_confirmed` with the
    /// target's identity): moves the bindings, after checking they are what they were.
    /// A Project binding only changes its active conversation; others move to the target.
    pub fn commit(&mut self, bindings: &mut Bindings, seed_confirmed: bool, target: &ConvTarget, now_ms: u64) -> Result<Vec<Moved>, HandoffError> {
        if !matches!(self.status, TransferStatus::SeedSubmitting | TransferStatus::SeedUncertain) {
            return Err(HandoffError::WrongStatus { status: self.status, step: "commit" });
        }
        let target_page = match target {
            ConvTarget::Project { active_conv_key: Some(active), .. } => active.clone(),
            ConvTarget::Conversation { conv_key, .. } => conv_key.clone(),
            _ => return Err(HandoffError::NotConfirmed),
        };
        if !seed_confirmed || target_page == self.source_page_key {
            return Err(HandoffError::NotConfirmed);
        }
        let mut now_keys: Vec<String> =
            bindings.iter().filter(|b| b.conv_key == self.source_conv_key).map(|b| b.key.clone()).collect();
        now_keys.sort();
        if now_keys != self.binding_keys {
            self.fail("bindings_changed", now_ms);
            return Err(HandoffError::BindingsChanged);
        }
        let moved = match (self.source_scope, target) {
            (BindingScope::Project, ConvTarget::Project { project_key, .. }) if *project_key == self.source_conv_key => {
                bindings.set_project_active(project_key, &target_page, None, now_ms);
                Vec::new()
            }
            (BindingScope::Project, _) => return Err(HandoffError::NotConfirmed),
            _ => bindings.move_conversation(&self.source_conv_key, target, now_ms).map_err(HandoffError::Bind)?,
        };
        self.target_conv_key = Some(target_page);
        self.status = TransferStatus::Committed;
        self.updated_at_ms = now_ms;
        Ok(moved)
    }
}

/// Fingerprint of an assistant reply, to tell a new reply from the one before the request.
pub fn reply_fingerprint(reply: &str) -> String {
    let text = reply.split_whitespace().collect::<Vec<_>>().join(" ");
    // FNV-1a: small, dependency-free, and collisions only cost a missed packet.
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    format!("{}:{hash:016x}", text.chars().count())
}

/// All transfer records; plain serde data.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfers {
    records: BTreeMap<String, Transfer>,
}

impl Transfers {
    /// Starts a transfer of the page's conversation. `source_page_key` is the conversation
    /// the request goes into; `last_reply` the newest assistant reply there before it.
    pub fn start(
        &mut self,
        bindings: &Bindings,
        source: &ConvTarget,
        source_page_key: &str,
        last_reply: &str,
        id: String,
        now_ms: u64,
    ) -> Result<&Transfer, HandoffError> {
        self.prune(now_ms);
        let bound = bindings.for_page(source);
        if bound.is_empty() {
            return Err(HandoffError::BindingRequired);
        }
        let conv_key = source.binding_conv_key().to_owned();
        if let Some(active) = self.records.values().find(|t| t.source_conv_key == conv_key && !t.status.finished()) {
            return Err(HandoffError::HandoffActive { id: active.id.clone() });
        }
        if bound.iter().any(|v| v.binding.status == BindingStatus::Working) {
            return Err(HandoffError::WorkspaceBusy);
        }
        let mut binding_keys: Vec<String> = bound.iter().map(|v| v.binding.key.clone()).collect();
        binding_keys.sort();
        let transfer = Transfer {
            id: id.clone(),
            source_conv_key: conv_key,
            source_page_key: source_page_key.to_owned(),
            site: source.site().to_owned(),
            source_scope: bound[0].binding.scope,
            binding_keys,
            status: TransferStatus::SummaryRequested,
            pre_request_reply: reply_fingerprint(last_reply),
            packet: None,
            target_conv_key: None,
            failure: None,
            created_at_ms: now_ms,
            updated_at_ms: now_ms,
        };
        Ok(self.records.entry(id).or_insert(transfer))
    }

    pub fn get(&self, id: &str) -> Option<&Transfer> {
        self.records.get(id)
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut Transfer> {
        self.records.get_mut(id)
    }

    /// Whether wakes of this conversation (binding key) are paused by a running transfer.
    pub fn blocks_wakes(&self, conv_key: &str) -> bool {
        self.records.values().any(|t| t.source_conv_key == conv_key && !t.status.finished())
    }

    /// Drops records older than [`TRANSFER_KEEP_MS`].
    pub fn prune(&mut self, now_ms: u64) {
        self.records.retain(|_, t| now_ms.saturating_sub(t.created_at_ms) < TRANSFER_KEEP_MS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::continuity::bindings::{TabRef, WorkspaceRef};

    const ID: &str = "ht:abc:1";
    const SRC: &str = "https://chat.z.ai/c/A";

    fn zai(key: &str) -> ConvTarget {
        ConvTarget::Conversation { site: "z.ai".into(), conv_key: key.into() }
    }

    fn packet(id: &str, body: &str) -> String {
        format!("Sure.\n{PACKET_OPEN} id={id}>>>\n{body}\n{PACKET_CLOSE}\nDone.")
    }

    fn bound() -> Bindings {
        let mut b = Bindings::default();
        b.bind(&zai(SRC), WorkspaceRef::Herdr { id: "w1".into() }, None, Some(TabRef { id: 1, url: SRC.into() }), 0).unwrap();
        b.set_auto(SRC, true);
        b
    }

    fn started(b: &Bindings) -> (Transfers, String) {
        let mut t = Transfers::default();
        let id = t.start(b, &zai(SRC), SRC, "old reply", ID.into(), 10).unwrap().id.clone();
        (t, id)
    }

    #[test]
    fn ids_look_like_the_reference() {
        assert_eq!(transfer_id(0, 0), "ht:0:0");
        assert_eq!(transfer_id(36, 35), "ht:10:z");
        assert_eq!(transfer_id(u64::MAX, 1), "ht:3w5e11264sgsf:1");
    }

    #[test]
    fn packet_extraction_checks_markers_id_and_size() {
        assert_eq!(extract_packet(&packet(ID, " the state "), ID), Ok("the state".into()));
        assert_eq!(extract_packet("no packet", ID), Err(PacketError::Missing));
        assert_eq!(extract_packet(&packet("ht:other", "x"), ID), Err(PacketError::IdMismatch { found: "ht:other".into() }));
        assert_eq!(extract_packet(&format!("{PACKET_OPEN} id={ID}>>>\npartial"), ID), Err(PacketError::Unterminated));
        assert_eq!(extract_packet(&packet(ID, "  \n "), ID), Err(PacketError::Empty));
        let at_limit = "字".repeat(MAX_PACKET_CHARS);
        assert_eq!(extract_packet(&packet(ID, &at_limit), ID), Ok(at_limit.clone()));
        let over = format!("{at_limit}x");
        assert_eq!(extract_packet(&packet(ID, &over), ID), Err(PacketError::TooLong { chars: MAX_PACKET_CHARS + 1 }));
        let twice = format!("{}\n{}", packet(ID, "example"), packet(ID, "real"));
        assert_eq!(extract_packet(&twice, ID), Ok("real".into()), "the last complete packet");
        assert_eq!(extract_packet(&format!("{PACKET_OPEN} id=>>>x{PACKET_CLOSE}"), ID), Err(PacketError::Missing));
    }

    #[test]
    fn request_and_seed_carry_the_exact_markers() {
        for lang in [Lang::En, Lang::Zh, Lang::Ja] {
            let req = packet_request(ID, lang);
            assert!(req.contains(&format!("<<<HERDR_HANDOFF_V1 id={ID}>>>")) && req.contains("<<<END_HERDR_HANDOFF_V1>>>"));
            let seed = seed_text(ID, "PACKET", lang);
            assert!(seed.contains(&format!("[HERDR_CONTINUITY_TRANSFER id={ID}]\nPACKET\n[/HERDR_CONTINUITY_TRANSFER]")), "{seed}");
            assert!(has_seed_marker(&seed, ID) && !has_seed_marker(&seed, "ht:x"));
        }
    }

    #[test]
    fn refusals_binding_required_workspace_busy_and_active_transfer() {
        let mut t = Transfers::default();
        let err = t.start(&Bindings::default(), &zai(SRC), SRC, "", ID.into(), 0).unwrap_err();
        assert_eq!(err.code(), "binding_required");
        let mut b = bound();
        b.iter_mut().for_each(|row| row.status = BindingStatus::Working);
        assert_eq!(t.start(&b, &zai(SRC), SRC, "", ID.into(), 0).unwrap_err().code(), "workspace_busy");
        let b = bound();
        t.start(&b, &zai(SRC), SRC, "", ID.into(), 0).unwrap();
        assert!(t.blocks_wakes(SRC));
        assert_eq!(t.start(&b, &zai(SRC), SRC, "", "ht:2".into(), 0).unwrap_err().code(), "handoff_active");
    }

    #[test]
    fn full_z_ai_handoff_moves_the_binding_only_after_confirmation() {
        let mut b = bound();
        let (mut ts, id) = started(&b);
        let t = ts.get_mut(&id).unwrap();
        assert_eq!(t.on_source_reply("old reply", 11), Ok(false), "the reply from before the request");
        assert_eq!(t.on_source_reply(&format!("{PACKET_OPEN} id={ID}>>>\nhalf"), 12), Ok(false), "still streaming");
        assert_eq!(t.on_source_reply(&packet(ID, "state"), 13), Ok(true));
        assert!(t.begin_seed(Lang::En, 14).is_err(), "target not opened yet");
        t.open_target(15).unwrap();
        let seed = t.begin_seed(Lang::En, 16).unwrap();
        assert!(seed.contains("state"));
        assert_eq!(t.begin_seed(Lang::En, 17).unwrap_err().code(), "wrong_status", "the seed is handed out once");
        t.on_seed_outcome(SeedOutcome::Submitted, 18).unwrap();
        let target = zai("https://chat.z.ai/c/B");
        assert_eq!(t.commit(&mut b, false, &target, 19).unwrap_err().code(), "seed_not_confirmed");
        assert_eq!(t.commit(&mut b, true, &zai(SRC), 19).unwrap_err().code(), "seed_not_confirmed", "same conversation");
        assert!(b.get(&format!("{SRC}::w1")).is_some(), "nothing moved yet");
        let moved = t.commit(&mut b, true, &target, 20).unwrap();
        assert_eq!(moved[0].new_key, "https://chat.z.ai/c/B::w1");
        assert!(b.auto("https://chat.z.ai/c/B"), "Auto followed");
        assert_eq!(t.status, TransferStatus::Committed);
        assert!(!ts.blocks_wakes(SRC));
    }

    #[test]
    fn an_uncertain_seed_is_never_handed_out_again_but_may_still_be_confirmed() {
        let mut b = bound();
        let (mut ts, id) = started(&b);
        let t = ts.get_mut(&id).unwrap();
        t.use_fallback_packet("summary by the fallback model", 11).unwrap();
        t.open_target(12).unwrap();
        t.begin_seed(Lang::Zh, 13).unwrap();
        t.on_seed_outcome(SeedOutcome::Uncertain("no-response".into()), 14).unwrap();
        assert_eq!(t.status, TransferStatus::SeedUncertain);
        assert!(t.begin_seed(Lang::Zh, 15).is_err());
        t.commit(&mut b, true, &zai("https://chat.z.ai/c/B"), 16).unwrap();
    }

    #[test]
    fn commit_refuses_when_the_bindings_changed_meanwhile() {
        let mut b = bound();
        let (mut ts, id) = started(&b);
        b.bind(&zai(SRC), WorkspaceRef::Herdr { id: "w2".into() }, None, None, 11).unwrap();
        let t = ts.get_mut(&id).unwrap();
        t.on_source_reply(&packet(ID, "s"), 12).unwrap();
        t.open_target(13).unwrap();
        t.begin_seed(Lang::En, 14).unwrap();
        assert_eq!(t.commit(&mut b, true, &zai("https://chat.z.ai/c/B"), 15).unwrap_err().code(), "bindings_changed");
        assert_eq!(t.status, TransferStatus::Failed);
        assert_eq!(b.len(), 2, "nothing moved");
    }

    #[test]
    fn a_project_handoff_only_changes_the_active_conversation() {
        let project = |active: &str| ConvTarget::Project {
            site: "chatgpt".into(),
            project_id: "g-p-1".into(),
            project_key: "https://chatgpt.com/g/g-p-1".into(),
            active_conv_key: Some(active.into()),
        };
        let a = "https://chatgpt.com/g/g-p-1/c/A";
        let mut b = Bindings::default();
        b.bind(&project(a), WorkspaceRef::Herdr { id: "w1".into() }, None, None, 0).unwrap();
        let mut ts = Transfers::default();
        let t = ts.start(&b, &project(a), a, "", ID.into(), 1).unwrap().id.clone();
        let t = ts.get_mut(&t).unwrap();
        t.on_source_reply(&packet(ID, "s"), 2).unwrap();
        t.open_target(3).unwrap();
        t.begin_seed(Lang::Ja, 4).unwrap();
        t.on_seed_outcome(SeedOutcome::Submitted, 5).unwrap();
        let other_project = ConvTarget::Project {
            site: "chatgpt".into(),
            project_id: "g-p-2".into(),
            project_key: "https://chatgpt.com/g/g-p-2".into(),
            active_conv_key: Some("https://chatgpt.com/g/g-p-2/c/Z".into()),
        };
        assert!(t.commit(&mut b, true, &other_project, 6).is_err());
        t.commit(&mut b, true, &project("https://chatgpt.com/g/g-p-1/c/B"), 7).unwrap();
        let row = b.get("https://chatgpt.com/g/g-p-1::w1").unwrap();
        assert_eq!(row.target_conv_key(), "https://chatgpt.com/g/g-p-1/c/B");
    }

    #[test]
    fn failed_seeds_end_the_transfer_and_records_expire() {
        let b = bound();
        let (mut ts, id) = started(&b);
        let t = ts.get_mut(&id).unwrap();
        t.on_source_reply(&packet(ID, "s"), 11).unwrap();
        t.open_target(12).unwrap();
        t.begin_seed(Lang::En, 13).unwrap();
        t.on_seed_outcome(SeedOutcome::Failed("no_tab".into()), 14).unwrap();
        assert_eq!(t.status, TransferStatus::Failed);
        assert!(t.on_seed_outcome(SeedOutcome::Submitted, 15).is_err());
        ts.prune(10 + TRANSFER_KEEP_MS - 1);
        assert!(ts.get(&id).is_some());
        ts.prune(10 + TRANSFER_KEEP_MS);
        assert!(ts.get(&id).is_none());
    }

    #[test]
    fn fallback_waits_out_the_grace_period_and_bounds_the_transcript() {
        let b = bound();
        let (ts, id) = started(&b);
        let t = ts.get(&id).unwrap();
        assert!(!t.fallback_due(10 + FALLBACK_GRACE_MS - 1));
        assert!(t.fallback_due(10 + FALLBACK_GRACE_MS));
        let short = "a".repeat(MAX_FALLBACK_TRANSCRIPT_CHARS);
        assert_eq!(bounded_transcript(&short), short);
        let long = format!("TASK{}LATEST", "é".repeat(MAX_FALLBACK_TRANSCRIPT_CHARS));
        let cut = bounded_transcript(&long);
        assert_eq!(cut.chars().count(), MAX_FALLBACK_TRANSCRIPT_CHARS);
        assert!(cut.starts_with("TASK") && cut.ends_with("LATEST") && cut.contains("characters omitted"));
    }

    #[test]
    fn targets_open_at_the_project_launcher_or_the_site_root() {
        let b = bound();
        let (ts, id) = started(&b);
        assert_eq!(ts.get(&id).unwrap().launch_url(), "https://chat.z.ai/");
        let project = ConvTarget::Project {
            site: "chatgpt".into(),
            project_id: "g-p-1".into(),
            project_key: "https://chatgpt.com/g/g-p-1".into(),
            active_conv_key: Some("https://chatgpt.com/g/g-p-1/c/A".into()),
        };
        let mut pb = Bindings::default();
        pb.bind(&project, WorkspaceRef::Herdr { id: "w1".into() }, None, None, 0).unwrap();
        let mut ts = Transfers::default();
        let t = ts.start(&pb, &project, "https://chatgpt.com/g/g-p-1/c/A", "", ID.into(), 0).unwrap();
        assert_eq!(t.launch_url(), "https://chatgpt.com/g/g-p-1");
    }

    #[test]
    fn wrong_packet_id_is_an_error_and_keeps_waiting() {
        let b = bound();
        let (mut ts, id) = started(&b);
        let t = ts.get_mut(&id).unwrap();
        assert_eq!(t.on_source_reply(&packet("ht:zzz", "x"), 11).unwrap_err().code(), "packet_invalid");
        assert_eq!(t.status, TransferStatus::SummaryRequested);
        let over = "x".repeat(MAX_PACKET_CHARS + 1);
        assert!(t.use_fallback_packet(&over, 12).is_err());
        t.fail("cancelled", 13);
        assert_eq!((t.status, t.failure.as_deref()), (TransferStatus::Failed, Some("cancelled")));
    }
}

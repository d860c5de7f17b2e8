//! The edge's live workstation links: at most one per workstation, each with its
//! map of requests awaiting an answer. The socket side lives in
//! [`super::link_hub_socket`]; forwarding in [`super::forward`].
//!
//! A request is registered here *before* its frame is queued, so an answer can
//! never race ahead of its registration, and when a link ends every request still
//! waiting is settled at once with [`Outcome::Dropped`] — nothing hangs until its
//! timeout.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{Notify, broadcast, mpsc, oneshot};

use super::devices::DeviceRevoked;
use super::link_hub_auth::{DeviceInfo, LinkAuthenticator, is_routable};
use super::relay::{self, Frame, Hello, RuntimeIdentity, ToolError, ToolResult};
use super::store::EdgeStore;

/// A link silent for this long is shown as `stale` (spec §8: 45 s).
pub const STALE_AFTER: Duration = Duration::from_secs(45);
/// How often, at most, a live link's last-heard time is written to the registry
/// (spec §8: 5 min); it is also written when the link comes up and when it ends.
pub const PERSIST_SEEN_EVERY: Duration = Duration::from_secs(5 * 60);

/// Links one edge process holds at most unless configured otherwise
/// (`edge serve --max-links`, `HERDR_EDGE_MAX_LINKS`): what the bench shows
/// 2 cores carry idle with room left for calls.
pub const DEFAULT_MAX_LINKS: usize = 10_000;
/// How often at most the "link cap reached" warning is repeated while it lasts.
const CAP_WARNING_EVERY_MS: i64 = 10_000;
/// The generation a link was never checked at.
const NEVER_CHECKED: i64 = i64::MIN;

/// How a forwarded request ended.
#[derive(Debug)]
pub enum Outcome {
    Result(ToolResult),
    Error(ToolError),
    /// The link ended before an answer; `revoked` when the registry withdrew its
    /// device (revoked, suspended or re-keyed).
    Dropped { revoked: bool },
}

pub(crate) enum Outbound {
    Frame(String),
    Close(u16, String),
}

/// One accepted link.
pub struct LinkConn {
    pub conn_id: u64,
    pub device: DeviceInfo,
    pub hello: Hello,
    out: mpsc::UnboundedSender<Outbound>,
    pending: Mutex<HashMap<String, oneshot::Sender<Outcome>>>,
    /// When a frame last arrived, on the edge's clock (ms), so staleness follows
    /// the same clock as everything else the edge records.
    last_seen_ms: AtomicI64,
    /// The last-heard time last written to the registry.
    persisted_seen_ms: AtomicI64,
    runtime: Mutex<Option<RuntimeIdentity>>,
    /// How many requests the link last said its workstation runs (`heartbeat`,
    /// `status`); `None` until it first says. Not the edge's own count: a
    /// request goes on running there after the edge stopped waiting for it.
    reported_active: Mutex<Option<u32>>,
    /// Whether the link's local runtime answered, from its last `status` report:
    /// 0 not reported yet, 1 healthy, 2 not.
    healthy: AtomicU8,
    /// The registry generation at which this link's device was last found
    /// admissible; a heartbeat re-reads the device only when the generation moved.
    checked_generation: AtomicI64,
}

impl LinkConn {
    pub(crate) fn new(conn_id: u64, device: DeviceInfo, hello: Hello, out: mpsc::UnboundedSender<Outbound>, now_ms: i64) -> Self {
        let runtime = hello.runtime.clone();
        Self {
            conn_id,
            device,
            hello,
            out,
            pending: Mutex::new(HashMap::new()),
            last_seen_ms: AtomicI64::new(now_ms),
            persisted_seen_ms: AtomicI64::new(i64::MIN),
            runtime: Mutex::new(runtime),
            reported_active: Mutex::new(None),
            healthy: AtomicU8::new(0),
            checked_generation: AtomicI64::new(NEVER_CHECKED),
        }
    }

    /// Registers `request_id`, then queues `frame`. `None` when the link is
    /// already gone, i.e. the request was certainly not delivered.
    pub fn send_request(&self, request_id: &str, frame: String) -> Option<oneshot::Receiver<Outcome>> {
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(request_id.to_string(), tx);
        if self.out.send(Outbound::Frame(frame)).is_err() {
            lock(&self.pending).remove(request_id);
            return None;
        }
        Some(rx)
    }

    /// Queues a frame that expects no answer (cancel, status query).
    pub fn send(&self, frame: &Frame) -> bool {
        self.out.send(Outbound::Frame(frame.encode())).is_ok()
    }

    pub fn forget(&self, request_id: &str) {
        lock(&self.pending).remove(request_id);
    }

    pub(crate) fn close(&self, code: u16, reason: &str) {
        let _ = self.out.send(Outbound::Close(code, reason.to_string()));
    }

    /// Hands an answer to the call waiting for it; gives it back when none waits
    /// (the call already ended, or it was sent over an earlier link).
    pub(crate) fn settle(&self, request_id: &str, outcome: Outcome) -> Option<Outcome> {
        match lock(&self.pending).remove(request_id) {
            Some(tx) => tx.send(outcome).err(),
            None => Some(outcome),
        }
    }

    pub(crate) fn drop_all(&self, revoked: bool) {
        for (_, tx) in lock(&self.pending).drain() {
            let _ = tx.send(Outcome::Dropped { revoked });
        }
    }

    pub(crate) fn touch(&self, now_ms: i64) {
        self.last_seen_ms.fetch_max(now_ms, Ordering::Relaxed);
    }

    /// True when the link answers `status` queries (its hello lists `status`).
    pub(crate) fn answers_status(&self) -> bool {
        self.hello.capabilities.iter().any(|c| c == "status")
    }

    pub(crate) fn observe_health(&self, healthy: bool) {
        self.healthy.store(if healthy { 1 } else { 2 }, Ordering::Relaxed);
    }

    pub(crate) fn observe(&self, runtime: Option<RuntimeIdentity>, active_requests: Option<u32>) {
        if let Some(r) = runtime {
            *lock(&self.runtime) = Some(r);
        }
        if let Some(n) = active_requests {
            *lock(&self.reported_active) = Some(n);
        }
    }

    /// How long no frame has arrived, as of `now_ms` on the edge's clock.
    pub fn silent_for(&self, now_ms: i64) -> Duration {
        Duration::from_millis(now_ms.saturating_sub(self.last_seen_ms.load(Ordering::Relaxed)).max(0) as u64)
    }

    pub fn in_flight(&self) -> usize {
        lock(&self.pending).len()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The maps hold no invariant a panic could break halfway.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Closes a device's link the moment this process revokes it (spec §6: the
/// 4401 close). Changes made by other processes reach the hub through
/// [`super::link_hub_watch`].
pub fn follow_revocations(hub: Arc<LinkHub>, mut rx: broadcast::Receiver<DeviceRevoked>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(r) => hub.revoke(&r.workstation_id),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!("{n} revocation notices were missed; re-checking every link");
                    if let Err(e) = hub.recheck() {
                        tracing::warn!("device registry unreadable: {e}");
                    }
                }
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    })
}

pub struct LinkHub {
    pub(crate) auth: Arc<dyn LinkAuthenticator>,
    /// The ledger of forwarded mutations: late answers settle it, and a
    /// reconnecting link is told from it which answers are still wanted.
    pub(crate) store: Arc<EdgeStore>,
    /// The runtime contract a link's hello must advertise: (epoch, hash).
    pub(crate) runtime_contract: (u32, String),
    links: Mutex<HashMap<String, Arc<LinkConn>>>,
    /// Workstations revoked while this process runs; they never link again even
    /// if the registry answer lags.
    tombstones: Mutex<HashSet<String>>,
    next_conn: AtomicU64,
    /// Links registered so far; the registry watcher re-checks when it moves, so
    /// a link admitted just before a change it already saw is checked too.
    registrations: AtomicU64,
    changed: Notify,
    /// Sockets holding a link slot, from the accepted upgrade to the end of the
    /// socket task (see [`LinkSlot`]); at most `max_links` unless a workstation
    /// replaces its own link.
    held: AtomicUsize,
    max_links: AtomicUsize,
    refused: AtomicU64,
    last_cap_warning_ms: AtomicI64,
}

/// A socket's place under the link cap, given back when dropped.
pub struct LinkSlot {
    hub: Arc<LinkHub>,
}

impl Drop for LinkSlot {
    fn drop(&mut self) {
        self.hub.held.fetch_sub(1, Ordering::SeqCst);
    }
}

impl LinkHub {
    /// Now on the edge's clock (ms): what link staleness is measured with.
    pub fn now_ms(&self) -> i64 {
        self.store.now_ms()
    }

    pub fn new(auth: Arc<dyn LinkAuthenticator>, runtime_contract: (u32, String), store: Arc<EdgeStore>) -> Arc<Self> {
        Arc::new(Self {
            auth,
            store,
            runtime_contract,
            links: Mutex::new(HashMap::new()),
            tombstones: Mutex::new(HashSet::new()),
            next_conn: AtomicU64::new(1),
            registrations: AtomicU64::new(0),
            changed: Notify::new(),
            held: AtomicUsize::new(0),
            max_links: AtomicUsize::new(DEFAULT_MAX_LINKS),
            refused: AtomicU64::new(0),
            last_cap_warning_ms: AtomicI64::new(i64::MIN),
        })
    }

    /// Sets the link cap (at least 1).
    pub fn set_max_links(&self, max: usize) {
        self.max_links.store(max.max(1), Ordering::SeqCst);
    }

    pub fn max_links(&self) -> usize {
        self.max_links.load(Ordering::SeqCst)
    }

    /// Links registered now.
    pub fn link_count(&self) -> usize {
        lock(&self.links).len()
    }

    /// Links refused at the cap since start.
    pub fn refused_at_cap(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// A place under the link cap for a new socket of `workstation_id`, or `None`
    /// (logged, at most every 10 s) when the edge holds its maximum. A workstation
    /// that has a link already always gets one: its new socket replaces the old.
    pub fn reserve_slot(self: &Arc<Self>, workstation_id: &str) -> Option<LinkSlot> {
        let max = self.max_links();
        let taken = self.held.fetch_add(1, Ordering::SeqCst);
        if taken >= max && self.link(workstation_id).is_none() {
            self.held.fetch_sub(1, Ordering::SeqCst);
            let refused = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
            let now = self.now_ms();
            let last = self.last_cap_warning_ms.load(Ordering::Relaxed);
            if now.saturating_sub(last) >= CAP_WARNING_EVERY_MS
                && self.last_cap_warning_ms.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
            {
                tracing::warn!(
                    workstation = %workstation_id,
                    links = self.link_count(),
                    max_links = max,
                    refused_so_far = refused,
                    "link refused: this edge holds its maximum of {max} links (--max-links / HERDR_EDGE_MAX_LINKS); /health and /mcp go on for the links it has"
                );
            }
            return None;
        }
        Some(LinkSlot { hub: Arc::clone(self) })
    }

    pub fn authenticator(&self) -> &dyn LinkAuthenticator {
        self.auth.as_ref()
    }

    pub(crate) fn next_conn_id(&self) -> u64 {
        self.next_conn.fetch_add(1, Ordering::Relaxed)
    }

    /// How many links have been registered (see [`super::link_hub_watch`]).
    pub fn registrations(&self) -> u64 {
        self.registrations.load(Ordering::SeqCst)
    }

    pub fn is_tombstoned(&self, workstation_id: &str) -> bool {
        lock(&self.tombstones).contains(workstation_id)
    }

    /// Writes `conn`'s last-heard time to the registry when it is at least
    /// [`PERSIST_SEEN_EVERY`] newer than the one written before (or `force`d:
    /// the link came up or ended). A failed write is logged; the link goes on.
    pub(crate) fn persist_seen(&self, conn: &LinkConn, force: bool) {
        let seen = conn.last_seen_ms.load(Ordering::Relaxed);
        let before = conn.persisted_seen_ms.load(Ordering::Relaxed);
        let due = seen.saturating_sub(before) >= PERSIST_SEEN_EVERY.as_millis() as i64;
        if !((force && seen > before) || due) {
            return;
        }
        conn.persisted_seen_ms.store(seen, Ordering::Relaxed);
        if let Err(e) = self.auth.record_seen(&conn.device.workstation_id, seen) {
            tracing::warn!(workstation = %conn.device.workstation_id, "cannot record when the link was last heard: {e}");
        }
    }

    /// Makes `conn` the workstation's link; an older one is retired (spec §8: a
    /// newer socket retires the older), and its waiting requests are dropped.
    pub(crate) fn register(&self, conn: Arc<LinkConn>) {
        self.persist_seen(&conn, true);
        let conn_ws = conn.device.workstation_id.clone();
        let old = lock(&self.links).insert(conn.device.workstation_id.clone(), conn);
        self.registrations.fetch_add(1, Ordering::SeqCst);
        if let Some(old) = old {
            old.close(relay::close::SUPERSEDED, "a newer link of this workstation took over");
            old.drop_all(false);
        }
        // Admitted against the registry as it was when the credential was checked;
        // a change committed since (which a re-check of all links may already have
        // passed over) is caught here, for this one device.
        let conn = self.link(&conn_ws);
        if let Some(conn) = conn
            && let Err(e) = self.recheck_link(&conn)
        {
            tracing::warn!(workstation = %conn_ws, "device registry unreadable while admitting a link: {e}");
        }
        self.changed.notify_waiters();
    }

    /// Removes `conn` if it is still the current link of its workstation.
    pub(crate) fn unregister(&self, conn: &LinkConn) {
        let mut links = lock(&self.links);
        if links.get(&conn.device.workstation_id).is_some_and(|c| c.conn_id == conn.conn_id) {
            links.remove(&conn.device.workstation_id);
        }
        drop(links);
        conn.drop_all(false);
        self.persist_seen(conn, true);
        self.changed.notify_waiters();
    }

    pub fn link(&self, workstation_id: &str) -> Option<Arc<LinkConn>> {
        lock(&self.links).get(workstation_id).cloned()
    }

    /// The workstation's link, waiting up to `grace` for one to (re)connect.
    pub async fn wait_for_link(&self, workstation_id: &str, grace: Duration) -> Option<Arc<LinkConn>> {
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let notified = self.changed.notified();
            if let Some(c) = self.link(workstation_id) {
                return Some(c);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.link(workstation_id);
            }
        }
    }

    /// Revocation notice from the device registry: closes the link with 4401,
    /// settles its in-flight work as `link_auth_failed` and refuses it from now on.
    pub fn revoke(&self, workstation_id: &str) {
        lock(&self.tombstones).insert(workstation_id.to_string());
        let conn = lock(&self.links).remove(workstation_id);
        if let Some(conn) = conn {
            // Settle first: once the close goes out, the socket task sees the link end and
            // would settle the same requests as an ordinary drop (delivery_uncertain).
            conn.drop_all(true);
            conn.close(relay::close::DEVICE_REVOKED, "device revoked");
        }
        self.changed.notify_waiters();
    }

    /// Compares every live link with what the registry says about its device now
    /// and closes, with 4401, each link it no longer admits: a revoked or vanished
    /// device for good (tombstone), a suspended one until it is resumed, and one
    /// whose credential was replaced (recovered by a pairing) because the link
    /// still holds the dead one. In-flight work on a closed link settles as
    /// `link_auth_failed`. Returns how many links were closed. One read of the
    /// registry and one pass over the links: run when the registry generation
    /// moved, never per frame.
    pub fn recheck(&self) -> Result<usize, String> {
        let generation = self.auth.registry_generation()?;
        let devices: HashMap<String, DeviceInfo> =
            self.auth.list_devices()?.into_iter().map(|d| (d.workstation_id.clone(), d)).collect();
        let live: Vec<Arc<LinkConn>> = lock(&self.links).values().cloned().collect();
        let mut closed = 0;
        for conn in live {
            if self.judge(&conn, devices.get(&conn.device.workstation_id)) {
                closed += 1;
            } else if let Some(g) = generation {
                conn.checked_generation.store(g, Ordering::Relaxed);
            }
        }
        if closed > 0 {
            self.changed.notify_waiters();
        }
        Ok(closed)
    }

    /// [`Self::recheck`] for one link (a heartbeat, a new link): nothing when the
    /// registry generation has not moved since the link was last found
    /// admissible, else one indexed read of its device. A registry without a
    /// generation is read every time, still for this device only. True when the
    /// link was closed.
    pub fn recheck_link(&self, conn: &LinkConn) -> Result<bool, String> {
        let generation = self.auth.registry_generation()?;
        if generation.is_some_and(|g| conn.checked_generation.load(Ordering::Relaxed) == g) {
            return Ok(false);
        }
        let now = self.auth.device_by_workstation(&conn.device.workstation_id)?;
        if self.judge(conn, now.as_ref()) {
            self.changed.notify_waiters();
            return Ok(true);
        }
        if let Some(g) = generation {
            conn.checked_generation.store(g, Ordering::Relaxed);
        }
        Ok(false)
    }

    /// Closes `conn` when `now` (its device in the registry) no longer admits it;
    /// true when it did.
    fn judge(&self, conn: &LinkConn, now: Option<&DeviceInfo>) -> bool {
        let ws = &conn.device.workstation_id;
        let reason = match now {
            None => "device revoked",
            Some(d) if d.authorization == "revoked" => "device revoked",
            Some(d) if d.authorization == "suspended" => "device suspended",
            Some(d) if d.credential_id != conn.device.credential_id => "device credential replaced",
            Some(_) => return false,
        };
        if reason == "device revoked" {
            self.revoke(ws);
            return true;
        }
        let mut links = lock(&self.links);
        if links.get(ws).is_some_and(|c| c.conn_id == conn.conn_id) {
            links.remove(ws);
        }
        drop(links);
        conn.drop_all(true);
        conn.close(relay::close::DEVICE_REVOKED, reason);
        tracing::info!(workstation = %ws, conn = conn.conn_id, "link closed: {reason}");
        true
    }

    /// Up to `limit` devices with a live link whose device, as the registry says
    /// now, may be routed to. Reads the registry for the few links it looks at,
    /// not for the fleet: links of devices that may not be routed to are closed by
    /// the re-checks, so the first ones looked at are nearly always the answer.
    pub fn live_routable(&self, limit: usize) -> Result<Vec<DeviceInfo>, String> {
        let mut out = Vec::new();
        // The registry is read under the links' lock; nothing that holds the
        // store's lock ever takes this one, and it is only a few indexed reads.
        let links = lock(&self.links);
        for c in links.values().filter(|c| is_routable(&c.device)) {
            if out.len() >= limit {
                break;
            }
            if let Some(d) = self.auth.device_by_workstation(&c.device.workstation_id)?.filter(is_routable) {
                out.push(d);
            }
        }
        Ok(out)
    }

    /// Closes every link (edge shutdown).
    pub fn close_all(&self) {
        let all: Vec<Arc<LinkConn>> = lock(&self.links).drain().map(|(_, c)| c).collect();
        for c in all {
            c.drop_all(false);
            c.close(relay::close::GOING_AWAY, "the edge is shutting down");
        }
    }

    /// Rows of `herdr_devices`: the registry joined with the live links, one
    /// read of the registry and one map lookup per row.
    pub fn device_rows(&self) -> Result<Vec<Value>, String> {
        let devices = self.auth.list_devices()?;
        let now = self.now_ms();
        Ok(devices.into_iter().map(|d| self.row(d, now)).collect())
    }

    /// The `herdr_devices` row of one device: one indexed read.
    pub fn device_row(&self, device_id: &str) -> Result<Option<Value>, String> {
        let now = self.now_ms();
        Ok(self.auth.device_by_id(device_id)?.map(|d| self.row(d, now)))
    }

    fn row(&self, d: DeviceInfo, now: i64) -> Value {
        let mut row = json!({
            "device_id": d.device_id,
            "name": d.name,
            "authorization": d.authorization,
            "scheduling": d.scheduling,
        });
        if let Some(obj) = row.as_object_mut() {
            obj.extend(live_fields(self.link(&d.workstation_id).as_deref(), d.last_seen_ms, now));
        }
        row
    }
}

/// What the live link says about a device (spec §9), as `herdr_devices` and
/// `GET /devices` show it: `connection` (`online`, `stale` past [`STALE_AFTER`]
/// of silence, `offline` without a link), `health` (`ok` or `runtime_unavailable`
/// as the link's last `status` report said, else `unknown`), the runtime the link last
/// reported, `last_seen_ago_ms`, the requests the edge awaits from it
/// (`active_requests`) and the ones the link last reported running
/// (`link_active_requests`, null without a link or before its first report).
/// Without a link, `last_seen_ago_ms` comes from `recorded_seen_ms`, the time the
/// registry holds (null if the device never linked); `(None, None, _)` gives
/// the row of a device that never linked.
pub fn live_fields(link: Option<&LinkConn>, recorded_seen_ms: Option<i64>, now_ms: i64) -> serde_json::Map<String, Value> {
    let connection = match link {
        None => "offline",
        Some(c) if c.silent_for(now_ms) > STALE_AFTER => "stale",
        Some(_) => "online",
    };
    let runtime = link.and_then(|c| lock(&c.runtime).clone());
    let fields = json!({
        "connection": connection,
        "health": match link.map(|c| c.healthy.load(Ordering::Relaxed)) {
            Some(1) => "ok",
            Some(2) => "runtime_unavailable",
            _ => "unknown",
        },
        "runtime_version": runtime.as_ref().map(|r| r.runtime_version.clone()),
        "runtime_generation": runtime.as_ref().and_then(|r| r.runtime_generation.clone()),
        "last_seen_ago_ms": match link {
            Some(c) => Some(c.silent_for(now_ms).as_millis() as u64),
            None => recorded_seen_ms.map(|t| now_ms.saturating_sub(t).max(0) as u64),
        },
        "active_requests": link.map(|c| c.in_flight()).unwrap_or(0),
        "link_active_requests": link.and_then(|c| *lock(&c.reported_active)),
    });
    match fields {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

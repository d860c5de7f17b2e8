//! The device registry: the workstations enrolled with this edge, the credentials
//! their links present, and their lifecycle (rename, revoke). Pairing, which
//! creates devices, is in [`super::pairing`]; the HTTP routes in
//! [`super::devices_http`].
//!
//! API for the link hub (`/ws/<workstation_id>`):
//! - [`DeviceRegistry::verify_link`] (or [`DeviceRegistry::verify_link_hex`] for the
//!   `herdr-auth.<hex>` subprotocol) checks a link credential and returns the
//!   [`Device`], or a [`LinkAuthError`] whose [`LinkAuthError::code`] is the wire code
//!   (`link_auth_failed`, `device_revoked`, `device_suspended`, `device_not_found`).
//! - [`DeviceRegistry::list_devices`] is the inventory behind `herdr_devices` and
//!   `GET /devices` (never any secret).
//! - [`DeviceRegistry::subscribe_revocations`] yields a [`DeviceRevoked`] for each
//!   revocation made through this registry; the hub closes that device's open link
//!   with 4401 at once.
//! - [`DeviceRegistry::generation`] is a counter that every change of a device's
//!   authorization or credential raises, in the same transaction, whichever
//!   process makes it. The operator's `device revoke|suspend|resume` write the
//!   database directly, so the serving hub polls this counter (see
//!   [`super::link_hub_watch`]) to close such a device's link within a second.
//!
//! At rest a device secret exists only as SHA-256 (`verifier_sha256`): it carries
//! 256 random bits, so a plain hash is not brute-forceable. A revoked device keeps
//! its row and verifier as a tombstone, so its old credential is answered
//! `device_revoked` forever and its id is never reused.

use std::sync::Arc;

use rusqlite::{OptionalExtension, Row, Transaction, params};
use serde::Serialize;
use tokio::sync::broadcast;

use super::link_hub_auth::LinkAuthError;
use super::secrets::{random_bytes, random_hex, same, sha256_hex};
use super::store::EdgeStore;

pub const DEVICE_ID_PREFIX: &str = "dev_";
pub const SECRET_PREFIX: &str = "devsec_";
pub const CREDENTIAL_PREFIX: &str = "cred_";
pub const MAX_NAME_CHARS: usize = 64;
/// Earlier names kept on rename, so a selector using an old name still resolves.
pub const MAX_ALIASES: usize = 32;
const REVOCATION_CHANNEL: usize = 64;

/// Crockford base32, the ULID alphabet.
const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// One enrolled device as `GET /devices` and `herdr_devices` show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Device {
    pub device_id: String,
    /// Equal to `device_id` for paired devices; the key of `/ws/<workstation_id>`.
    pub workstation_id: String,
    pub name: String,
    /// Who chose `name`: `default` (generated at enrollment), `pairing`, `rename`
    /// or `link` (the link's name header). Only a `default` name may be replaced
    /// by the link's header, so a reconnect never undoes a choice.
    pub name_source: String,
    pub aliases: Vec<String>,
    /// `active`, `suspended` or `revoked`.
    pub authorization: String,
    /// `enabled`; anything else means the device is paused (`device_paused`).
    pub scheduling: String,
    pub credential_id: Option<String>,
    pub enrolled_at_ms: i64,
    pub updated_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
    /// When its link was last heard, as the hub last recorded it (at most every
    /// [`super::link_hub::PERSIST_SEEN_EVERY`] while linked, and when the link ends).
    pub last_seen_ms: Option<i64>,
}

impl Device {
    pub fn is_active(&self) -> bool {
        self.authorization == "active"
    }
}

/// Sent on the revocation channel; the hub closes this workstation's link (4401).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceRevoked {
    pub device_id: String,
    pub workstation_id: String,
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("no device {0}")]
    NotFound(String),
    #[error("device {0} is already revoked")]
    AlreadyRevoked(String),
    #[error("device {0} is suspended; resume it first")]
    Suspended(String),
    #[error("{0}")]
    InvalidName(String),
    #[error("device {0} is linked right now; recovery is for a computer that lost its credential: stop that link first, or revoke the device")]
    Linked(String),
    #[error("device registry: {0}")]
    Db(#[from] rusqlite::Error),
}

impl DeviceError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotFound(_) => "device_not_found",
            Self::AlreadyRevoked(_) => "device_revoked",
            Self::Suspended(_) => "device_suspended",
            Self::InvalidName(_) => "invalid_device_name",
            Self::Linked(_) => "device_online",
            Self::Db(_) => "device_registry_unavailable",
        }
    }
    pub fn status(&self) -> u16 {
        match self {
            Self::NotFound(_) => 404,
            Self::AlreadyRevoked(_) | Self::Suspended(_) | Self::Linked(_) => 409,
            Self::InvalidName(_) => 400,
            Self::Db(_) => 500,
        }
    }
}

/// A freshly enrolled device and its secret, which exists in clear only here.
pub struct Enrolled {
    pub device: Device,
    pub device_secret: String,
    /// True when a pairing re-keyed an existing device instead of creating one.
    pub recovered_existing: bool,
}

impl std::fmt::Debug for Enrolled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enrolled")
            .field("device", &self.device)
            .field("device_secret", &"<redacted>")
            .field("recovered_existing", &self.recovered_existing)
            .finish()
    }
}

pub struct DeviceRegistry {
    store: Arc<EdgeStore>,
    revoked: broadcast::Sender<DeviceRevoked>,
}

const DEVICE_COLUMNS: &str = "device_id, workstation_id, name, aliases, authorization, scheduling, credential_id,
     enrolled_at_ms, updated_at_ms, revoked_at_ms, name_source, last_seen_ms";

fn device_from_row(r: &Row<'_>) -> rusqlite::Result<Device> {
    let aliases: String = r.get(3)?;
    Ok(Device {
        device_id: r.get(0)?,
        workstation_id: r.get(1)?,
        name: r.get(2)?,
        aliases: serde_json::from_str(&aliases).unwrap_or_default(),
        authorization: r.get(4)?,
        scheduling: r.get(5)?,
        credential_id: r.get(6)?,
        enrolled_at_ms: r.get(7)?,
        updated_at_ms: r.get(8)?,
        revoked_at_ms: r.get(9)?,
        name_source: r.get(10)?,
        last_seen_ms: r.get(11)?,
    })
}

/// Raises the registry generation; called in the transaction of every change to
/// a device's authorization or credential.
pub(crate) fn bump_generation(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute("UPDATE device_registry_state SET generation = generation + 1 WHERE id = 1", []).map(|_| ())
}

pub(crate) fn load_device(tx: &Transaction<'_>, column: &str, value: &str) -> rusqlite::Result<Option<Device>> {
    // `column` is one of two literals chosen in this module, never input.
    debug_assert!(column == "device_id" || column == "workstation_id");
    tx.prepare_cached(&format!("SELECT {DEVICE_COLUMNS} FROM devices WHERE {column} = ?1"))?.query_row([value], device_from_row).optional()
}

/// `dev_` + a ULID (48-bit millisecond time, 80 random bits, Crockford base32), so
/// ids sort by enrollment time and match `^dev_[0-7][0-9A-HJKMNP-TV-Z]{25}$`.
pub fn new_device_id(now_ms: i64) -> String {
    let rand = random_bytes::<10>();
    let mut value: u128 = (now_ms.max(0) as u128 & ((1 << 48) - 1)) << 80;
    for (i, b) in rand.iter().enumerate() {
        value |= (*b as u128) << (8 * (9 - i));
    }
    let mut out = String::with_capacity(4 + 26);
    out.push_str(DEVICE_ID_PREFIX);
    for i in 0..26 {
        out.push(CROCKFORD[((value >> (125 - 5 * i)) & 31) as usize] as char);
    }
    out
}

pub fn is_device_id(s: &str) -> bool {
    let Some(rest) = s.strip_prefix(DEVICE_ID_PREFIX) else { return false };
    rest.len() == 26 && rest.as_bytes()[0] <= b'7' && rest.bytes().all(|b| CROCKFORD.contains(&b))
}

/// A device name: 1..=64 characters after trimming, no control characters, and not
/// shaped like a device id (a selector must never be ambiguous between the two).
pub fn validate_name(name: &str) -> Result<String, DeviceError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(DeviceError::InvalidName(format!("a device name has 1 to {MAX_NAME_CHARS} characters")));
    }
    if name.chars().any(char::is_control) {
        return Err(DeviceError::InvalidName("a device name has no control characters".into()));
    }
    if name.starts_with(DEVICE_ID_PREFIX) {
        return Err(DeviceError::InvalidName(format!("a device name cannot start with {DEVICE_ID_PREFIX:?}")));
    }
    Ok(name.to_string())
}

impl DeviceRegistry {
    pub fn new(store: Arc<EdgeStore>) -> Self {
        let (revoked, _) = broadcast::channel(REVOCATION_CHANNEL);
        Self { store, revoked }
    }

    pub fn store(&self) -> &Arc<EdgeStore> {
        &self.store
    }

    /// Revocations made through this registry from now on.
    pub fn subscribe_revocations(&self) -> broadcast::Receiver<DeviceRevoked> {
        self.revoked.subscribe()
    }

    /// Checks a link credential for `/ws/<workstation_id>`. The secret is compared
    /// before the device's state is disclosed: only the holder of the right secret
    /// learns that its device is revoked or suspended.
    pub fn verify_link(&self, workstation_id: &str, secret: &str) -> Result<Device, LinkAuthError> {
        let found = self.store.read(|tx| {
            let Some(device) = load_device(tx, "workstation_id", workstation_id)? else { return Ok(None) };
            let verifier: Option<String> = match &device.credential_id {
                Some(cred) => tx
                    .query_row(
                        "SELECT verifier_sha256 FROM device_credentials WHERE credential_id = ?1 AND device_id = ?2",
                        params![cred, device.device_id],
                        |r| r.get(0),
                    )
                    .optional()?,
                None => None,
            };
            Ok::<_, rusqlite::Error>(Some((device, verifier)))
        });
        let (device, verifier) = match found {
            Ok(Some(found)) => found,
            Ok(None) => return Err(LinkAuthError::NotFound),
            Err(e) => return Err(LinkAuthError::Unavailable(e.to_string())),
        };
        let Some(verifier) = verifier else { return Err(LinkAuthError::Rejected) };
        if !secret.starts_with(SECRET_PREFIX) || !same(&sha256_hex(secret.as_bytes()), &verifier) {
            return Err(LinkAuthError::Rejected);
        }
        match device.authorization.as_str() {
            "active" => Ok(device),
            "suspended" => Err(LinkAuthError::Suspended),
            _ => Err(LinkAuthError::Revoked),
        }
    }

    /// [`Self::verify_link`] for the `herdr-auth.<hex>` subprotocol, whose suffix is
    /// the hex of the secret's UTF-8 bytes.
    pub fn verify_link_hex(&self, workstation_id: &str, secret_hex: &str) -> Result<Device, LinkAuthError> {
        let bytes = hex::decode(secret_hex).map_err(|_| LinkAuthError::Rejected)?;
        let secret = String::from_utf8(bytes).map_err(|_| LinkAuthError::Rejected)?;
        self.verify_link(workstation_id, &secret)
    }

    /// Every device, revoked tombstones included, oldest enrollment first.
    pub fn list_devices(&self) -> rusqlite::Result<Vec<Device>> {
        self.store.read(|tx| {
            let mut stmt = tx.prepare(&format!("SELECT {DEVICE_COLUMNS} FROM devices ORDER BY enrolled_at_ms, device_id"))?;
            stmt.query_map([], device_from_row)?.collect::<rusqlite::Result<Vec<_>>>()
        })
    }

    /// The device whose link key is `workstation_id` (a unique index).
    pub fn device_by_workstation(&self, workstation_id: &str) -> rusqlite::Result<Option<Device>> {
        self.store.read(|tx| load_device(tx, "workstation_id", workstation_id))
    }

    /// Devices not revoked called `name` now (the name index), oldest enrollment first.
    pub fn devices_named(&self, name: &str) -> rusqlite::Result<Vec<Device>> {
        self.store.read(|tx| {
            let sql = format!(
                "SELECT {DEVICE_COLUMNS} FROM devices WHERE name = ?1 AND authorization != 'revoked' ORDER BY enrolled_at_ms, device_id"
            );
            tx.prepare_cached(&sql)?.query_map([name], device_from_row)?.collect()
        })
    }

    /// Devices not revoked once called `name` (the alias table), oldest enrollment first.
    pub fn devices_once_named(&self, name: &str) -> rusqlite::Result<Vec<Device>> {
        self.store.read(|tx| {
            let columns = DEVICE_COLUMNS.split(',').map(|c| format!("d.{}", c.trim())).collect::<Vec<_>>().join(", ");
            let sql = format!(
                "SELECT {columns} FROM device_aliases a JOIN devices d ON d.device_id = a.device_id
                 WHERE a.alias = ?1 AND d.authorization != 'revoked' ORDER BY d.enrolled_at_ms, d.device_id"
            );
            tx.prepare_cached(&sql)?.query_map([name], device_from_row)?.collect()
        })
    }

    /// Up to `limit` routable devices (active, scheduling enabled), oldest
    /// enrollment first; the enrollment index stops the scan at `limit`.
    pub fn routable_devices(&self, limit: usize) -> rusqlite::Result<Vec<Device>> {
        self.store.read(|tx| {
            let sql = format!(
                "SELECT {DEVICE_COLUMNS} FROM devices INDEXED BY devices_enrolled
                 WHERE authorization = 'active' AND scheduling = 'enabled' ORDER BY enrolled_at_ms, device_id LIMIT ?1"
            );
            tx.prepare_cached(&sql)?.query_map([limit as i64], device_from_row)?.collect()
        })
    }

    /// The registry generation (see the module documentation): one cheap read.
    pub fn generation(&self) -> rusqlite::Result<i64> {
        self.store.read(|tx| tx.prepare_cached("SELECT generation FROM device_registry_state WHERE id = 1")?.query_row([], |r| r.get(0)))
    }

    pub fn device(&self, device_id: &str) -> rusqlite::Result<Option<Device>> {
        self.store.read(|tx| load_device(tx, "device_id", device_id))
    }

    /// Records that the link of `workstation_id` was heard at `at_ms`; an earlier
    /// time never replaces a later one. Not an authorization change, so the
    /// registry generation stays.
    pub fn record_seen(&self, workstation_id: &str, at_ms: i64) -> rusqlite::Result<()> {
        self.store.write(|tx| {
            tx.execute(
                "UPDATE devices SET last_seen_ms = MAX(COALESCE(last_seen_ms, ?2), ?2) WHERE workstation_id = ?1",
                params![workstation_id, at_ms],
            )
            .map(|_| ())
        })
    }

    /// Renames an active device; the old name joins its aliases (newest last, at
    /// most [`MAX_ALIASES`]).
    pub fn rename(&self, device_id: &str, name: &str) -> Result<Device, DeviceError> {
        let name = validate_name(name)?;
        let now = self.store.now_ms();
        self.store.write(|tx| {
            let Some(mut d) = load_device(tx, "device_id", device_id)? else {
                return Err(DeviceError::NotFound(device_id.to_string()));
            };
            if !d.is_active() {
                return Err(DeviceError::AlreadyRevoked(device_id.to_string()));
            }
            if d.name != name {
                let old = std::mem::replace(&mut d.name, name);
                d.aliases.retain(|a| *a != old && *a != d.name);
                d.aliases.push(old);
                let excess = d.aliases.len().saturating_sub(MAX_ALIASES);
                d.aliases.drain(..excess);
            }
            d.updated_at_ms = now;
            d.name_source = "rename".into();
            tx.execute(
                "UPDATE devices SET name = ?2, updated_at_ms = ?3, name_source = 'rename' WHERE device_id = ?1",
                params![d.device_id, d.name, now],
            )?;
            write_aliases(tx, &d.device_id, &d.aliases)?;
            Ok(d)
        })
    }

    /// Revokes a device for good (tombstone) and tells the link hub to close its link.
    pub fn revoke(&self, device_id: &str, by: &str) -> Result<Device, DeviceError> {
        let now = self.store.now_ms();
        let device = self.store.write(|tx| {
            let Some(mut d) = load_device(tx, "device_id", device_id)? else {
                return Err(DeviceError::NotFound(device_id.to_string()));
            };
            if d.authorization == "revoked" {
                return Err(DeviceError::AlreadyRevoked(device_id.to_string()));
            }
            tx.execute(
                "UPDATE devices SET authorization = 'revoked', revoked_at_ms = ?2, revoked_by = ?3, updated_at_ms = ?2
                 WHERE device_id = ?1",
                params![device_id, now, by],
            )?;
            bump_generation(tx)?;
            d.authorization = "revoked".into();
            d.revoked_at_ms = Some(now);
            d.updated_at_ms = now;
            Ok(d)
        })?;
        // No subscriber (no hub running) is fine: there is no link to close then.
        let _ = self.revoked.send(DeviceRevoked { device_id: device.device_id.clone(), workstation_id: device.workstation_id.clone() });
        Ok(device)
    }
}

/// Stores a device's earlier names: the JSON column the record shows and the
/// alias table routing looks names up in, always together.
pub(crate) fn write_aliases(tx: &Transaction<'_>, device_id: &str, aliases: &[String]) -> rusqlite::Result<()> {
    tx.execute(
        "UPDATE devices SET aliases = ?2 WHERE device_id = ?1",
        params![device_id, serde_json::to_string(aliases).unwrap_or_else(|_| "[]".into())],
    )?;
    tx.execute("DELETE FROM device_aliases WHERE device_id = ?1", [device_id])?;
    let mut insert = tx.prepare_cached("INSERT OR IGNORE INTO device_aliases (alias, device_id) VALUES (?1, ?2)")?;
    for alias in aliases {
        insert.execute(params![alias, device_id])?;
    }
    Ok(())
}

/// Creates a device and its credential inside the caller's transaction (pairing).
pub(crate) fn enroll(tx: &Transaction<'_>, name: Option<String>, now_ms: i64) -> rusqlite::Result<Enrolled> {
    let device_id = new_device_id(now_ms);
    let credential_id = format!("{CREDENTIAL_PREFIX}{}", random_hex::<16>());
    // The default name is the id's random tail: unique enough to select by, and
    // replaced by the name the device's link offers when it first connects.
    let (name, source) = match name {
        Some(n) => (n, "pairing"),
        None => (format!("device-{}", &device_id[device_id.len() - 6..].to_ascii_lowercase()), "default"),
    };
    tx.execute(
        "INSERT INTO devices (device_id, workstation_id, name, aliases, authorization, scheduling, credential_id,
                              enrolled_at_ms, updated_at_ms, name_source)
         VALUES (?1, ?1, ?2, '[]', 'active', 'enabled', ?3, ?4, ?4, ?5)",
        params![device_id, name, credential_id, now_ms, source],
    )?;
    let device_secret = insert_credential(tx, &credential_id, &device_id, now_ms)?;
    let device = load_device(tx, "device_id", &device_id)?.ok_or(rusqlite::Error::QueryReturnedNoRows)?;
    Ok(Enrolled { device, device_secret, recovered_existing: false })
}

/// Stores the verifier of a fresh secret under `credential_id`; the secret itself,
/// which exists in clear only in the caller's answer.
pub(crate) fn insert_credential(tx: &Transaction<'_>, credential_id: &str, device_id: &str, now_ms: i64) -> rusqlite::Result<String> {
    let device_secret = format!("{SECRET_PREFIX}{}", random_hex::<32>());
    tx.execute(
        "INSERT INTO device_credentials (credential_id, device_id, workstation_id, verifier_sha256, created_at_ms)
         VALUES (?1, ?2, ?2, ?3, ?4)",
        params![credential_id, device_id, sha256_hex(device_secret.as_bytes()), now_ms],
    )?;
    Ok(device_secret)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::edge::clock::ManualClock;

    /// A registry on a fresh state directory (kept alive by the returned guard).
    pub(crate) fn registry() -> (tempfile::TempDir, DeviceRegistry) {
        let tmp = tempfile::tempdir().unwrap();
        EdgeStore::init(tmp.path()).unwrap();
        let store = Arc::new(EdgeStore::open(tmp.path(), Arc::new(ManualClock::new(1_800_000_000_000))).unwrap());
        (tmp, DeviceRegistry::new(store))
    }

    fn enrolled(reg: &DeviceRegistry, name: &str) -> Enrolled {
        reg.store.write(|tx| enroll(tx, Some(name.into()), reg.store.now_ms())).unwrap()
    }

    #[test]
    fn device_ids_are_ulids() {
        let re = regex::Regex::new("^dev_[0-7][0-9A-HJKMNP-TV-Z]{25}$").unwrap();
        for _ in 0..100 {
            let id = new_device_id(1_800_000_000_000);
            assert!(re.is_match(&id) && is_device_id(&id), "{id}");
        }
        // The time prefix sorts: a later millisecond gives a greater id.
        assert!(new_device_id(1_800_000_000_001)[..14] > new_device_id(1_800_000_000_000)[..14]);
        // 2^48 - 1 ms is the largest ULID time: "7ZZZZZZZZZ".
        assert_eq!(&new_device_id((1 << 48) - 1)[4..14], "7ZZZZZZZZZ");
        assert!(!is_device_id("dev_8ZZZZZZZZZZZZZZZZZZZZZZZZZ"));
        assert!(!is_device_id("dev_0123456789ABCDEFGHJKMNPQRI"));
    }

    #[test]
    fn verify_link_checks_secret_then_state() {
        let (_t, reg) = registry();
        let e = enrolled(&reg, "laptop");
        let ws = &e.device.workstation_id;
        assert_eq!(ws, &e.device.device_id);
        assert!(e.device_secret.starts_with(SECRET_PREFIX) && e.device_secret.len() == 7 + 64);
        assert_eq!(reg.verify_link(ws, &e.device_secret).unwrap().name, "laptop");
        assert_eq!(reg.verify_link_hex(ws, &hex::encode(&e.device_secret)).unwrap().device_id, *ws);
        assert_eq!(reg.verify_link(ws, "devsec_00").unwrap_err().code(), "link_auth_failed");
        assert_eq!(reg.verify_link_hex(ws, "zz").unwrap_err().code(), "link_auth_failed");
        assert_eq!(reg.verify_link("dev_00000000000000000000000000", &e.device_secret).unwrap_err().code(), "device_not_found");
        // The clear secret is nowhere in the database.
        let hits: i64 = reg
            .store
            .read(|tx| tx.query_row("SELECT COUNT(*) FROM device_credentials WHERE verifier_sha256 = ?1", [&e.device_secret], |r| r.get(0)))
            .unwrap();
        assert_eq!(hits, 0);
    }

    #[test]
    fn revoke_is_a_tombstone_and_is_announced() {
        let (_t, reg) = registry();
        let e = enrolled(&reg, "laptop");
        let other = enrolled(&reg, "desktop");
        let mut rx = reg.subscribe_revocations();
        let d = reg.revoke(&e.device.device_id, "test").unwrap();
        assert_eq!(d.authorization, "revoked");
        assert_eq!(rx.try_recv().unwrap(), DeviceRevoked { device_id: d.device_id.clone(), workstation_id: d.workstation_id.clone() });
        assert_eq!(reg.verify_link(&d.workstation_id, &e.device_secret).unwrap_err().code(), "device_revoked");
        // A wrong secret for a revoked device learns nothing about its state.
        assert_eq!(reg.verify_link(&d.workstation_id, &other.device_secret).unwrap_err().code(), "link_auth_failed");
        assert_eq!(reg.revoke(&d.device_id, "test").unwrap_err().code(), "device_revoked");
        assert_eq!(reg.rename(&d.device_id, "again").unwrap_err().code(), "device_revoked");
        assert_eq!(reg.revoke("dev_nope", "test").unwrap_err().code(), "device_not_found");
        let all = reg.list_devices().unwrap();
        assert_eq!(all.len(), 2);
        assert!(reg.verify_link(&other.device.workstation_id, &other.device_secret).is_ok());
    }

    #[test]
    fn rename_keeps_aliases_within_the_limit() {
        let (_t, reg) = registry();
        let e = enrolled(&reg, "n0");
        for i in 1..=40 {
            reg.rename(&e.device.device_id, &format!("n{i}")).unwrap();
        }
        let d = reg.device(&e.device.device_id).unwrap().unwrap();
        assert_eq!(d.name, "n40");
        assert_eq!(d.aliases.len(), MAX_ALIASES);
        assert_eq!(d.aliases.first().map(String::as_str), Some("n8"));
        assert_eq!(d.aliases.last().map(String::as_str), Some("n39"));
        for bad in ["", "   ", "a\u{7}b", "dev_lookalike", &"x".repeat(MAX_NAME_CHARS + 1)] {
            assert_eq!(reg.rename(&e.device.device_id, bad).unwrap_err().code(), "invalid_device_name", "{bad:?}");
        }
        assert!(reg.rename(&e.device.device_id, &"y".repeat(MAX_NAME_CHARS)).is_ok());
    }
}

//! Pairing (spec §7): how a new computer becomes a device. An enrolled device (or
//! the operator, with `edge init` / `edge pair`) creates a pairing: a `pair_` id and
//! a 6-digit code, both shown to the person who types them on the new computer.
//! `worker connect` consumes it and receives a device id and secret once.
//!
//! Rules: TTL 60..=600 s (default 600); one live pairing per edge (a new one
//! replaces the old); at most 5 wrong codes, the 5th locks it; every failure,
//! whatever its cause (unknown, expired, locked, wrong code), is the same
//! `pairing_rejected`, so a guesser learns nothing. At rest the pairing is keyed
//! by SHA-256 of its id and its code is an HMAC under the deployment pepper, so a
//! copy of the database alone neither reveals nor brute-forces the code.
//!
//! A consumer may name an existing active device (`recover_device_id`): the right
//! code then re-keys that device instead of creating one (a computer that lost its
//! credential keeps its id, name and history). The target is checked only after
//! the code, so a guesser learns nothing about devices either.

use rusqlite::{OptionalExtension, params};

use super::devices::{DeviceError, DeviceRegistry, Enrolled, enroll, validate_name};
use super::devices_lifecycle::rekey;
use super::secrets::{hmac_hex, random_hex, same, sha256_hex, six_digit_code};

pub const PAIRING_PREFIX: &str = "pair_";
pub const MIN_TTL_S: i64 = 60;
pub const MAX_TTL_S: i64 = 600;
pub const DEFAULT_TTL_S: i64 = 600;
pub const MAX_ATTEMPTS: i64 = 5;
/// The `worker_context` of the verifier. Upstream binds a pairing to its Worker
/// this way; here the pepper is already unique to the deployment, so a constant
/// context only separates this HMAC's domain from the approval codes'.
const WORKER_CONTEXT: &str = "herdr-mcp-edge";

/// A pairing as its creator sees it (the only time the code exists in clear).
pub struct Pairing {
    pub pairing_id: String,
    pub code: String,
    pub expires_at_ms: i64,
}

impl std::fmt::Debug for Pairing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pairing").field("pairing_id", &self.pairing_id).field("expires_at_ms", &self.expires_at_ms).finish()
    }
}

impl Pairing {
    /// `<origin>/pair#<pairing_id>`: the id rides in the fragment, which browsers
    /// and proxies never send or log.
    pub fn address(&self, origin: &str) -> String {
        format!("{}/pair#{}", origin.trim_end_matches('/'), self.pairing_id)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PairingError {
    #[error("ttl_seconds must be an integer from {MIN_TTL_S} to {MAX_TTL_S}")]
    InvalidTtl,
    #[error("{0}")]
    InvalidName(String),
    #[error("pairing rejected: the address or code is wrong, expired or locked")]
    Rejected,
    /// The code was right but the device to recover cannot be (the pairing stays live).
    #[error("cannot recover the device: {0}")]
    Recover(DeviceError),
    #[error("device registry: {0}")]
    Db(#[from] rusqlite::Error),
}

impl PairingError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidTtl => "invalid_pairing_ttl",
            Self::InvalidName(_) => "invalid_device_name",
            Self::Rejected => "pairing_rejected",
            Self::Recover(e) => e.code(),
            Self::Db(_) => "device_registry_unavailable",
        }
    }
    pub fn status(&self) -> u16 {
        match self {
            Self::InvalidTtl | Self::InvalidName(_) => 400,
            Self::Rejected => 401,
            Self::Recover(e) => e.status(),
            Self::Db(_) => 500,
        }
    }
}

fn name_or_error(name: Option<&str>) -> Result<Option<String>, PairingError> {
    name.map(validate_name).transpose().map_err(|e| match e {
        DeviceError::InvalidName(m) => PairingError::InvalidName(m),
        other => PairingError::InvalidName(other.to_string()),
    })
}

fn pairing_key(pairing_id: &str) -> String {
    sha256_hex(pairing_id.as_bytes())
}

fn verifier(pepper: &[u8], pairing_id: &str, code: &str) -> String {
    hmac_hex(pepper, &format!("herdr-pairing-v1:{pairing_id}:{WORKER_CONTEXT}:{code}"))
}

fn is_pairing_id(s: &str) -> bool {
    s.strip_prefix(PAIRING_PREFIX).is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl DeviceRegistry {
    /// Creates the edge's one live pairing, replacing any other. `name` presets the
    /// new device's name (the consumer may still choose its own).
    pub fn create_pairing(&self, ttl_seconds: Option<i64>, name: Option<&str>, created_by: &str) -> Result<Pairing, PairingError> {
        let ttl = ttl_seconds.unwrap_or(DEFAULT_TTL_S);
        if !(MIN_TTL_S..=MAX_TTL_S).contains(&ttl) {
            return Err(PairingError::InvalidTtl);
        }
        let name = name_or_error(name)?;
        let store = self.store();
        let now = store.now_ms();
        let pairing = Pairing {
            pairing_id: format!("{PAIRING_PREFIX}{}", random_hex::<32>()),
            code: six_digit_code(),
            expires_at_ms: now + ttl * 1000,
        };
        let v = verifier(store.pepper(), &pairing.pairing_id, &pairing.code);
        store.write(|tx| {
            tx.execute("DELETE FROM pairings", [])?;
            tx.execute(
                "INSERT INTO pairings (pairing_key, verifier, name, created_by, created_at_ms, expires_at_ms, attempts, status)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, 'live')",
                params![pairing_key(&pairing.pairing_id), v, name, created_by, now, pairing.expires_at_ms],
            )?;
            Ok::<_, rusqlite::Error>(())
        })?;
        Ok(pairing)
    }

    /// Consumes a pairing: on the right code, in one transaction, the pairing is
    /// deleted and a device with a fresh credential is created. A wrong code counts
    /// an attempt, and that count is committed even though the call fails.
    pub fn consume_pairing(&self, pairing_id: &str, code: &str, name: Option<&str>) -> Result<Enrolled, PairingError> {
        self.consume_pairing_recover(pairing_id, code, name, None, &|_| false)
    }

    /// [`Self::consume_pairing`], or with `recover_device_id` a re-key of that
    /// existing active device ([`Enrolled::recovered_existing`]), refused with
    /// `device_online` while `is_linked` says its link is up.
    pub fn consume_pairing_recover(
        &self,
        pairing_id: &str,
        code: &str,
        name: Option<&str>,
        recover_device_id: Option<&str>,
        is_linked: &dyn Fn(&str) -> bool,
    ) -> Result<Enrolled, PairingError> {
        let name = name_or_error(name)?;
        if !is_pairing_id(pairing_id) {
            return Err(PairingError::Rejected);
        }
        let store = self.store();
        let now = store.now_ms();
        let key = pairing_key(pairing_id);
        let given = verifier(store.pepper(), pairing_id, code);
        store.write(|tx| {
            type Row = (String, Option<String>, i64, i64, String);
            let row: Option<Row> = tx
                .query_row(
                    "SELECT verifier, name, expires_at_ms, attempts, status FROM pairings WHERE pairing_key = ?1",
                    [&key],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .optional()?;
            let Some((expected, preset, expires_at_ms, attempts, status)) = row else { return Ok(Err(PairingError::Rejected)) };
            if expires_at_ms <= now {
                tx.execute("DELETE FROM pairings WHERE pairing_key = ?1", [&key])?;
                return Ok(Err(PairingError::Rejected));
            }
            if status != "live" {
                return Ok(Err(PairingError::Rejected));
            }
            let well_formed = code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit());
            if !well_formed || !same(&given, &expected) {
                let attempts = attempts + 1;
                let status = if attempts >= MAX_ATTEMPTS { "locked" } else { "live" };
                tx.execute("UPDATE pairings SET attempts = ?2, status = ?3 WHERE pairing_key = ?1", params![key, attempts, status])?;
                return Ok(Err(PairingError::Rejected));
            }
            if let Some(target) = recover_device_id {
                // A device whose link is up has its credential: re-keying it would
                // hand a working computer's identity (and its calls) to whoever
                // holds this pairing. The pairing stays usable.
                if is_linked(target) {
                    return Ok(Err(PairingError::Recover(DeviceError::Linked(target.to_string()))));
                }
                return match rekey(tx, target, name.as_deref(), now) {
                    Ok(e) => {
                        tx.execute("DELETE FROM pairings WHERE pairing_key = ?1", [&key])?;
                        Ok(Ok(e))
                    }
                    Err(DeviceError::Db(e)) => Err(e),
                    Err(e) => Ok(Err(PairingError::Recover(e))),
                };
            }
            tx.execute("DELETE FROM pairings WHERE pairing_key = ?1", [&key])?;
            enroll(tx, name.or(preset), now).map(Ok)
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::clock::ManualClock;
    use crate::edge::store::EdgeStore;
    use std::sync::Arc;

    fn registry() -> (tempfile::TempDir, ManualClock, DeviceRegistry) {
        let tmp = tempfile::tempdir().unwrap();
        EdgeStore::init(tmp.path()).unwrap();
        let clock = ManualClock::new(1_800_000_000_000);
        let store = Arc::new(EdgeStore::open(tmp.path(), Arc::new(clock.clone())).unwrap());
        (tmp, clock, DeviceRegistry::new(store))
    }

    fn wrong(code: &str) -> String {
        format!("{:06}", (code.parse::<u32>().unwrap() + 1) % 1_000_000)
    }

    #[test]
    fn ttl_bounds_are_inclusive() {
        let (_t, _c, reg) = registry();
        for ok in [60, 600] {
            assert!(reg.create_pairing(Some(ok), None, "t").is_ok(), "{ok}");
        }
        for bad in [59, 601, 0, -1] {
            assert_eq!(reg.create_pairing(Some(bad), None, "t").unwrap_err().code(), "invalid_pairing_ttl", "{bad}");
        }
        assert_eq!(reg.create_pairing(None, Some(""), "t").unwrap_err().code(), "invalid_device_name");
    }

    #[test]
    fn pairing_enrolls_once_with_the_preset_or_given_name() {
        let (_t, _c, reg) = registry();
        let p = reg.create_pairing(None, Some("preset"), "t").unwrap();
        assert!(is_pairing_id(&p.pairing_id));
        assert_eq!(p.address("https://e.example/"), format!("https://e.example/pair#{}", p.pairing_id));
        let e = reg.consume_pairing(&p.pairing_id, &p.code, None).unwrap();
        assert_eq!(e.device.name, "preset");
        assert!(reg.verify_link(&e.device.workstation_id, &e.device_secret).is_ok());
        // Consumed: the same code again is rejected.
        assert_eq!(reg.consume_pairing(&p.pairing_id, &p.code, None).unwrap_err().code(), "pairing_rejected");
        let p = reg.create_pairing(None, Some("preset"), "t").unwrap();
        assert_eq!(reg.consume_pairing(&p.pairing_id, &p.code, Some("chosen")).unwrap().device.name, "chosen");
    }

    #[test]
    fn fifth_wrong_code_locks() {
        let (_t, _c, reg) = registry();
        let p = reg.create_pairing(None, None, "t").unwrap();
        for _ in 0..4 {
            assert_eq!(reg.consume_pairing(&p.pairing_id, &wrong(&p.code), None).unwrap_err().code(), "pairing_rejected");
        }
        // Four failures leave it usable...
        let p2 = reg.create_pairing(None, None, "t").unwrap();
        for _ in 0..4 {
            reg.consume_pairing(&p2.pairing_id, "12345x", None).unwrap_err();
        }
        assert!(reg.consume_pairing(&p2.pairing_id, &p2.code, None).is_ok());
        // ...the fifth locks it even for the right code.
        let p3 = reg.create_pairing(None, None, "t").unwrap();
        for _ in 0..5 {
            reg.consume_pairing(&p3.pairing_id, &wrong(&p3.code), None).unwrap_err();
        }
        assert_eq!(reg.consume_pairing(&p3.pairing_id, &p3.code, None).unwrap_err().code(), "pairing_rejected");
        assert_eq!(reg.list_devices().unwrap().len(), 1);
    }

    #[test]
    fn recovery_rekeys_after_the_code_is_checked() {
        let (_t, _c, reg) = registry();
        let p = reg.create_pairing(None, None, "t").unwrap();
        let first = reg.consume_pairing(&p.pairing_id, &p.code, Some("laptop")).unwrap();
        assert!(!first.recovered_existing);
        let id = first.device.device_id.clone();

        let p = reg.create_pairing(None, None, "t").unwrap();
        // A wrong code fails the same way whatever the target, and counts.
        let err = reg.consume_pairing_recover(&p.pairing_id, &wrong(&p.code), None, Some("dev_nope"), &|_| false).unwrap_err();
        assert_eq!(err.code(), "pairing_rejected");
        // The right code with an unknown target: refused, the pairing stays usable.
        let err = reg.consume_pairing_recover(&p.pairing_id, &p.code, None, Some("dev_nope"), &|_| false).unwrap_err();
        assert_eq!((err.code(), err.status()), ("device_not_found", 404));
        let r = reg.consume_pairing_recover(&p.pairing_id, &p.code, None, Some(&id), &|_| false).unwrap();
        assert!(r.recovered_existing);
        assert_eq!((r.device.device_id.as_str(), r.device.name.as_str()), (id.as_str(), "laptop"));
        assert_eq!(reg.verify_link(&id, &first.device_secret).unwrap_err().code(), "link_auth_failed");
        assert!(reg.verify_link(&id, &r.device_secret).is_ok());
        assert_eq!(reg.list_devices().unwrap().len(), 1);
        // Spent.
        assert_eq!(reg.consume_pairing_recover(&p.pairing_id, &p.code, None, Some(&id), &|_| false).unwrap_err().code(), "pairing_rejected");

        // A suspended or revoked device is not recovered.
        reg.suspend(&id, "t").unwrap();
        let p = reg.create_pairing(None, None, "t").unwrap();
        assert_eq!(reg.consume_pairing_recover(&p.pairing_id, &p.code, None, Some(&id), &|_| false).unwrap_err().code(), "device_suspended");
        reg.revoke(&id, "t").unwrap();
        assert_eq!(reg.consume_pairing_recover(&p.pairing_id, &p.code, None, Some(&id), &|_| false).unwrap_err().code(), "device_revoked");
    }

    #[test]
    fn expiry_and_replacement() {
        let (_t, clock, reg) = registry();
        let p = reg.create_pairing(Some(60), None, "t").unwrap();
        clock.advance_ms(60_000);
        assert_eq!(reg.consume_pairing(&p.pairing_id, &p.code, None).unwrap_err().code(), "pairing_rejected");
        let old = reg.create_pairing(Some(60), None, "t").unwrap();
        clock.advance_ms(59_999);
        let new = reg.create_pairing(None, None, "t").unwrap();
        assert_eq!(reg.consume_pairing(&old.pairing_id, &old.code, None).unwrap_err().code(), "pairing_rejected");
        assert!(reg.consume_pairing(&new.pairing_id, &new.code, None).is_ok());
    }
}

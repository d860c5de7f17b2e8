//! Device lifecycle beyond enrollment and revocation: suspend and resume (the
//! operator's reversible switch), re-keying an existing device when a pairing
//! recovers it, and the name a device's link offers on its first connection.
//! Every change of authorization or credential raises the registry generation in
//! the same transaction, which is how a serving hub in another process notices.

use rusqlite::{Transaction, params};

use super::devices::{
    CREDENTIAL_PREFIX, Device, DeviceError, DeviceRegistry, Enrolled, bump_generation, insert_credential, load_device, validate_name,
};
use super::secrets::random_hex;

impl DeviceRegistry {
    /// Suspends an active device: its link is refused (`device_suspended`) and
    /// calls routed to it answer `device_suspended` until [`Self::resume`].
    /// Suspending a suspended device changes nothing.
    pub fn suspend(&self, device_id: &str, by: &str) -> Result<Device, DeviceError> {
        self.set_authorization(device_id, "suspended", by)
    }

    /// Lets a suspended device link again. Resuming an active device changes nothing.
    pub fn resume(&self, device_id: &str, by: &str) -> Result<Device, DeviceError> {
        self.set_authorization(device_id, "active", by)
    }

    fn set_authorization(&self, device_id: &str, to: &str, by: &str) -> Result<Device, DeviceError> {
        let now = self.store().now_ms();
        self.store().write(|tx| {
            let Some(mut d) = load_device(tx, "device_id", device_id)? else {
                return Err(DeviceError::NotFound(device_id.to_string()));
            };
            if d.authorization == "revoked" {
                return Err(DeviceError::AlreadyRevoked(device_id.to_string()));
            }
            if d.authorization == to {
                return Ok(d);
            }
            tx.execute("UPDATE devices SET authorization = ?2, updated_at_ms = ?3 WHERE device_id = ?1", params![device_id, to, now])?;
            bump_generation(tx)?;
            tracing::info!(device = device_id, by, "device authorization {} -> {to}", d.authorization);
            d.authorization = to.to_string();
            d.updated_at_ms = now;
            Ok(d)
        })
    }

    /// Takes the name a device's link offers, but only while the device still has
    /// the name generated at enrollment: a name chosen at pairing, by a rename or
    /// by an earlier link is never overwritten. The name in effect afterwards.
    pub fn adopt_link_name(&self, device_id: &str, name: &str) -> Result<Device, DeviceError> {
        let name = validate_name(name)?;
        let now = self.store().now_ms();
        self.store().write(|tx| {
            let Some(mut d) = load_device(tx, "device_id", device_id)? else {
                return Err(DeviceError::NotFound(device_id.to_string()));
            };
            if d.name_source != "default" {
                return Ok(d);
            }
            tx.execute(
                "UPDATE devices SET name = ?2, name_source = 'link', updated_at_ms = ?3 WHERE device_id = ?1",
                params![device_id, name, now],
            )?;
            d.name = name;
            d.name_source = "link".into();
            d.updated_at_ms = now;
            Ok(d)
        })
    }
}

/// Gives an existing active device a new credential inside the caller's
/// transaction (a pairing consumed with `recover_device_id`): same device id, the
/// old credential deleted, so its secret stops working at once. A `name`, when
/// given, renames the device as `rename` would.
pub(crate) fn rekey(tx: &Transaction<'_>, device_id: &str, name: Option<&str>, now_ms: i64) -> Result<Enrolled, DeviceError> {
    let Some(d) = load_device(tx, "device_id", device_id)? else {
        return Err(DeviceError::NotFound(device_id.to_string()));
    };
    match d.authorization.as_str() {
        "active" => {}
        "suspended" => return Err(DeviceError::Suspended(device_id.to_string())),
        _ => return Err(DeviceError::AlreadyRevoked(device_id.to_string())),
    }
    let credential_id = format!("{CREDENTIAL_PREFIX}{}", random_hex::<16>());
    tx.execute("DELETE FROM device_credentials WHERE device_id = ?1", [device_id])?;
    let device_secret = insert_credential(tx, &credential_id, device_id, now_ms)?;
    tx.execute("UPDATE devices SET credential_id = ?2, updated_at_ms = ?3 WHERE device_id = ?1", params![device_id, credential_id, now_ms])?;
    if let Some(n) = name.filter(|n| *n != d.name) {
        let mut aliases = d.aliases.clone();
        aliases.retain(|a| a != n && *a != d.name);
        aliases.push(d.name.clone());
        let excess = aliases.len().saturating_sub(super::devices::MAX_ALIASES);
        aliases.drain(..excess);
        tx.execute("UPDATE devices SET name = ?2, name_source = 'rename' WHERE device_id = ?1", params![device_id, n])?;
        super::devices::write_aliases(tx, device_id, &aliases)?;
    }
    bump_generation(tx)?;
    let device = load_device(tx, "device_id", device_id)?.ok_or_else(|| DeviceError::NotFound(device_id.to_string()))?;
    Ok(Enrolled { device, device_secret, recovered_existing: true })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::devices::enroll;
    use crate::edge::devices::tests::registry;

    fn enrolled(reg: &DeviceRegistry, name: Option<&str>) -> Enrolled {
        reg.store().write(|tx| enroll(tx, name.map(str::to_string), reg.store().now_ms())).unwrap()
    }

    #[test]
    fn suspend_and_resume_move_the_generation() {
        let (_t, reg) = registry();
        let e = enrolled(&reg, Some("laptop"));
        let id = &e.device.device_id;
        let g0 = reg.generation().unwrap();
        assert_eq!(reg.suspend(id, "op").unwrap().authorization, "suspended");
        let g1 = reg.generation().unwrap();
        assert!(g1 > g0);
        assert_eq!(reg.verify_link(id, &e.device_secret).unwrap_err().code(), "device_suspended");
        // Suspending again is a no-op and does not move the generation.
        reg.suspend(id, "op").unwrap();
        assert_eq!(reg.generation().unwrap(), g1);
        assert_eq!(reg.resume(id, "op").unwrap().authorization, "active");
        assert!(reg.generation().unwrap() > g1);
        assert!(reg.verify_link(id, &e.device_secret).is_ok());
        let g2 = reg.generation().unwrap();
        reg.revoke(id, "op").unwrap();
        assert!(reg.generation().unwrap() > g2);
        assert_eq!(reg.suspend(id, "op").unwrap_err().code(), "device_revoked");
        assert_eq!(reg.resume(id, "op").unwrap_err().code(), "device_revoked");
        assert_eq!(reg.suspend("dev_nope", "op").unwrap_err().code(), "device_not_found");
    }

    #[test]
    fn a_link_names_only_a_device_with_a_generated_name() {
        let (_t, reg) = registry();
        let unnamed = enrolled(&reg, None);
        assert_eq!(unnamed.device.name_source, "default");
        let id = &unnamed.device.device_id;
        assert_eq!(reg.adopt_link_name(id, "from-link").unwrap().name, "from-link");
        // The first offer won; a later reconnect with another name changes nothing.
        assert_eq!(reg.adopt_link_name(id, "other").unwrap().name, "from-link");
        assert_eq!(reg.adopt_link_name(id, "\u{7}").unwrap_err().code(), "invalid_device_name");

        let unnamed = enrolled(&reg, None);
        reg.rename(&unnamed.device.device_id, "chosen").unwrap();
        assert_eq!(reg.adopt_link_name(&unnamed.device.device_id, "from-link").unwrap().name, "chosen");
        let named = enrolled(&reg, Some("paired"));
        assert_eq!(reg.adopt_link_name(&named.device.device_id, "from-link").unwrap().name, "paired");
    }

    #[test]
    fn rekey_replaces_the_credential_of_an_active_device() {
        let (_t, reg) = registry();
        let e = enrolled(&reg, Some("laptop"));
        let id = e.device.device_id.clone();
        let g0 = reg.generation().unwrap();
        let r = reg.store().write(|tx| rekey(tx, &id, Some("laptop-2"), 1)).unwrap();
        assert!(r.recovered_existing);
        assert_eq!(r.device.device_id, id);
        assert_ne!(r.device.credential_id, e.device.credential_id);
        assert_eq!((r.device.name.as_str(), r.device.aliases.clone()), ("laptop-2", vec!["laptop".to_string()]));
        assert!(reg.generation().unwrap() > g0);
        assert_eq!(reg.verify_link(&id, &e.device_secret).unwrap_err().code(), "link_auth_failed");
        assert!(reg.verify_link(&id, &r.device_secret).is_ok());
        let creds: i64 = reg
            .store()
            .read(|tx| tx.query_row("SELECT COUNT(*) FROM device_credentials WHERE device_id = ?1", [&id], |r| r.get(0)))
            .unwrap();
        assert_eq!(creds, 1, "the old credential is gone");

        reg.suspend(&id, "op").unwrap();
        let err = reg.store().write(|tx| rekey(tx, &id, None, 2)).unwrap_err();
        assert_eq!(err.code(), "device_suspended");
        reg.revoke(&id, "op").unwrap();
        assert_eq!(reg.store().write(|tx| rekey(tx, &id, None, 3)).unwrap_err().code(), "device_revoked");
        assert_eq!(reg.store().write(|tx| rekey(tx, "dev_nope", None, 3)).unwrap_err().code(), "device_not_found");
    }
}

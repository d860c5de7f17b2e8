//! The device registry as the link hub's [`LinkAuthenticator`]: the hub asks it on
//! every connect and heartbeat, so a revocation (from any process writing the same
//! database) closes the device's link within one heartbeat, and the revocation
//! channel ([`DeviceRegistry::subscribe_revocations`]) can close it at once.

use super::devices::{self, Device, DeviceRegistry};
use super::link_hub_auth::{DeviceInfo, LinkAuthError, LinkAuthenticator};

fn info(d: Device) -> DeviceInfo {
    DeviceInfo {
        device_id: d.device_id,
        workstation_id: d.workstation_id,
        name: d.name,
        authorization: d.authorization,
        scheduling: d.scheduling,
    }
}

impl LinkAuthenticator for DeviceRegistry {
    fn verify_link(&self, workstation_id: &str, secret: &str) -> Result<DeviceInfo, LinkAuthError> {
        DeviceRegistry::verify_link(self, workstation_id, secret).map(info).map_err(|e| match e {
            devices::LinkAuthError::Failed => LinkAuthError::Rejected,
            devices::LinkAuthError::Revoked => LinkAuthError::Revoked,
            devices::LinkAuthError::Suspended => LinkAuthError::Suspended,
            devices::LinkAuthError::NotFound => LinkAuthError::NotFound,
            devices::LinkAuthError::Unavailable(m) => LinkAuthError::Unavailable(m),
        })
    }

    fn list_devices(&self) -> Result<Vec<DeviceInfo>, String> {
        DeviceRegistry::list_devices(self).map(|all| all.into_iter().map(info).collect()).map_err(|e| e.to_string())
    }
}

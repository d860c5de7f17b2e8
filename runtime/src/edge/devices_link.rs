//! The device registry as the link hub's [`LinkAuthenticator`]: the hub asks it on
//! every connect and heartbeat, polls its generation to see changes made by other
//! processes, and the revocation channel
//! ([`DeviceRegistry::subscribe_revocations`]) closes a link at once when this
//! process revokes.

use super::devices::{Device, DeviceRegistry};
use super::link_hub_auth::{DeviceInfo, LinkAuthError, LinkAuthenticator};

fn info(d: Device) -> DeviceInfo {
    DeviceInfo {
        device_id: d.device_id,
        workstation_id: d.workstation_id,
        name: d.name,
        aliases: d.aliases,
        authorization: d.authorization,
        scheduling: d.scheduling,
        credential_id: d.credential_id,
        last_seen_ms: d.last_seen_ms,
    }
}

impl LinkAuthenticator for DeviceRegistry {
    fn verify_link(&self, workstation_id: &str, secret: &str) -> Result<DeviceInfo, LinkAuthError> {
        DeviceRegistry::verify_link(self, workstation_id, secret).map(info)
    }

    fn list_devices(&self) -> Result<Vec<DeviceInfo>, String> {
        DeviceRegistry::list_devices(self).map(|all| all.into_iter().map(info).collect()).map_err(|e| e.to_string())
    }

    fn device_by_workstation(&self, workstation_id: &str) -> Result<Option<DeviceInfo>, String> {
        DeviceRegistry::device_by_workstation(self, workstation_id).map(|d| d.map(info)).map_err(|e| e.to_string())
    }

    fn device_by_id(&self, device_id: &str) -> Result<Option<DeviceInfo>, String> {
        self.device(device_id).map(|d| d.map(info)).map_err(|e| e.to_string())
    }

    fn devices_named(&self, name: &str) -> Result<Vec<DeviceInfo>, String> {
        DeviceRegistry::devices_named(self, name).map(|all| all.into_iter().map(info).collect()).map_err(|e| e.to_string())
    }

    fn devices_once_named(&self, name: &str) -> Result<Vec<DeviceInfo>, String> {
        DeviceRegistry::devices_once_named(self, name).map(|all| all.into_iter().map(info).collect()).map_err(|e| e.to_string())
    }

    fn routable_devices(&self, limit: usize) -> Result<Vec<DeviceInfo>, String> {
        DeviceRegistry::routable_devices(self, limit).map(|all| all.into_iter().map(info).collect()).map_err(|e| e.to_string())
    }

    fn registry_generation(&self) -> Result<Option<i64>, String> {
        self.generation().map(Some).map_err(|e| e.to_string())
    }

    fn record_seen(&self, workstation_id: &str, at_ms: i64) -> Result<(), String> {
        DeviceRegistry::record_seen(self, workstation_id, at_ms).map_err(|e| e.to_string())
    }

    fn offer_name(&self, device: &DeviceInfo, name: &str) -> Result<String, String> {
        self.adopt_link_name(&device.device_id, name).map(|d| d.name).map_err(|e| e.to_string())
    }
}

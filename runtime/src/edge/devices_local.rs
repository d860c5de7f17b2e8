//! The workstation side of enrollment: the credential `herdr-mcp worker connect`
//! received, kept in `<state dir>/device.json` (0600 in a 0700 directory). The
//! link (`herdr-mcp link`) and the `worker`/`device` commands read it to reach the
//! edge as this device.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub const FILE: &str = "device.json";
/// Overrides where the credential file lives (tests, several enrollments on one machine).
pub const PATH_ENV: &str = "HERDR_MCP_DEVICE_FILE";

#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalDevice {
    /// The edge's public origin (its issuer), e.g. `https://edge.example.com`.
    pub edge_origin: String,
    pub device_id: String,
    pub workstation_id: String,
    pub credential_id: String,
    /// `devsec_…`: the edge keeps only its hash; losing this file means re-pairing.
    pub device_secret: String,
    pub name: String,
    pub enrolled_at_ms: i64,
}

impl std::fmt::Debug for LocalDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalDevice")
            .field("edge_origin", &self.edge_origin)
            .field("device_id", &self.device_id)
            .field("workstation_id", &self.workstation_id)
            .field("credential_id", &self.credential_id)
            .field("device_secret", &"<redacted>")
            .field("name", &self.name)
            .finish()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LocalDeviceError {
    #[error("this computer is not enrolled ({0} does not exist); run `herdr-mcp worker connect <address>`")]
    NotEnrolled(String),
    #[error("this computer is already enrolled as {device_id} ({path}); remove that file to enroll again")]
    AlreadyEnrolled { device_id: String, path: String },
    #[error("device credential {path}: {message}")]
    Io { path: String, message: String },
}

/// `$HERDR_MCP_DEVICE_FILE`, else `device.json` in the runtime's state directory.
pub fn default_path() -> anyhow::Result<PathBuf> {
    let env = |n: &str| std::env::var(n).ok().filter(|v| !v.is_empty());
    if let Some(p) = env(PATH_ENV) {
        return Ok(PathBuf::from(p));
    }
    let dir = crate::state::resolve_state_dir(
        None,
        env("HERDR_MCP_STATE_DIR").as_deref(),
        env("XDG_STATE_HOME").as_deref(),
        env("HOME").as_deref(),
    )?;
    Ok(dir.join(FILE))
}

/// Reads the credential; refuses a file others can read, since it is a bearer secret.
pub fn load(path: &Path) -> Result<LocalDevice, LocalDeviceError> {
    let io = |message: String| LocalDeviceError::Io { path: path.display().to_string(), message };
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LocalDeviceError::NotEnrolled(path.display().to_string()));
        }
        Err(e) => return Err(io(e.to_string())),
    };
    if meta.is_dir() {
        return Err(io(format!("is a directory; {PATH_ENV} and --device-file name the credential file itself")));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(io("is readable by others; it must be 0600".into()));
    }
    let text = fs::read_to_string(path).map_err(|e| io(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| {
        io(format!(
            "is damaged ({e}); move it aside and enroll again with a new pairing: `herdr-mcp worker connect <address> --recover <dev_id>` keeps this device's id"
        ))
    })
}

/// Writes a new credential (0600, via a temporary file and rename, so a crash never
/// leaves half a secret); an existing enrollment is never overwritten.
pub fn save(path: &Path, device: &LocalDevice) -> Result<(), LocalDeviceError> {
    let io = |message: String| LocalDeviceError::Io { path: path.display().to_string(), message };
    if let Ok(existing) = load(path) {
        return Err(LocalDeviceError::AlreadyEnrolled { device_id: existing.device_id, path: path.display().to_string() });
    }
    if path.exists() {
        return Err(io("exists but is not a readable credential; move it away first".into()));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::state::dir::ensure_private_dir(dir).map_err(|e| io(e.to_string()))?;
    }
    write_private(path, device)
}

/// Records a new name for the enrolled device (after the edge accepted it).
pub fn set_name(path: &Path, name: &str) -> Result<(), LocalDeviceError> {
    let mut device = load(path)?;
    device.name = name.to_string();
    write_private(path, &device)
}

/// Writes `device` to `path` (0600) via a temporary file and rename, so a crash
/// never leaves half a secret and a reader sees the old or the new file whole.
fn write_private(path: &Path, device: &LocalDevice) -> Result<(), LocalDeviceError> {
    let io = |message: String| LocalDeviceError::Io { path: path.display().to_string(), message };
    let tmp = path.with_extension("json.tmp");
    let _ = fs::remove_file(&tmp);
    let mut f = fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp).map_err(|e| io(e.to_string()))?;
    let text = serde_json::to_string_pretty(device).map_err(|e| io(e.to_string()))?;
    f.write_all(text.as_bytes()).and_then(|_| f.sync_all()).map_err(|e| io(e.to_string()))?;
    fs::rename(&tmp, path).map_err(|e| io(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> LocalDevice {
        LocalDevice {
            edge_origin: "https://edge.example".into(),
            device_id: "dev_01J00000000000000000000000".into(),
            workstation_id: "dev_01J00000000000000000000000".into(),
            credential_id: "cred_00".into(),
            device_secret: "devsec_secret".into(),
            name: "laptop".into(),
            enrolled_at_ms: 1,
        }
    }

    #[test]
    fn save_is_private_once_and_load_round_trips() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("state").join(FILE);
        assert!(matches!(load(&path), Err(LocalDeviceError::NotEnrolled(_))));
        save(&path, &sample()).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(load(&path).unwrap(), sample());
        assert!(matches!(save(&path, &sample()), Err(LocalDeviceError::AlreadyEnrolled { .. })));
        assert!(!format!("{:?}", sample()).contains("devsec_secret"));
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(load(&path), Err(LocalDeviceError::Io { .. })));
    }

    #[test]
    fn a_damaged_file_or_a_directory_says_what_to_do() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        let err = load(&dir).unwrap_err().to_string();
        assert!(err.contains("is a directory") && err.contains(PATH_ENV), "{err}");
        let path = dir.join(FILE);
        fs::write(&path, "{\"edge_origin\": \"https://e.example\"").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("is damaged") && err.contains("worker connect") && err.contains("--recover"), "{err}");
    }

    #[test]
    fn set_name_keeps_the_secret_and_the_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(FILE);
        assert!(matches!(set_name(&path, "x"), Err(LocalDeviceError::NotEnrolled(_))));
        save(&path, &sample()).unwrap();
        set_name(&path, "desk").unwrap();
        let after = load(&path).unwrap();
        assert_eq!(after, LocalDevice { name: "desk".into(), ..sample() });
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(!path.with_extension("json.tmp").exists());
    }
}

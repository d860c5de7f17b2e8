//! Host manifests: where Chrome-family browsers look for `dev.herdr.mcp.json`, and writing,
//! inspecting and removing ours.

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub const HOST_NAME: &str = "dev.herdr.mcp";
/// Also the mark by which `uninstall` recognises a manifest it wrote.
pub const MANIFEST_DESCRIPTION: &str = "herdr-mcp: lets the herdr browser extension reach the local runtime socket";
/// Owner-only, like the runtime socket: the manifest names what the browser will execute.
pub const MANIFEST_MODE: u32 = 0o600;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Browser {
    Chrome,
    Chromium,
    Brave,
    Edge,
}

impl Browser {
    pub const ALL: [Browser; 4] = [Browser::Chrome, Browser::Chromium, Browser::Brave, Browser::Edge];

    pub fn name(self) -> &'static str {
        match self {
            Browser::Chrome => "chrome",
            Browser::Chromium => "chromium",
            Browser::Brave => "brave",
            Browser::Edge => "edge",
        }
    }

    /// Per-user config folder relative to `$XDG_CONFIG_HOME` (Linux).
    fn config_subdir(self) -> &'static str {
        match self {
            Browser::Chrome => "google-chrome",
            Browser::Chromium => "chromium",
            Browser::Brave => "BraveSoftware/Brave-Browser",
            Browser::Edge => "microsoft-edge",
        }
    }

    /// The names its Linux packages put on `PATH`.
    fn programs(self) -> &'static [&'static str] {
        match self {
            Browser::Chrome => &["google-chrome", "google-chrome-stable"],
            Browser::Chromium => &["chromium", "chromium-browser"],
            Browser::Brave => &["brave-browser", "brave"],
            Browser::Edge => &["microsoft-edge", "microsoft-edge-stable"],
        }
    }

    /// Whether one of its programs is an executable in a directory of `path` (a `PATH` value).
    pub fn is_on_path(self, path: &std::ffi::OsStr) -> bool {
        std::env::split_paths(path)
            .filter(|dir| dir.is_absolute())
            .any(|dir| self.programs().iter().any(|program| is_executable(&dir.join(program))))
    }

    /// Where a Snap build of this browser shows itself: the program `path` finds first lives
    /// in snapd's `snap/bin` (or resolves into `/snap/`), or there is no regular profile folder
    /// (`profile`, e.g. `~/.config/chromium`) but `~/snap/<name>` exists. A Snap browser cannot start native messaging hosts (its confinement forbids
    /// executing programs outside the snap), so a manifest for it would never be used.
    pub fn snap_location(self, path: &std::ffi::OsStr, home: Option<&Path>, profile: &Path) -> Option<PathBuf> {
        let first = std::env::split_paths(path)
            .filter(|dir| dir.is_absolute())
            .find_map(|dir| self.programs().iter().map(|p| dir.join(p)).find(|p| is_executable(p)));
        if let Some(program) = &first {
            let real = program.canonicalize().unwrap_or_else(|_| program.clone());
            if program.parent().is_some_and(|d| d.ends_with("snap/bin")) || real.starts_with("/snap/") {
                return Some(program.clone());
            }
            return None;
        }
        let snap_name = match self {
            Browser::Chromium => "chromium",
            Browser::Brave => "brave",
            _ => return None,
        };
        let dir = home?.join("snap").join(snap_name);
        (!profile.is_dir() && dir.is_dir()).then_some(dir)
    }

    pub fn parse(name: &str) -> Option<Vec<Browser>> {
        match name {
            "all" => Some(Browser::ALL.to_vec()),
            other => Browser::ALL.iter().find(|b| b.name() == other).map(|b| vec![*b]),
        }
    }
}

/// One place a manifest goes: a browser's per-user folder, or a `--user-data-dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub label: String,
    pub dir: PathBuf,
}

impl Location {
    pub fn manifest_path(&self) -> PathBuf {
        self.dir.join(format!("{HOST_NAME}.json"))
    }
}

/// Where to look: `--user-data-dir DIR` → `DIR/NativeMessagingHosts`, else each browser under
/// `$XDG_CONFIG_HOME` (absolute) or `~/.config`.
pub fn locations(browsers: &[Browser], user_data_dir: Option<&Path>) -> Result<Vec<Location>> {
    if let Some(dir) = user_data_dir {
        let dir = std::path::absolute(dir).with_context(|| format!("resolving {}", dir.display()))?;
        return Ok(vec![Location { label: format!("user-data-dir {}", dir.display()), dir: dir.join("NativeMessagingHosts") }]);
    }
    let config = match std::env::var("XDG_CONFIG_HOME").ok().filter(|v| v.starts_with('/')) {
        Some(xdg) => PathBuf::from(xdg),
        None => {
            let home = std::env::var("HOME").ok().filter(|h| !h.is_empty()).context("HOME is not set")?;
            PathBuf::from(home).join(".config")
        }
    };
    Ok(browsers
        .iter()
        .map(|b| Location { label: b.name().to_owned(), dir: config.join(b.config_subdir()).join("NativeMessagingHosts") })
        .collect())
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Manifest {
    pub name: String,
    pub description: String,
    pub path: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub allowed_origins: Vec<String>,
}

impl Manifest {
    pub fn ours(binary: &Path, origin: &str) -> Self {
        Self {
            name: HOST_NAME.to_owned(),
            description: MANIFEST_DESCRIPTION.to_owned(),
            path: binary.display().to_string(),
            kind: "stdio".to_owned(),
            allowed_origins: vec![origin.to_owned()],
        }
    }

    pub fn is_ours(&self) -> bool {
        self.name == HOST_NAME && self.description == MANIFEST_DESCRIPTION
    }
}

/// Chrome requires an absolute `path`; resolve symlinks so the manifest keeps working when the
/// link that launched the installer moves.
pub fn resolve_binary(binary: &Path) -> Result<PathBuf> {
    let canonical = binary.canonicalize().with_context(|| format!("host binary {} not found", binary.display()))?;
    if !is_executable(&canonical) {
        bail!("host binary {} is not an executable file", canonical.display());
    }
    Ok(canonical)
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Writes our manifest atomically (temp file + rename). Refuses to replace a manifest with the
/// same host name that someone else wrote.
pub fn install_at(location: &Location, manifest: &Manifest) -> Result<PathBuf> {
    let target = location.manifest_path();
    if let Some(Inspected::Foreign) = inspect_file(&target).map(|s| s.kind) {
        bail!("{} exists and was not written by herdr-nmhost; remove it yourself if it should go", target.display());
    }
    std::fs::create_dir_all(&location.dir).with_context(|| format!("creating {}", location.dir.display()))?;
    let tmp = location.dir.join(format!(".{HOST_NAME}.json.tmp-{}", std::process::id()));
    let json = serde_json::to_vec_pretty(manifest).context("serializing the manifest")?;
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(MANIFEST_MODE).open(&tmp)?;
        file.set_permissions(std::fs::Permissions::from_mode(MANIFEST_MODE))?;
        file.write_all(&json)?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        std::fs::rename(&tmp, &target)
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    }).with_context(|| format!("writing {}", target.display()))?;
    Ok(target)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inspected {
    Missing,
    /// Ours; `binary_ok` tells whether `path` is an existing executable.
    Ours { manifest: Manifest, binary_ok: bool },
    /// Same file name but not written by us (or unreadable as a manifest).
    Foreign,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub location: Location,
    pub kind: Inspected,
}

fn inspect_file(path: &Path) -> Option<Status> {
    let kind = match std::fs::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Inspected::Missing,
        Err(_) => Inspected::Foreign,
        Ok(bytes) => match serde_json::from_slice::<Manifest>(&bytes) {
            Ok(m) if m.is_ours() => {
                let binary_ok = Path::new(&m.path).is_absolute() && is_executable(Path::new(&m.path));
                Inspected::Ours { manifest: m, binary_ok }
            }
            _ => Inspected::Foreign,
        },
    };
    let dir = path.parent()?.to_path_buf();
    Some(Status { location: Location { label: String::new(), dir }, kind })
}

pub fn status_at(location: &Location) -> Status {
    let mut status = inspect_file(&location.manifest_path())
        .unwrap_or(Status { location: location.clone(), kind: Inspected::Missing });
    status.location = location.clone();
    status
}

#[derive(Debug, PartialEq, Eq)]
pub enum Removal {
    Removed(PathBuf),
    NotInstalled,
    /// Left alone: someone else's file.
    KeptForeign(PathBuf),
}

pub fn uninstall_at(location: &Location) -> Result<Removal> {
    let path = location.manifest_path();
    match status_at(location).kind {
        Inspected::Missing => Ok(Removal::NotInstalled),
        Inspected::Foreign => Ok(Removal::KeptForeign(path)),
        Inspected::Ours { .. } => {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
            Ok(Removal::Removed(path))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_binary(dir: &Path) -> PathBuf {
        let bin = dir.join("herdr-nmhost");
        std::fs::write(&bin, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        bin
    }

    #[test]
    fn install_status_uninstall_round_trip() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = resolve_binary(&fake_binary(tmp.path())).unwrap();
        let loc = &locations(&[], Some(&tmp.path().join("profile"))).unwrap()[0];
        assert_eq!(status_at(loc).kind, Inspected::Missing);
        let manifest = Manifest::ours(&bin, "chrome-extension://aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/");
        let written = install_at(loc, &manifest).unwrap();
        assert_eq!(written, tmp.path().join("profile/NativeMessagingHosts/dev.herdr.mcp.json"));
        assert_eq!(std::fs::metadata(&written).unwrap().permissions().mode() & 0o777, MANIFEST_MODE);
        assert_eq!(status_at(loc).kind, Inspected::Ours { manifest: manifest.clone(), binary_ok: true });
        std::fs::remove_file(&bin).unwrap();
        assert_eq!(status_at(loc).kind, Inspected::Ours { manifest, binary_ok: false });
        assert_eq!(uninstall_at(loc).unwrap(), Removal::Removed(written.clone()));
        assert!(!written.exists());
        assert_eq!(uninstall_at(loc).unwrap(), Removal::NotInstalled);
    }

    #[test]
    fn foreign_manifests_are_neither_replaced_nor_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = resolve_binary(&fake_binary(tmp.path())).unwrap();
        let loc = &locations(&[], Some(tmp.path())).unwrap()[0];
        std::fs::create_dir_all(&loc.dir).unwrap();
        let foreign = r#"{"name":"dev.herdr.mcp","description":"someone else","path":"/x","type":"stdio","allowed_origins":[]}"#;
        std::fs::write(loc.manifest_path(), foreign).unwrap();
        assert_eq!(status_at(loc).kind, Inspected::Foreign);
        assert!(install_at(loc, &Manifest::ours(&bin, "o")).is_err());
        assert_eq!(uninstall_at(loc).unwrap(), Removal::KeptForeign(loc.manifest_path()));
        assert_eq!(std::fs::read_to_string(loc.manifest_path()).unwrap(), foreign);
    }

    #[test]
    fn browser_names_and_dirs() {
        assert_eq!(Browser::parse("all").unwrap().len(), 4);
        assert_eq!(Browser::parse("brave").unwrap(), vec![Browser::Brave]);
        assert!(Browser::parse("firefox").is_none());
        assert_eq!(Browser::Brave.config_subdir(), "BraveSoftware/Brave-Browser");
    }

    #[test]
    fn a_browser_is_found_by_its_program_on_path() {
        let tmp = tempfile::tempdir().unwrap();
        let bin = tmp.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let path = std::env::join_paths([bin.as_path()]).unwrap();
        assert!(!Browser::Chromium.is_on_path(&path));
        // Not executable: not a program.
        std::fs::write(bin.join("chromium"), b"").unwrap();
        assert!(!Browser::Chromium.is_on_path(&path));
        fake_binary(&bin);
        std::fs::rename(bin.join("herdr-nmhost"), bin.join("google-chrome-stable")).unwrap();
        assert!(Browser::Chrome.is_on_path(&path));
        assert!(!Browser::Chromium.is_on_path(&path) && !Browser::Brave.is_on_path(&path));
    }

    #[test]
    fn binary_must_exist_and_be_executable() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(resolve_binary(&tmp.path().join("missing")).is_err());
        let plain = tmp.path().join("plain");
        std::fs::write(&plain, b"x").unwrap();
        assert!(resolve_binary(&plain).is_err());
    }
}

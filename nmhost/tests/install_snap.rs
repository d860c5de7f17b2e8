//! `herdr-nmhost install` and a Snap Chromium: the browser cannot start native hosts, so
//! the installer must not write a manifest for it and say "installed".

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_herdr-nmhost");

fn fake_program(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let program = dir.join(name);
    std::fs::write(&program, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn install(home: &Path, path: &Path) -> Output {
    Command::new(BIN).arg("install").env_clear().env("HOME", home).env("PATH", path).output().unwrap()
}

#[test]
fn snap_chromium_is_not_reported_installed() {
    let home = tempfile::tempdir().unwrap();
    let snap_bin = home.path().join("snap/bin");
    fake_program(&snap_bin, "chromium");
    let out = install(home.path(), &snap_bin);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "nothing usable was installed: {stdout}");
    assert!(!stdout.contains("installed"), "{stdout}");
    assert!(stderr.contains("chromium: not installed") && stderr.contains("Snap"), "{stderr}");
    assert!(!home.path().join(".config/chromium/NativeMessagingHosts/dev.herdr.mcp.json").exists());
}

#[test]
fn snap_folder_without_a_regular_profile_counts_as_snap() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("snap/chromium/common")).unwrap();
    let out = Command::new(BIN)
        .args(["install", "--browser", "chromium"])
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", home.path().join("empty"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stdout}");
    assert!(stderr.contains("chromium: not installed") && stderr.contains("snap/chromium"), "{stderr}");
    assert!(!home.path().join(".config/chromium").exists());
}

#[test]
fn a_regular_chromium_on_path_is_installed() {
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join("usr/bin");
    fake_program(&bin, "chromium");
    let out = install(home.path(), &bin);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("chromium: installed"), "{stdout}");
    assert!(home.path().join(".config/chromium/NativeMessagingHosts/dev.herdr.mcp.json").exists());
}

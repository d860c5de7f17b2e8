//! `herdr-nmhost install|status|uninstall` as a user runs them, into temp folders.

mod support;

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// With an empty `PATH`, so that the browsers of the machine running the test count as absent.
fn run(args: &[&str], config_home: &Path) -> Output {
    run_with_path(args, config_home, "")
}

fn run_with_path(args: &[&str], config_home: &Path, path: &str) -> Output {
    Command::new(support::host::binary())
        .args(args)
        .env("XDG_CONFIG_HOME", config_home)
        .env("PATH", path)
        .env_remove("HERDR_EXTENSION_ORIGIN")
        .output()
        .expect("run herdr-nmhost")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `status --json` rows, checking its exit code: 0 exactly when a registration works and none
/// is broken.
fn status_json(args: &[&str], config_home: &Path) -> Vec<Value> {
    let mut all = vec!["status", "--json"];
    all.extend_from_slice(args);
    let o = run(&all, config_home);
    let rows = serde_json::from_slice::<Value>(&o.stdout).unwrap().as_array().unwrap().clone();
    let working = rows.iter().any(|r| r["installed"] == true && r["binary_ok"] == true);
    let broken = rows.iter().any(|r| r["installed"] == true && r["binary_ok"] == false);
    assert_eq!(o.status.code(), Some(if working && !broken { 0 } else { 1 }), "{o:?}");
    rows
}

#[test]
fn install_status_uninstall_into_a_user_data_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let profile = tmp.path().join("profile");
    let dir = profile.to_str().unwrap();
    let id = "abcdefghijklmnopabcdefghijklmnop";

    let o = run(&["install", "--user-data-dir", dir, "--extension-id", id], tmp.path());
    assert!(o.status.success(), "{o:?}");
    let manifest_path = profile.join("NativeMessagingHosts/dev.herdr.mcp.json");
    let manifest: Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    let binary = std::fs::canonicalize(support::host::binary()).unwrap();
    assert_eq!(manifest["name"], "dev.herdr.mcp");
    assert_eq!(manifest["type"], "stdio");
    assert_eq!(manifest["path"], binary.display().to_string());
    assert_eq!(manifest["allowed_origins"], serde_json::json!([format!("chrome-extension://{id}/")]));
    assert_eq!(std::fs::metadata(&manifest_path).unwrap().permissions().mode() & 0o777, 0o600);

    let rows = status_json(&["--user-data-dir", dir], tmp.path());
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["installed"], true);
    assert_eq!(rows[0]["binary_ok"], true);
    assert_eq!(rows[0]["manifest"], manifest_path.display().to_string());

    // Installing again replaces our own manifest (e.g. the default origin now).
    assert!(run(&["install", "--user-data-dir", dir], tmp.path()).status.success());
    let manifest: Value = serde_json::from_slice(&std::fs::read(&manifest_path).unwrap()).unwrap();
    assert_eq!(manifest["allowed_origins"][0], support::host::PINNED_ORIGIN);

    // A manifest whose binary is gone (moved, or a cleaned build) says how to repair it.
    let copy = tmp.path().join("herdr-nmhost-copy");
    std::fs::copy(support::host::binary(), &copy).unwrap();
    assert!(run(&["install", "--user-data-dir", dir, "--binary", copy.to_str().unwrap()], tmp.path()).status.success());
    std::fs::remove_file(&copy).unwrap();
    // The command it names works as printed: this binary's absolute path while PATH does not
    // find it, its bare name once PATH does (an install in ~/.local/bin).
    let o = run(&["status", "--user-data-dir", dir], tmp.path());
    let me = binary.display().to_string();
    assert!(stdout(&o).contains(&format!("binary MISSING: run `{me} install` again")), "{}", stdout(&o));
    assert_eq!(o.status.code(), Some(1), "a broken registration is a failure: {o:?}");
    let o = run_with_path(&["status", "--user-data-dir", dir], tmp.path(), binary.parent().unwrap().to_str().unwrap());
    assert!(stdout(&o).contains("binary MISSING: run `herdr-nmhost install` again"), "{}", stdout(&o));
    assert_eq!(status_json(&["--user-data-dir", dir], tmp.path())[0]["binary_ok"], false);

    let o = run(&["uninstall", "--user-data-dir", dir], tmp.path());
    assert!(o.status.success() && stdout(&o).contains("removed"), "{o:?}");
    assert!(!manifest_path.exists());
    assert_eq!(status_json(&["--user-data-dir", dir], tmp.path())[0]["installed"], false);
}

/// Nothing registered is not a success: `status` exits 1 and says what to run.
#[test]
fn status_with_nothing_registered_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(&["status"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let me = std::fs::canonicalize(support::host::binary()).unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("run `{} install`", me.display())), "{o:?}");
    let o = run(&["status", "--json"], tmp.path());
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let rows: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(rows.as_array().unwrap().iter().all(|r| r["installed"] == false), "{rows}");
}

#[test]
fn per_browser_folders_follow_xdg_config_home() {
    let tmp = tempfile::tempdir().unwrap();
    // With no browser profile folder and no browser on PATH, a default install refuses instead
    // of guessing. `--browser all` means the same: every browser that is there.
    for args in [&["install"][..], &["install", "--browser", "all"]] {
        let o = run(args, tmp.path());
        assert_eq!(o.status.code(), Some(1), "{o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("neither a profile folder nor its program on PATH") && err.contains("--browser chrome"),
            "{args:?}: {err}"
        );
    }

    // An explicit browser is installed even before its first start.
    assert!(run(&["install", "--browser", "brave"], tmp.path()).status.success());
    assert!(tmp.path().join("BraveSoftware/Brave-Browser/NativeMessagingHosts/dev.herdr.mcp.json").exists());

    // The default covers every browser whose profile folder exists.
    std::fs::create_dir_all(tmp.path().join("chromium")).unwrap();
    assert!(run(&["install"], tmp.path()).status.success());
    let rows = status_json(&[], tmp.path());
    let installed: Vec<&str> =
        rows.iter().filter(|r| r["installed"] == true).map(|r| r["location"].as_str().unwrap()).collect();
    assert_eq!(installed, ["chromium", "brave"]);

    // A manifest under our name that we did not write survives uninstall.
    let chrome_dir = tmp.path().join("google-chrome/NativeMessagingHosts");
    std::fs::create_dir_all(&chrome_dir).unwrap();
    std::fs::write(chrome_dir.join("dev.herdr.mcp.json"), r#"{"name":"dev.herdr.mcp","path":"/elsewhere"}"#).unwrap();
    let o = run(&["uninstall"], tmp.path());
    assert!(o.status.success(), "{o:?}");
    assert!(chrome_dir.join("dev.herdr.mcp.json").exists());
    assert!(stdout(&o).contains("left"));
    assert!(status_json(&[], tmp.path()).iter().all(|r| r["installed"] == false));
}

/// A fresh machine: the browser is installed but was never started, so it has no profile folder
/// yet. Registering must not wait for that first start (scripts/run.sh registers right away).
#[test]
fn a_browser_never_started_is_found_on_path() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config");
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let chromium = bin.join("chromium");
    std::fs::write(&chromium, b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&chromium, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("/nonexistent:{}", bin.display());

    let o = run_with_path(&["install"], &config, &path);
    assert!(o.status.success(), "{o:?}");
    assert!(stdout(&o).starts_with("chromium: installed "), "{}", stdout(&o));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(config.join("chromium/NativeMessagingHosts/dev.herdr.mcp.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["allowed_origins"], serde_json::json!([support::host::PINNED_ORIGIN]));
    // Only that browser: no config tree for the others.
    let created: Vec<_> = std::fs::read_dir(&config).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(created, ["chromium"]);
}

#[test]
fn bad_arguments_are_explained() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(&["install", "--browser", "firefox"], tmp.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown browser"));
    let o = run(&["install", "--user-data-dir", "x", "--extension-id", "XYZ"], tmp.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("32 letters"));
    let o = run(&["install", "--binary", "/nonexistent/herdr-nmhost", "--user-data-dir", "x"], tmp.path());
    assert_eq!(o.status.code(), Some(1));
    let o = run(&["frobnicate"], tmp.path());
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn help_explains_both_roles() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(&["--help"], tmp.path());
    assert!(o.status.success());
    let text = stdout(&o);
    for needle in ["Native Messaging", "install --user-data-dir", "status", "uninstall", "HERDR_EXTENSION_IPC_SOCKET"] {
        assert!(text.contains(needle), "help lacks {needle:?}:\n{text}");
    }
    // status and uninstall look at every browser by default, whether its folder exists or not
    // (per_browser_folders_follow_xdg_config_home); only install skips the missing ones.
    for sub in ["status", "uninstall"] {
        let help = stdout(&run(&[sub, "--help"], tmp.path()));
        let default = "default: all; install writes only where the browser's profile folder exists or its program is on PATH";
        assert!(help.contains(default), "{sub} --help:\n{help}");
    }
    let rows = status_json(&[], tmp.path());
    assert_eq!(rows.len(), 4, "status covers every browser: {rows:?}");
    // Without arguments there is nothing to do: usage on stderr, exit 2.
    assert_eq!(run(&[], tmp.path()).status.code(), Some(2));
}

//! The deployment name of a real `edge serve`: `/health` reports `edgeEnv` as
//! "production" when none is given, the name from `--env` or `$HERDR_EDGE_ENV`
//! otherwise, and a name that is not a short lowercase label stops the edge at
//! start with an error naming the value and the rule. `--help` explains it.
//! Plain HTTP on an address other than loopback gets a warning at start.

mod edge_support;
#[path = "edge_support/procs.rs"]
mod procs;

use std::path::PathBuf;

use edge_support::Http;
use procs::{EdgeProcess, command};

async fn edge_env_of(home: PathBuf, configure: fn(&mut std::process::Command)) -> String {
    let edge = tokio::task::spawn_blocking(move || EdgeProcess::start_with(&home, configure)).await.unwrap();
    let health = Http::new(&edge.base).get("/health").await;
    assert_eq!(health.status, 200, "{}\nedge log:\n{}", health.body, edge.log_text());
    health.json()["edgeEnv"].as_str().unwrap_or_else(|| panic!("no edgeEnv in {}", health.body)).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_names_the_deployment_default_flag_or_variable() {
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(edge_env_of(tmp.path().join("default"), |_| {}).await, "production");
    assert_eq!(edge_env_of(tmp.path().join("flag"), |c| {
        c.args(["--env", "staging"]);
    })
    .await, "staging");
    assert_eq!(edge_env_of(tmp.path().join("variable"), |c| {
        c.env("HERDR_EDGE_ENV", "eu-west_2");
    })
    .await, "eu-west_2");
}

#[test]
fn a_malformed_deployment_name_stops_the_edge_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let init = command(home).args(["edge", "init", "--edge-dir"]).arg(home.join("edge")).output().unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let over_limit = "a".repeat(33);
    let cases = [("--env", "Prod"), ("--env", "pre prod"), ("--env", over_limit.as_str()), ("HERDR_EDGE_ENV", "prod!")];
    for (how, value) in cases {
        let mut serve = command(home);
        serve.args(["edge", "serve", "--issuer", "http://127.0.0.1:9", "--listen", "127.0.0.1:0", "--edge-dir"]).arg(home.join("edge"));
        if how == "--env" {
            serve.args(["--env", value]);
        } else {
            serve.env(how, value);
        }
        // `output` returns only once the process exits: a refused name must not
        // leave an edge listening.
        let out = serve.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{how}={value:?} was accepted");
        assert!(err.contains("--env") && err.contains(value) && err.contains("a-z, 0-9, '_' or '-'"), "{how}={value:?}: {err}");
    }
}

#[test]
fn serve_help_explains_the_deployment_name() {
    let out = command(tempfile::tempdir().unwrap().path()).args(["edge", "serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for needle in ["--env <NAME>", "HERDR_EDGE_ENV", "edgeEnv", "production"] {
        assert!(help.contains(needle), "--help lacks {needle:?}:\n{help}");
    }
}

/// Tokens over plain HTTP on a reachable address: the edge still serves (a TLS
/// proxy may sit in front), but says what that means and what to do.
#[test]
fn plain_http_on_a_non_loopback_address_is_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let init = command(home).args(["edge", "init", "--edge-dir"]).arg(home.join("edge")).output().unwrap();
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let log_of = |listen: &str, name: &str| {
        let addr_file = home.join(format!("{name}.addr"));
        let log = home.join(format!("{name}.log"));
        let mut serve = command(home);
        serve
            .args(["edge", "serve", "--issuer", "https://edge.example", "--listen", listen, "--edge-dir"])
            .arg(home.join("edge"))
            .arg("--addr-file")
            .arg(&addr_file);
        let _edge = procs::spawn_logged(&mut serve, &log);
        procs::wait_until("the edge address file", || std::fs::read_to_string(&addr_file).ok());
        std::fs::read_to_string(&log).unwrap()
    };
    let open = log_of("0.0.0.0:0", "open");
    assert!(open.contains("warning: plain HTTP on 0.0.0.0") && open.contains("--tls-cert"), "{open}");
    let loopback = log_of("127.0.0.1:0", "loopback");
    assert!(!loopback.contains("warning"), "{loopback}");
}

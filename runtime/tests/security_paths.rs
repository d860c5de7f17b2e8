//! The hostile-path corpus: every path below must be refused, with the expected
//! reason, by every tool that takes a path — and listing and searching must never
//! reveal a secret file. Nothing outside the managed root may be created.

mod tools_support;

use std::os::unix::fs::symlink;
use std::sync::Arc;

use herdr_mcp::tools::ToolContext;
use serde_json::{Value, json};
use tools_support::*;

const OUTSIDE: &str = "outside_managed_roots";
const SECRET: &str = "secret_path_denied";
const ESCAPE: &str = "symlink_escape";
const NOT_FOUND: &str = "not_found";
const INVALID: &str = "invalid_params";
const PARENT: &str = "parent_not_found";
const UNRESOLVABLE: &str = "target_unresolvable";
const CROSS: &str = "cross_project_patch_denied";

/// One hostile path and the refusal expected when it names an existing thing to
/// read (`read`) and when it names a file to create (`write`); `None` = the case
/// does not apply to that kind of tool.
struct Case {
    path: String,
    read: Option<&'static str>,
    write: Option<&'static str>,
}

fn case(path: impl Into<String>, read: &'static str, write: &'static str) -> Case {
    Case { path: path.into(), read: Some(read), write: Some(write) }
}

fn read_only(path: impl Into<String>, read: &'static str) -> Case {
    Case { path: path.into(), read: Some(read), write: None }
}

/// A repository full of traps, in a parent directory that also holds a sibling
/// whose name extends the root's (prefix confusion).
struct Fixture {
    repo: Repo,
    sibling: std::path::PathBuf,
}

fn fixture() -> Fixture {
    let repo = Repo::with_files(&[("a.txt", "alpha\n"), ("dir/b.txt", "alpha\n")]);
    for secret in [".env", "dir/.env.local", "id_rsa", "secrets/k.txt", "api_TOKEN.txt", "server.pem", "prod.env", "aws/credentials"] {
        repo.write(secret, "alpha\n");
    }
    let r = |p: &str| repo.path(p);
    symlink("/etc", r("link_etc")).unwrap();
    symlink("/etc/passwd", r("link_passwd")).unwrap();
    symlink(repo.root.parent().unwrap(), r("link_up")).unwrap();
    symlink(r("loop_b"), r("loop_a")).unwrap();
    symlink(r("loop_a"), r("loop_b")).unwrap();
    symlink(r("nowhere"), r("dangling")).unwrap();
    symlink(r(".env"), r("innocent")).unwrap();
    symlink(r("secrets"), r("docs")).unwrap();
    let sibling = std::path::PathBuf::from(format!("{}_evil", repo.root.display()));
    std::fs::create_dir_all(&sibling).unwrap();
    std::fs::write(sibling.join("x.txt"), "alpha\n").unwrap();
    Fixture { repo, sibling }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.sibling);
    }
}

fn corpus(f: &Fixture) -> Vec<Case> {
    let root = f.repo.root.display().to_string();
    let name = f.repo.root.file_name().unwrap().to_string_lossy().into_owned();
    let long_component = "n".repeat(300);
    vec![
        // `..` chains and absolute escapes
        case("../../../../etc/passwd", OUTSIDE, OUTSIDE),
        case(format!("{root}/../../../etc/passwd"), OUTSIDE, OUTSIDE),
        case(format!("{root}/dir/../../etc/passwd"), OUTSIDE, OUTSIDE),
        case("dir/../../x.txt", OUTSIDE, OUTSIDE),
        case("/etc/passwd", OUTSIDE, OUTSIDE),
        case("/etc/shadow", OUTSIDE, OUTSIDE),
        case("//etc//passwd", OUTSIDE, OUTSIDE),
        case("/./etc/./hosts", OUTSIDE, OUTSIDE),
        case("/", OUTSIDE, OUTSIDE),
        case("/root/.ssh/id_rsa", OUTSIDE, OUTSIDE),
        case("/proc/self/root/etc/passwd", OUTSIDE, OUTSIDE),
        case("/dev/null", OUTSIDE, OUTSIDE),
        case("/etc/", OUTSIDE, OUTSIDE),
        // A sibling whose name merely starts with the root's name is outside.
        case(format!("{}/x.txt", f.sibling.display()), OUTSIDE, OUTSIDE),
        case(format!("../{name}_evil/x.txt"), OUTSIDE, OUTSIDE),
        // Symlinks out of the root, loops, dangling links
        case("link_etc/passwd", ESCAPE, ESCAPE),
        case("link_etc/", ESCAPE, ESCAPE),
        case("link_passwd", ESCAPE, ESCAPE),
        read_only("link_up", ESCAPE),
        case("link_up/evil.txt", NOT_FOUND, ESCAPE),
        case("loop_a", NOT_FOUND, UNRESOLVABLE),
        case("loop_a/x", NOT_FOUND, PARENT),
        case("dangling", NOT_FOUND, UNRESOLVABLE),
        // Secret names in every position and case, directly or through a symlink
        case(".env", SECRET, SECRET),
        case(".ENV", SECRET, SECRET),
        case("dir/.env.local", SECRET, SECRET),
        case("config/.env.production", SECRET, SECRET),
        case("prod.env", SECRET, SECRET),
        case("id_rsa", SECRET, SECRET),
        case("keys/ID_ED25519.pub", SECRET, SECRET),
        case("id_ecdsa", SECRET, SECRET),
        case("secrets/k.txt", SECRET, SECRET),
        case("Secrets/other.txt", SECRET, SECRET),
        case("my_secret_notes.md", SECRET, SECRET),
        case("api_TOKEN.txt", SECRET, SECRET),
        case("aws/credentials", SECRET, SECRET),
        case("server.pem", SECRET, SECRET),
        case("tls.KEY", SECRET, SECRET),
        case("cert.p12", SECRET, SECRET),
        case("cert.PFX", SECRET, SECRET),
        case(".git/config", SECRET, SECRET),
        case(".Git/CONFIG", SECRET, SECRET),
        case("dir/.git/config", SECRET, SECRET),
        case("a.txt/../.env", SECRET, SECRET),
        case(".env/", SECRET, SECRET),
        case(format!("{root}/.env"), SECRET, SECRET),
        case("innocent", SECRET, SECRET),
        case("docs/k.txt", SECRET, SECRET),
        // Unicode look-alikes of `.`, `/` and `..` are ordinary names: nothing exists there
        case("\u{2024}\u{2024}/etc/passwd", NOT_FOUND, PARENT),
        case("\u{2025}/\u{2025}/etc/passwd", NOT_FOUND, PARENT),
        case("\u{FF0E}\u{FF0E}/etc/passwd", NOT_FOUND, PARENT),
        case("..\u{2215}etc\u{2215}x/y", NOT_FOUND, PARENT),
        case("%2e%2e/%2e%2e/etc/passwd", NOT_FOUND, PARENT),
        // `~` is not expanded
        case("~/.bashrc", NOT_FOUND, PARENT),
        case("~root/x", NOT_FOUND, PARENT),
        // NUL, control, zero-width and bidi characters
        case("a.txt\0.png", INVALID, INVALID),
        case("a\n.txt", INVALID, INVALID),
        case("\u{1b}[31ma.txt", INVALID, INVALID),
        case("a\u{202E}txt.exe", INVALID, INVALID),
        case("a\u{200B}.txt", INVALID, INVALID),
        case("\u{7f}", INVALID, INVALID),
        // Length limits
        case("a/".repeat(2100), INVALID, INVALID),
        case(long_component, NOT_FOUND, UNRESOLVABLE),
        case("", INVALID, INVALID),
    ]
}

/// The refusal's reason or code.
fn kind(payload: &Value) -> String {
    assert_eq!(payload["ok"], false, "expected a refusal: {payload}");
    payload.get("reason").or_else(|| payload.get("code")).and_then(Value::as_str).unwrap_or("?").to_string()
}

fn check(ctx: &Arc<ToolContext>, tool: &str, args: Value, path: &str, expected: &str, failures: &mut Vec<String>) {
    let out = call(ctx, tool, args);
    if out["ok"] != false || kind(&out) != expected {
        failures.push(format!("{tool} {path:?}: expected {expected}, got {out}"));
    }
}

/// A patch naming `path` in a header; paths with line breaks cannot be expressed.
fn patch_text(header: &str, path: &str, body: &str) -> String {
    format!("*** Begin Patch\n*** {header}: {path}\n{body}*** End Patch\n")
}

#[test]
fn the_corpus_has_at_least_forty_hostile_paths() {
    let f = fixture();
    assert!(corpus(&f).len() >= 40, "{}", corpus(&f).len());
}

#[test]
fn every_hostile_path_is_refused_by_every_path_tool() {
    let f = fixture();
    let ctx = f.repo.ctx();
    let before = snapshot_outside(&f);
    let mut failures = Vec::new();
    let mut checks = 0;
    for c in corpus(&f) {
        let p = c.path.as_str();
        if let Some(r) = c.read {
            for (tool, args) in [
                ("herdr_fs_read", json!({"path": p})),
                ("herdr_fs_list", json!({"path": p})),
                ("herdr_fs_image", json!({"path": p})),
                ("herdr_fs_edit", json!({"path": p, "old_string": "alpha", "new_string": "pwned"})),
                ("herdr_fs_grep", json!({"root": p, "pattern": "alpha"})),
                ("herdr_git", json!({"root": p, "action": "status"})),
            ] {
                check(&ctx, tool, args, p, r, &mut failures);
                checks += 1;
            }
            if !p.is_empty() && !p.contains('\n') {
                let expected = if r == OUTSIDE { CROSS } else { r };
                let patch = patch_text("Delete File", p, "");
                let args = json!({"root": f.repo.p(""), "patch": patch});
                check(&ctx, "herdr_fs_patch", args, p, expected, &mut failures);
                checks += 1;
            }
        }
        if let Some(w) = c.write {
            let args = json!({"path": p, "content": "pwned", "overwrite": true, "confirm_dirty": true});
            check(&ctx, "herdr_fs_write", args, p, w, &mut failures);
            checks += 1;
            if !p.is_empty() && !p.contains('\n') {
                let expected = if w == OUTSIDE { CROSS } else { w };
                let args = json!({"root": f.repo.p(""), "patch": patch_text("Add File", p, "+pwned\n")});
                check(&ctx, "herdr_fs_patch", args, p, expected, &mut failures);
                checks += 1;
            }
        }
    }
    assert!(failures.is_empty(), "{} of {checks} checks failed:\n{}", failures.len(), failures.join("\n"));
    assert!(checks > 400, "{checks}");
    assert_eq!(snapshot_outside(&f), before, "something outside the root changed");
    for p in [".env", "id_rsa", "secrets/k.txt", "a.txt", "dir/b.txt"] {
        assert_eq!(f.repo.read(p), b"alpha\n", "{p} was modified");
    }
}

#[test]
fn git_diff_paths_are_checked_lexically() {
    let f = fixture();
    let ctx = f.repo.ctx();
    let mut failures = Vec::new();
    for c in corpus(&f) {
        let Some(r) = c.read else { continue };
        if ![OUTSIDE, SECRET, INVALID].contains(&r) || c.path.is_empty() {
            continue;
        }
        // Symlinks are not followed for diff paths (git diffs the link itself), so
        // only lexical verdicts apply; absolute paths elsewhere are outside.
        if ["innocent", "docs/k.txt"].contains(&c.path.as_str()) {
            continue;
        }
        let args = json!({"root": f.repo.p(""), "action": "diff", "path": c.path});
        check(&ctx, "herdr_git", args, &c.path, r, &mut failures);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn list_and_grep_never_reveal_secret_files() {
    let f = fixture();
    let ctx = f.repo.ctx();
    let listed = call(&ctx, "herdr_fs_list", json!({"path": f.repo.p(""), "recursive": true, "max_entries": 2000}));
    let grep = call(&ctx, "herdr_fs_grep", json!({"root": f.repo.p(""), "pattern": "alpha", "max_matches": 1000}));
    let text = format!("{listed}{grep}").to_lowercase();
    for secret in [".env", "id_rsa", "secrets", "token", "credentials", ".pem", "prod.env"] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    let files: Vec<&str> = grep["matches"].as_array().unwrap().iter().map(|m| m["file"].as_str().unwrap()).collect();
    assert_eq!(files, [f.repo.p("a.txt"), f.repo.p("dir/b.txt")]);
    // Symlinks are listed as links, never followed out of the root.
    assert!(!listed.to_string().contains("/etc/"), "{listed}");
}

/// Bytes of everything in the root's parent directory except the root itself, plus
/// /etc/passwd, so any write that escaped would show.
fn snapshot_outside(f: &Fixture) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let parent = f.repo.root.parent().unwrap();
    for e in std::fs::read_dir(&f.sibling).unwrap() {
        let p = e.unwrap().path();
        out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
    }
    for name in ["evil.txt", "pwned"] {
        out.push((name.into(), std::fs::read(parent.join(name)).unwrap_or_default()));
    }
    out.push(("/etc/passwd".into(), std::fs::read("/etc/passwd").unwrap_or_default()));
    out.sort();
    out
}

#[test]
fn path_length_limit_is_exact() {
    let f = fixture();
    let ctx = f.repo.ctx();
    // Short components stay under NAME_MAX, so only the total length matters.
    let at_limit = format!("{}xx", "x/".repeat(2047));
    assert_eq!(at_limit.len(), herdr_mcp::policy::paths::MAX_PATH_BYTES);
    let over = format!("{at_limit}x");
    for tool in ["herdr_fs_read", "herdr_fs_list", "herdr_fs_image"] {
        let r = call(&ctx, tool, json!({"path": at_limit}));
        assert_eq!(kind(&r), NOT_FOUND, "{tool}: {r}");
        let r = call(&ctx, tool, json!({"path": over}));
        assert_eq!(kind(&r), INVALID, "{tool}: {r}");
        assert_eq!(r["message"], "path must be at most 4096 characters long", "{tool}");
        // Fewer characters than that but more bytes: the policy's byte limit,
        // worded like the schema's, with the size that was sent.
        let wide_at_limit = format!("{}x", "é/".repeat(1365));
        let wide_over = format!("{wide_at_limit}x");
        assert_eq!((wide_at_limit.len(), wide_over.chars().count()), (4096, 2732));
        assert_eq!(kind(&call(&ctx, tool, json!({"path": wide_at_limit}))), NOT_FOUND, "{tool}");
        let r = call(&ctx, tool, json!({"path": wide_over}));
        assert_eq!(kind(&r), INVALID, "{tool}: {r}");
        assert_eq!(r["message"], "path must be at most 4096 bytes long; it is 4097 bytes", "{tool}");
    }
    let r = call(&ctx, "herdr_fs_write", json!({"path": at_limit, "content": ""}));
    assert_eq!(kind(&r), PARENT, "{r}");
    let r = call(&ctx, "herdr_fs_write", json!({"path": over, "content": ""}));
    assert_eq!(kind(&r), INVALID, "{r}");
}

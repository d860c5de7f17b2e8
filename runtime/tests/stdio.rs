//! `herdr-mcp stdio` as desktop clients use it: a child process whose stdin/stdout
//! carry MCP, driven by rmcp's client over the child's pipes; and the README's
//! copy-paste configurations, parsed and started as written.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

const BIN: &str = env!("CARGO_BIN_EXE_herdr-mcp");

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        Home { dir: tempfile::tempdir().unwrap() }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A git project under the home with one file.
    fn project(&self) -> PathBuf {
        let root = self.path().join("project");
        std::fs::create_dir_all(&root).unwrap();
        let ok = std::process::Command::new("git").args(["init", "-q"]).current_dir(&root).status().unwrap();
        assert!(ok.success());
        std::fs::write(root.join("notes.txt"), "stdio sees this line\n").unwrap();
        root.canonicalize().unwrap()
    }

    /// `herdr-mcp <args>` started as a desktop client starts it: from `/`, pipes on
    /// stdin/stdout, the test's own state and Herdr socket.
    fn spawn(&self, command: &str, args: &[String], env: &[(&str, &str)]) -> Child {
        let mut cmd = Command::new(command);
        cmd.args(args)
            .current_dir("/")
            .env("HOME", self.path())
            .env("XDG_CONFIG_HOME", self.path().join("config"))
            .env("HERDR_MCP_STATE_DIR", self.path().join("state"))
            .env("HERDR_SOCKET_PATH", self.path().join("no-herdr.sock"))
            .env("NO_COLOR", "1")
            .env_remove("HERDR_MCP_ROOTS")
            .env_remove("HERDR_MCP_READONLY")
            .env_remove("HERDR_MCP_WRITE_ROOTS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.spawn().expect("start herdr-mcp stdio")
    }
}

type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

async fn connect(child: &mut Child) -> Client {
    let stdout = child.stdout.take().unwrap();
    let stdin = child.stdin.take().unwrap();
    tokio::time::timeout(Duration::from_secs(20), ().serve((stdout, stdin)))
        .await
        .expect("initialize within 20 s")
        .expect("MCP initialize over stdio")
}

async fn call(client: &Client, name: &str, arguments: Value) -> Value {
    let mut params = CallToolRequestParams::new(name.to_string());
    params.arguments = arguments.as_object().cloned();
    let result = client.call_tool(params).await.unwrap_or_else(|e| panic!("tools/call {name}: {e}"));
    let result = serde_json::to_value(&result).unwrap();
    result["structuredContent"].clone()
}

/// Waits for the child to end on its own; its exit status.
async fn exit_of(child: &mut Child) -> std::process::ExitStatus {
    tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("exit within 10 s after stdin closed")
        .unwrap()
}

#[tokio::test]
async fn stdio_serves_the_contract_under_the_same_policy() {
    let home = Home::new();
    let root = home.project();
    let args = vec!["stdio".to_string(), "--root".to_string(), root.display().to_string()];
    let mut child = home.spawn(BIN, &args, &[("HERDR_MCP_READONLY", "1")]);
    let client = connect(&mut child).await;

    let info = client.peer_info().expect("initialize result");
    let meta = info.meta.as_ref().expect("initialize _meta");
    let advertised = meta.0["herdr_contract_hash"].as_str().unwrap().to_string();

    let listed = client.list_all_tools().await.expect("tools/list");
    assert_eq!(listed.len(), 18, "the 18-tool contract");
    let catalog: Vec<Value> = listed.iter().map(|t| serde_json::to_value(t).unwrap()).collect();
    // The raw answer is what hashes; rmcp's typed Tool drops members it does not know,
    // so the hash check runs on the raw line below as well.
    let raw = raw_tools_list(&home, &root).await;
    assert_eq!(herdr_mcp::contract::contract_hash(&raw).unwrap(), advertised, "listed tools hash to the contract");
    assert_eq!(catalog.len(), raw.len());

    let read = call(&client, "herdr_fs_read", json!({"path": root.join("notes.txt")})).await;
    assert_eq!(read["ok"], true, "{read}");
    assert!(read.to_string().contains("stdio sees this line"), "{read}");

    // Same policy as serve: outside the managed roots and read-only mode are refused.
    let outside = home.path().join("outside.txt");
    std::fs::write(&outside, "not served").unwrap();
    let refused = call(&client, "herdr_fs_read", json!({"path": outside})).await;
    assert_eq!(refused["ok"], false, "{refused}");
    let write = call(&client, "herdr_fs_write", json!({"path": root.join("new.txt"), "content": "x"})).await;
    assert_eq!(write["ok"], false, "{write}");
    assert!(!root.join("new.txt").exists(), "read-only mode wrote a file");

    // Closing stdin (the client going away) ends the server cleanly.
    client.cancel().await.unwrap();
    let status = exit_of(&mut child).await;
    assert!(status.success(), "exit {status:?}");
}

/// The `tools/list` answer exactly as it leaves stdout, for the hash.
async fn raw_tools_list(home: &Home, root: &Path) -> Vec<Value> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let args = vec!["stdio".to_string(), "--root".to_string(), root.display().to_string()];
    let mut child = home.spawn(BIN, &args, &[]);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let requests = [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
    ];
    for r in &requests {
        stdin.write_all(format!("{r}\n").as_bytes()).await.unwrap();
    }
    stdin.flush().await.unwrap();
    let tools = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let v: Value = serde_json::from_str(&line).expect("every stdout line is JSON-RPC");
            if v["id"] == 2 {
                return v["result"]["tools"].as_array().unwrap().clone();
            }
        }
        panic!("stdout ended before the tools/list answer");
    })
    .await
    .expect("tools/list within 20 s");
    drop(stdin);
    assert!(exit_of(&mut child).await.success());
    tools
}

#[tokio::test]
async fn stdio_without_a_root_from_outside_a_project_says_so() {
    let home = Home::new();
    let mut child = home.spawn(BIN, &["stdio".to_string()], &[]);
    let status = exit_of(&mut child).await;
    assert!(!status.success());
    let mut err = String::new();
    use tokio::io::AsyncReadExt;
    child.stderr.take().unwrap().read_to_string(&mut err).await.unwrap();
    assert!(err.contains("herdr-mcp: error:"), "{err}");
}

/// One MCP server entry of a README snippet: the command and its arguments.
#[derive(Debug, PartialEq)]
struct Entry {
    command: String,
    args: Vec<String>,
}

/// The fenced blocks of the README's "Desktop MCP clients" section: (language, text).
fn readme_blocks() -> Vec<(String, String)> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let start = readme.find("## Desktop MCP clients").expect("README has a '## Desktop MCP clients' section");
    let section = &readme[start + 3..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut blocks = Vec::new();
    let mut rest = section;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let newline = after.find('\n').unwrap();
        let lang = after[..newline].trim().to_string();
        let body = &after[newline + 1..];
        let close = body.find("```").expect("closed code fence");
        blocks.push((lang, body[..close].to_string()));
        rest = &body[close + 3..];
    }
    blocks
}

fn entries_of_json(text: &str) -> Vec<Entry> {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("README snippet is not JSON ({e}):\n{text}"));
    let servers = v["mcpServers"].as_object().unwrap_or_else(|| panic!("no mcpServers object:\n{text}"));
    servers
        .values()
        .map(|s| Entry {
            command: s["command"].as_str().expect("command").to_string(),
            args: s["args"].as_array().expect("args").iter().map(|a| a.as_str().unwrap().to_string()).collect(),
        })
        .collect()
}

#[tokio::test]
async fn readme_desktop_client_snippets_start_a_working_server() {
    let blocks = readme_blocks();
    let json: Vec<&String> = blocks.iter().filter(|(l, _)| l == "json").map(|(_, t)| t).collect();
    assert!(json.len() >= 3, "a JSON snippet each for Claude Desktop, Claude Code and Cursor");
    let mut entries: Vec<Entry> = json.iter().flat_map(|t| entries_of_json(t)).collect();
    // Claude Code's one-liner: everything after ` -- ` is the command and its arguments.
    let shell: Vec<&String> = blocks.iter().filter(|(l, _)| l == "sh").map(|(_, t)| t).collect();
    let add =
        shell.iter().flat_map(|t| t.lines()).find(|l| l.starts_with("claude mcp add")).expect("claude mcp add line");
    let words: Vec<String> =
        add.split(" -- ").nth(1).expect("`--` before the command").split_whitespace().map(String::from).collect();
    entries.push(Entry { command: words[0].clone(), args: words[1..].to_vec() });

    for entry in &entries {
        assert_eq!(Path::new(&entry.command).file_name().unwrap(), "herdr-mcp", "{entry:?}");
        assert_eq!(entry.args.first().map(String::as_str), Some("stdio"), "{entry:?}");
        assert!(entry.args.iter().any(|a| a == "--root"), "desktop clients start from anywhere: {entry:?}");
        let home = Home::new();
        let root = home.project();
        // The snippet's placeholder root becomes a real project; everything else as written.
        let mut args = entry.args.clone();
        let at = args.iter().position(|a| a == "--root").unwrap() + 1;
        args[at] = root.display().to_string();
        let mut child = home.spawn(BIN, &args, &[]);
        let client = connect(&mut child).await;
        assert_eq!(client.list_all_tools().await.unwrap().len(), 18, "{entry:?}");
        client.cancel().await.unwrap();
        assert!(exit_of(&mut child).await.success(), "{entry:?}");
    }
}

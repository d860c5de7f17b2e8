//! The MCP endpoint driven by rmcp's client (session mode) over the Unix socket and
//! over TCP + bearer, and by raw stateless HTTP as the extension sends it.

mod common;

use common::{Runtime, git_repo};
use herdr_mcp::contract::{CONTRACT_EPOCH, contract_hash};
use herdr_mcp::tools::ToolRegistry;
use serde_json::{Value, json};

/// The protocol versions of spec §3, newest first.
const SPEC_VERSIONS: [&str; 6] = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2024-10-07"];

fn expected_hash() -> String {
    contract_hash(&ToolRegistry::standard().catalog()).unwrap()
}

#[tokio::test]
async fn rmcp_client_over_unix_socket_initializes_lists_and_calls() {
    let repo = git_repo(&[("hello.txt", "hello world\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let client = rt.client().await;

    let info = client.peer_info().expect("initialize result");
    let info = serde_json::to_value(info).unwrap();
    assert_eq!(info["serverInfo"]["name"], "herdr-mcp");
    assert_eq!(info["protocolVersion"], "2025-11-25", "{info}");
    assert_eq!(info["_meta"]["herdr_contract_epoch"], CONTRACT_EPOCH);
    assert_eq!(info["_meta"]["herdr_contract_hash"], expected_hash());

    let listed = client.list_tools(None).await.expect("tools/list");
    let listed = serde_json::to_value(&listed).unwrap();
    assert_eq!(listed["_meta"]["herdr_contract_hash"], expected_hash());
    let names: Vec<&str> = listed["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    let expected: Vec<String> =
        ToolRegistry::standard().catalog().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(names, expected);

    // An unknown tool is a protocol error (-32602), as MCP 2025-11-25 and 2026-07-28 say.
    assert_unknown_tool(&client).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn rmcp_client_over_tcp_with_bearer() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start_tcp(&[repo.path()], &[]).await;
    let client = rt.tcp_client().await;
    let listed = serde_json::to_value(client.list_tools(None).await.unwrap()).unwrap();
    assert_eq!(listed["_meta"]["herdr_contract_hash"], expected_hash());
    assert_unknown_tool(&client).await;
    client.cancel().await.unwrap();

    let wrong = rt.tcp_client_with_token("not-the-token").await;
    assert!(wrong.is_err(), "a wrong bearer must not get a session");
}

#[tokio::test]
async fn stateless_tools_list_hashes_to_the_advertised_contract() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let resp = rt.post_json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.header("mcp-session-id").is_none(), "stateless requests get no session");
    let body = resp.json();
    let tools = body["result"]["tools"].as_array().expect("tools").clone();
    assert_eq!(tools, ToolRegistry::standard().catalog(), "listed tools differ from the catalog");
    let hash = contract_hash(&tools).unwrap();
    assert_eq!(body["result"]["_meta"]["herdr_contract_hash"], hash);
    assert_eq!(body["result"]["_meta"]["herdr_contract_epoch"], CONTRACT_EPOCH);
    for tool in &tools {
        assert_eq!(tool["execution"], json!({"taskSupport": "forbidden"}), "{}", tool["name"]);
    }
}

#[tokio::test]
async fn stateless_tools_call_without_initialize() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let resp = rt
        .post_json(&json!({"jsonrpc": "2.0", "id": "c1", "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}}))
        .await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let body = resp.json();
    assert_eq!(body["id"], "c1");
    assert_eq!(body["error"]["code"], -32602, "{body}");
    assert_eq!(body["error"]["message"], "Unknown tool: no_such_tool");

    // A client that only accepts JSON and sends no content type is served too.
    let raw = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let resp = rt.raw("POST", "/", &[("accept", "application/json")], Some(raw.as_bytes())).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.json()["result"]["tools"].is_array());
}

#[tokio::test]
async fn stateless_initialize_negotiates_supported_versions() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    for (asked, expected) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        // Spec §3: every listed version is negotiated as asked, the two 2024 ones too.
        ("2024-11-05", "2024-11-05"),
        ("2024-10-07", "2024-10-07"),
        ("1999-01-01", "2025-11-25"),
        // The probe version `server/discover` offers OpenAI's clients (spec §3).
        ("2026-07-28", "2025-11-25"),
    ] {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        // Accepting only JSON makes this a stateless initialize, answered as JSON.
        let resp = rt
            .raw(
                "POST",
                "/mcp",
                &[("content-type", "application/json"), ("accept", "application/json")],
                Some(init.to_string().as_bytes()),
            )
            .await;
        assert_eq!(resp.status, 200, "{}", resp.text());
        let body = resp.json();
        assert_eq!(body["result"]["protocolVersion"], expected, "asked {asked}: {body}");
        assert_eq!(body["result"]["_meta"]["herdr_contract_hash"], expected_hash());
    }
}

#[tokio::test]
async fn session_initialize_over_raw_http_issues_a_session_and_unknown_sessions_are_404() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let sse = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")];
    let resp = rt.raw("POST", "/mcp", &sse, Some(init.to_string().as_bytes())).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    let session = resp.header("mcp-session-id").expect("session id").to_string();
    assert_eq!(resp.json()["result"]["protocolVersion"], "2025-06-18");
    // Spec §3: `ms_` and 32 lower-case hex digits.
    let hex = session.strip_prefix("ms_").unwrap_or_else(|| panic!("session id {session}"));
    assert!(hex.len() == 32 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "session id {session}");

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let mut with_session = sse.to_vec();
    with_session.push(("mcp-session-id", &session));
    with_session.push(("mcp-protocol-version", "2025-06-18"));
    let resp = rt.raw("POST", "/mcp", &with_session, Some(list.as_bytes())).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    let tools = resp.json()["result"]["tools"].as_array().unwrap().clone();
    assert_eq!(tools, ToolRegistry::standard().catalog(), "SSE tools/list must carry the full catalog");

    let mut unknown = sse.to_vec();
    unknown.push(("mcp-session-id", "no-such-session"));
    let resp = rt.raw("POST", "/mcp", &unknown, Some(list.as_bytes())).await;
    assert_eq!(resp.status, 404);
    assert_eq!(resp.json()["error"]["code"], -32001);
}

#[tokio::test]
async fn notifications_without_session_are_accepted() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let resp = rt.post_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    assert_eq!(resp.status, 202, "{}", resp.text());
    assert!(resp.body.is_empty());
}

#[tokio::test]
async fn unknown_method_is_method_not_found() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let resp = rt.post_json(&json!({"jsonrpc": "2.0", "id": 9, "method": "no/such"})).await;
    let body: Value = resp.json();
    assert_eq!(body["error"]["code"], -32601, "{body}");
    assert_eq!(body["error"]["message"], "Method not found: no/such", "{body}");
    assert_eq!(body["id"], 9);
}

#[tokio::test]
async fn sessions_beyond_the_cap_evict_the_oldest() {
    use herdr_mcp::server::endpoint::MAX_SESSIONS;
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let sse = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")];
    let mut ids = Vec::new();
    for _ in 0..=MAX_SESSIONS {
        let resp = rt.raw("POST", "/mcp", &sse, Some(init.as_bytes())).await;
        assert_eq!(resp.status, 200);
        ids.push(resp.header("mcp-session-id").expect("session id").to_string());
    }
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string();
    let status_of = |id: String| {
        let rt = &rt;
        let ping = ping.clone();
        async move {
            let headers = [
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-session-id", id.as_str()),
                ("mcp-protocol-version", "2025-06-18"),
            ];
            rt.raw("POST", "/mcp", &headers, Some(ping.as_bytes())).await.status
        }
    };
    assert_eq!(status_of(ids[0].clone()).await, 404, "the oldest session must be gone");
    assert_eq!(status_of(ids[1].clone()).await, 200, "the second-oldest stays");
    assert_eq!(status_of(ids[MAX_SESSIONS].clone()).await, 200, "the newest works");
}

/// The members `server/discover` answers with (spec §3), and nothing else.
fn assert_discover_members(result: &Value) {
    let mut keys: Vec<&str> = result.as_object().expect("result object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["_meta", "cacheScope", "capabilities", "instructions", "resultType", "supportedVersions", "ttlMs"],
        "{result}"
    );
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["ttlMs"], 3_600_000);
    assert_eq!(result["cacheScope"], "private");
}

#[tokio::test]
async fn server_discover_answers_stateless_as_json_with_what_initialize_says() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let json_only = [("content-type", "application/json"), ("accept", "application/json")];
    let init = rt.raw("POST", "/mcp", &json_only, Some(init.to_string().as_bytes())).await.json()["result"].clone();

    // No initialize, no session; a client that would take SSE still gets JSON.
    let resp = rt.post_json(&json!({"jsonrpc": "2.0", "id": "d1", "method": "server/discover"})).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    assert!(resp.header("mcp-session-id").is_none(), "discover opens no session");
    let body = resp.json();
    assert_eq!(body["id"], "d1");
    let result = &body["result"];
    assert_discover_members(result);
    assert_eq!(result["supportedVersions"], json!(SPEC_VERSIONS), "the versions initialize negotiates");
    assert_eq!(result["capabilities"], init["capabilities"]);
    assert_eq!(result["instructions"], init["instructions"]);
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"],
        json!({"name": "herdr-mcp", "version": env!("CARGO_PKG_VERSION")})
    );
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], init["serverInfo"]["name"]);
    assert_eq!(result["_meta"]["herdr_contract_epoch"], CONTRACT_EPOCH);
    assert_eq!(result["_meta"]["herdr_contract_hash"], expected_hash());

    // Empty params (rmcp's typed form of the request) and a client accepting only SSE.
    let raw = json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {}}).to_string();
    let resp = rt
        .raw(
            "POST",
            "/mcp",
            &[("content-type", "application/json"), ("accept", "text/event-stream")],
            Some(raw.as_bytes()),
        )
        .await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    assert_eq!(resp.json()["result"], *result);

    // Params that are not an object are refused, as for every method.
    for params in [json!([1]), json!("x"), json!(5)] {
        let resp =
            rt.post_json(&json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": params})).await;
        let body = resp.json();
        assert_eq!((resp.status, &body["error"]["code"]), (400, &json!(-32600)), "{body}");
    }

    // A notification gets no reply: 202 and an empty body.
    let resp = rt.post_json(&json!({"jsonrpc": "2.0", "method": "server/discover"})).await;
    assert_eq!(resp.status, 202, "{}", resp.text());
    assert!(resp.body.is_empty());
}

#[tokio::test]
async fn server_discover_offers_the_probe_version_to_openai_clients_only() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let discover = |user_agent: Option<&'static str>, params: Value| {
        let rt = &rt;
        async move {
            let raw = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": params}).to_string();
            let mut headers =
                vec![("content-type", "application/json"), ("accept", "application/json, text/event-stream")];
            headers.extend(user_agent.map(|ua| ("user-agent", ua)));
            let resp = rt.raw("POST", "/mcp", &headers, Some(raw.as_bytes())).await;
            assert_eq!(resp.status, 200, "{}", resp.text());
            resp.json()["result"]["supportedVersions"].clone()
        }
    };
    let plain = json!(SPEC_VERSIONS);
    // 2026-07-28 is served now, so every client is offered the same list.
    let probing = plain.clone();
    assert_eq!(discover(None, json!({})).await, plain);
    assert_eq!(discover(Some("herdr-extension/0.1"), json!({})).await, plain);
    assert_eq!(discover(Some("openai-mcp/1.0.0 (ChatGPT)"), json!({})).await, probing);
    let named = |name: &str| json!({"_meta": {"io.modelcontextprotocol/clientInfo": {"name": name, "version": "1"}}});
    assert_eq!(discover(None, named("ChatGPT")).await, probing);
    assert_eq!(discover(None, named("some-client")).await, plain);

    // 2026-07-28 has no initialize: an initialize asking for it falls back to the newest with one.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": {"name": "chatgpt", "version": "1"}}});
    let headers =
        [("content-type", "application/json"), ("accept", "application/json"), ("user-agent", "openai-mcp/1.0.0")];
    let resp = rt.raw("POST", "/mcp", &headers, Some(init.to_string().as_bytes())).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["result"]["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn server_discover_over_tcp_needs_the_bearer() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start_tcp(&[repo.path()], &[]).await;
    let raw = json!({"jsonrpc": "2.0", "id": 5, "method": "server/discover"}).to_string();
    let bearer = format!("Bearer {}", common::TOKEN);
    let json = ("content-type", "application/json");
    let resp = rt.raw_tcp("POST", "/mcp", &[json, ("authorization", &bearer)], Some(raw.as_bytes())).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    let result = &resp.json()["result"];
    assert_discover_members(result);
    assert_eq!(result["_meta"]["herdr_contract_hash"], expected_hash());

    let resp = rt.raw_tcp("POST", "/mcp", &[json], Some(raw.as_bytes())).await;
    assert_eq!(resp.status, 401, "{}", resp.text());
    assert_eq!(resp.json()["error"]["code"], -32001);
}

#[tokio::test]
async fn server_discover_inside_a_session_is_json_and_an_unknown_session_is_404() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let session = rt.open_session().await;
    let discover = json!({"jsonrpc": "2.0", "id": 8, "method": "server/discover"}).to_string();
    let with = |user_agent: &'static str, session: &str| {
        let mut headers: Vec<(&str, String)> =
            [JSON_TYPE, ACCEPT_BOTH].iter().map(|(k, v)| (*k, v.to_string())).collect();
        headers.push(("mcp-session-id", session.to_string()));
        headers.push(("user-agent", user_agent.to_string()));
        headers
    };
    let send = |headers: Vec<(&'static str, String)>| {
        let rt = &rt;
        let discover = discover.clone();
        async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            rt.raw("POST", "/mcp", &headers, Some(discover.as_bytes())).await
        }
    };
    // In a live session, still one JSON answer (the session would answer SSE).
    let resp = send(with("some-client/1", &session)).await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.header("content-type"), Some("application/json"));
    assert_eq!(resp.json()["result"]["_meta"]["herdr_contract_hash"], expected_hash());
    // A session this server does not hold is refused as for every method, so the
    // client learns that it has to start a new one.
    let resp = send(with("some-client/1", "no-such-session")).await;
    assert_eq!(resp.status, 404, "{}", resp.text());
    assert_eq!(resp.json()["error"], json!({"code": -32001, "message": "Session not found"}));
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}).to_string();
    let headers = with("some-client/1", "no-such-session");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let other = rt.raw("POST", "/mcp", &headers, Some(list.as_bytes())).await;
    assert_eq!((other.status, other.json()), (resp.status, resp.json()), "the same refusal as tools/list");
}

fn initialize(version: &str, client_name: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": client_name, "version": "1"}}})
    .to_string()
}

const ACCEPT_BOTH: (&str, &str) = ("accept", "application/json, text/event-stream");
const JSON_TYPE: (&str, &str) = ("content-type", "application/json");

#[tokio::test]
async fn stateless_clients_get_no_session_and_their_session_ids_are_not_checked() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let openai_ua = ("user-agent", "openai-mcp/1.0.0 (+https://openai.com/bot)");

    // An initialize that accepts SSE opens a session for an ordinary client only.
    let resp = rt
        .raw("POST", "/mcp", &[JSON_TYPE, ACCEPT_BOTH], Some(initialize("2025-06-18", "some-client").as_bytes()))
        .await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.header("mcp-session-id").is_some(), "an ordinary client gets a session");
    for (headers, client) in [
        (vec![JSON_TYPE, ACCEPT_BOTH, openai_ua], "some-client"),
        (vec![JSON_TYPE, ACCEPT_BOTH], "ChatGPT"),
        (vec![JSON_TYPE, ACCEPT_BOTH], "openai-connector"),
        (vec![JSON_TYPE, ACCEPT_BOTH], "My ChatGPT Bridge"),
    ] {
        let resp = rt.raw("POST", "/mcp", &headers, Some(initialize("2025-06-18", client).as_bytes())).await;
        assert_eq!(resp.status, 200, "{client}: {}", resp.text());
        assert!(resp.header("mcp-session-id").is_none(), "{client} {headers:?}: a stateless client gets no session");
        assert_eq!(resp.json()["result"]["protocolVersion"], "2025-06-18");
    }

    // A stale or made-up session id from a stateless client is ignored, for every
    // method; from anyone else it is a 404.
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let call =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}})
            .to_string();
    let discover = json!({"jsonrpc": "2.0", "id": 4, "method": "server/discover"}).to_string();
    let ping = json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}).to_string();
    let unserved = json!({"jsonrpc": "2.0", "id": 6, "method": "resources/list"}).to_string();
    let stale = ("mcp-session-id", "ms_0123456789abcdef0123456789abcdef");
    for body in [&list, &call, &discover, &ping, &unserved] {
        let resp = rt.raw("POST", "/mcp", &[JSON_TYPE, ACCEPT_BOTH, stale, openai_ua], Some(body.as_bytes())).await;
        assert_ne!(resp.status, 404, "{body}: {}", resp.text());
        let answer = resp.json();
        assert!(
            answer.get("result").is_some() || [-32601, -32602].contains(&answer["error"]["code"].as_i64().unwrap_or(0)),
            "{body}: {answer}"
        );
        assert!(resp.header("mcp-session-id").is_none(), "{body}");
        let resp = rt.raw("POST", "/mcp", &[JSON_TYPE, ACCEPT_BOTH, stale], Some(body.as_bytes())).await;
        assert_eq!(resp.status, 404, "{body} without the stateless user agent: {}", resp.text());
    }
    let resp = rt.raw("POST", "/mcp", &[JSON_TYPE, ACCEPT_BOTH, stale, openai_ua], Some(call.as_bytes())).await;
    assert_eq!(resp.json()["error"]["code"], -32602);
    // An initialize naming ChatGPT with a stale id is not refused either.
    let resp = rt
        .raw("POST", "/mcp", &[JSON_TYPE, ACCEPT_BOTH, stale], Some(initialize("2025-11-25", "chatgpt").as_bytes()))
        .await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert!(resp.header("mcp-session-id").is_none());

    // DELETE with a stale id: a stateless client has nothing to end.
    let resp = rt.raw("DELETE", "/mcp", &[stale, openai_ua], None).await;
    assert_eq!(resp.status, 202, "{}", resp.text());
}

#[tokio::test]
async fn unserved_methods_are_method_not_found_by_name_and_their_notifications_get_202() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let session = rt.open_session().await;
    let in_session =
        [JSON_TYPE, ACCEPT_BOTH, ("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
    let requests = [
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", json!({"uri": "file:///etc/passwd"})),
        ("prompts/list", json!({})),
        ("prompts/get", json!({"name": "x"})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": "b"}}),
        ),
        ("logging/setLevel", json!({"level": "info"})),
        ("resources/subscribe", json!({"uri": "file:///x"})),
        ("no/such", json!({})),
    ];
    for (method, params) in requests {
        let body = json!({"jsonrpc": "2.0", "id": "m1", "method": method, "params": params}).to_string();
        for headers in [&[JSON_TYPE, ACCEPT_BOTH][..], &in_session[..]] {
            let resp = rt.raw("POST", "/mcp", headers, Some(body.as_bytes())).await;
            assert_eq!(resp.status, 200, "{method}: {}", resp.text());
            assert_eq!(resp.header("content-type"), Some("application/json"), "{method}");
            // rmcp's answer: -32601 naming the method.
            let answer = resp.json();
            assert_eq!(
                (&answer["id"], &answer["error"]["code"]),
                (&json!("m1"), &json!(-32601)),
                "{method} {headers:?}: {answer}"
            );
            assert!(answer["error"]["message"].as_str().is_some_and(|m| m.contains(method)), "{method}: {answer}");
        }
    }
    for method in ["notifications/roots/list_changed", "notifications/acme/thing", "resources/list"] {
        let body = json!({"jsonrpc": "2.0", "method": method}).to_string();
        for headers in [&[JSON_TYPE, ACCEPT_BOTH][..], &in_session[..]] {
            let resp = rt.raw("POST", "/mcp", headers, Some(body.as_bytes())).await;
            assert_eq!(resp.status, 202, "{method}: {}", resp.text());
            assert!(resp.body.is_empty(), "{method}: {}", resp.text());
        }
    }
}

#[tokio::test]
async fn a_client_on_2024_10_07_keeps_working_after_initialize() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    // Even an initialize that already names the version in the header.
    let version = ("mcp-protocol-version", "2024-10-07");
    let resp = rt
        .raw("POST", "/mcp", &[JSON_TYPE, ACCEPT_BOTH, version], Some(initialize("2024-10-07", "old").as_bytes()))
        .await;
    assert_eq!(resp.status, 200, "{}", resp.text());
    assert_eq!(resp.json()["result"]["protocolVersion"], "2024-10-07");
    let session = resp.header("mcp-session-id").expect("session id").to_string();
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let resp = rt
        .raw("POST", "/mcp", &[JSON_TYPE, ACCEPT_BOTH, version, ("mcp-session-id", &session)], Some(list.as_bytes()))
        .await;
    assert_eq!(resp.status, 200, "in the session: {}", resp.text());
    assert_eq!(resp.json()["result"]["tools"].as_array().map(Vec::len), Some(ToolRegistry::standard().len()));
    let resp = rt.raw("POST", "/mcp", &[JSON_TYPE, ACCEPT_BOTH, version], Some(list.as_bytes())).await;
    assert_eq!(resp.status, 200, "stateless: {}", resp.text());
    // A version nobody negotiates is still refused, as rmcp does.
    let resp = rt
        .raw("POST", "/mcp", &[JSON_TYPE, ACCEPT_BOTH, ("mcp-protocol-version", "2023-01-01")], Some(list.as_bytes()))
        .await;
    assert_eq!(resp.status, 400, "{}", resp.text());
}

#[tokio::test]
async fn handshake_answers_are_one_sse_frame_when_accepted_and_everything_else_is_json() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let init = initialize("2025-11-25", "chatgpt");
    for body in [&list, &init] {
        let resp = rt.raw("POST", "/mcp", &[JSON_TYPE, ACCEPT_BOTH], Some(body.as_bytes())).await;
        assert_eq!(resp.status, 200, "{}", resp.text());
        assert_eq!(resp.header("content-type"), Some("text/event-stream"), "{body}");
        assert_eq!(resp.header("cache-control"), Some("no-cache"), "{body}");
        let text = resp.text();
        let data = text
            .strip_prefix("event: message\ndata: ")
            .and_then(|rest| rest.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("not one SSE frame: {text:?}"));
        let message: Value = serde_json::from_str(data).expect("the frame's data is the JSON answer");
        assert!(message["result"].is_object(), "{message}");
        if body == &list {
            assert_eq!(
                message["result"]["tools"],
                json!(ToolRegistry::standard().catalog()),
                "the full catalog, framed"
            );
        }
        // Accepting JSON only: plain JSON.
        let resp = rt.raw("POST", "/mcp", &[JSON_TYPE, ("accept", "application/json")], Some(body.as_bytes())).await;
        assert_eq!(resp.header("content-type"), Some("application/json"), "{body}");
    }
    let call =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}})
            .to_string();
    let ping = json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}).to_string();
    for body in [&call, &ping] {
        let resp = rt.raw("POST", "/mcp", &[JSON_TYPE, ACCEPT_BOTH], Some(body.as_bytes())).await;
        assert_eq!(resp.status, 200, "{}", resp.text());
        assert_eq!(resp.header("content-type"), Some("application/json"), "{body}");
    }
}

#[tokio::test]
async fn session_answers_are_framed_as_spec_section_3_says() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let rt = Runtime::start(&[repo.path()], &[]).await;
    let one_frame = |resp: &common::RawResponse| -> Value {
        assert_eq!(resp.status, 200, "{}", resp.text());
        assert_eq!(resp.header("content-type"), Some("text/event-stream"));
        let text = resp.text();
        let data = text
            .strip_prefix("event: message\ndata: ")
            .and_then(|rest| rest.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("not one SSE frame: {text:?}"));
        serde_json::from_str(data).expect("the frame's data is the JSON answer")
    };
    let resp = rt.raw("POST", "/mcp", &[JSON_TYPE, ACCEPT_BOTH], Some(initialize("2025-06-18", "t").as_bytes())).await;
    let session = resp.header("mcp-session-id").expect("session id").to_string();
    assert_eq!(one_frame(&resp)["result"]["protocolVersion"], "2025-06-18");

    let in_session =
        [JSON_TYPE, ACCEPT_BOTH, ("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string();
    let resp = rt.raw("POST", "/mcp", &in_session, Some(initialized.as_bytes())).await;
    assert_eq!((resp.status, resp.body.len()), (202, 0), "{}", resp.text());

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string();
    let resp = rt.raw("POST", "/mcp", &in_session, Some(list.as_bytes())).await;
    assert_eq!(one_frame(&resp)["result"]["tools"], json!(ToolRegistry::standard().catalog()));

    let call =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}});
    let ping = json!({"jsonrpc": "2.0", "id": 4, "method": "ping"});
    let bad = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "x", "arguments": [1]}});
    for message in [call, ping, bad] {
        let resp = rt.raw("POST", "/mcp", &in_session, Some(message.to_string().as_bytes())).await;
        assert_eq!(resp.status, 200, "{message}: {}", resp.text());
        assert_eq!(resp.header("content-type"), Some("application/json"), "{message}");
        let answer: Value =
            serde_json::from_slice(&resp.body).unwrap_or_else(|e| panic!("{message}: {e}: {}", resp.text()));
        assert_eq!(answer["id"], message["id"], "{answer}");
        assert!(answer.get("result").is_some() || answer.get("error").is_some(), "{answer}");
    }
}

/// `tools/call` of a tool not in the catalog through rmcp's client: a JSON-RPC
/// error -32602, never a result.
async fn assert_unknown_tool(client: &common::McpClient) {
    let mut params = rmcp::model::CallToolRequestParams::new("no_such_tool");
    params.arguments = Some(serde_json::Map::new());
    let error = client.call_tool(params).await.expect_err("an unknown tool is a protocol error");
    assert!(error.to_string().contains("-32602"), "{error}");
}

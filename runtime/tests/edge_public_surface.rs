//! The edge's public surface beyond the OAuth flow itself: every discovery and
//! registration alias a client may probe, `/health` beside `/info`, CORS
//! preflight, notifications, SSE framing of the MCP handshake, the `GET /mcp` probe, the pending page
//! in each language, `server/discover` answered by the edge itself, the 19-action catalog with its `device` selector and
//! read-only hints, and that a provider-side "disconnect" (an RFC 7009 call)
//! finds no endpoint and revokes nothing.

mod edge_support;

use std::sync::Arc;

use edge_support::*;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_discovery_alias_answers_the_same_documents() {
    let e = InProc::start().await;
    let resource = format!("{}/mcp", e.issuer);
    let canonical = e.http.get("/.well-known/oauth-authorization-server").await.json();
    assert_eq!(canonical["issuer"], e.issuer);
    assert_eq!(canonical["protected_resources"], json!([resource]));
    for base in ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"] {
        for path in [base.to_string(), format!("{base}/mcp"), format!("/mcp{base}")] {
            let r = e.http.get(&path).await;
            assert_eq!((r.status, r.json()), (200, canonical.clone()), "{path}");
        }
    }
    let expected = |res: &str| {
        json!({"resource": res, "authorization_servers": [e.issuer], "scopes_supported": ["mcp"],
               "bearer_methods_supported": ["header"], "resource_name": "herdr-mcp"})
    };
    assert_eq!(e.http.get("/.well-known/oauth-protected-resource").await.json(), expected(&e.issuer));
    for path in ["/.well-known/oauth-protected-resource/mcp", "/mcp/.well-known/oauth-protected-resource"] {
        assert_eq!(e.http.get(path).await.json(), expected(&resource), "{path}");
    }
    let card = e.http.get("/.well-known/mcp.json").await.json();
    assert_eq!((card["serverUrl"].as_str(), card["name"].as_str()), (Some(resource.as_str()), Some("herdr-mcp")));
    assert_eq!(card["version"], env!("CARGO_PKG_VERSION"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_registration_alias_registers_a_client() {
    let e = InProc::start().await;
    for path in ["/oauth/register", "/register", "/register/", "/mcp/register", "/mcp/register/", "/mcp/oauth/register"] {
        let r = e.http.post_json(path, &json!({"redirect_uris": [REDIRECT]}), None).await;
        assert_eq!(r.status, 201, "{path}: {}", r.body);
        let id = r.json()["client_id"].as_str().unwrap_or_default().to_string();
        assert!(id.starts_with("dcr-") && id.len() == 20, "{path}: {id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_reports_the_contract_identities_of_info() {
    let auth = Arc::new(TestDevices::default());
    let (e, _hub) = InProc::start_linked(auth).await;
    let info = e.http.get("/info").await.json();
    let health = e.http.get("/health").await;
    assert_eq!(health.status, 200);
    let h = health.json();
    assert_eq!((h["ok"].as_bool(), h["service"].as_str(), h["stage"].as_str()), (Some(true), Some("herdr-mcp-edge"), Some("link")));
    assert_eq!(h["edgeVersion"], env!("CARGO_PKG_VERSION"));
    assert_eq!(h["edgeEnv"], "production", "no --env given: {h}");
    assert_eq!(json!({"epoch": h["contractEpoch"], "hash": h["contractHash"], "toolCount": h["contractToolCount"]}), info["publicContract"]);
    assert_eq!(
        json!({"epoch": h["runtimeContractEpoch"], "hash": h["runtimeContractHash"], "toolCount": h["runtimeContractToolCount"]}),
        info["runtimeContract"]
    );
    let (catalog, (epoch, hash)) = herdr_mcp::edge::forward::local_runtime_contract();
    // The public catalog is the runtime's tools plus herdr_devices.
    assert_eq!(h["runtimeContractToolCount"].as_u64(), Some(catalog.len() as u64), "{h}");
    assert_eq!(h["contractToolCount"].as_u64(), Some(catalog.len() as u64 + 1), "{h}");
    assert_eq!((h["runtimeContractEpoch"].as_u64(), h["runtimeContractHash"].as_str()), (Some(u64::from(epoch)), Some(hash.as_str())));
    assert!(h["contractHash"].as_str().unwrap_or_default().starts_with("sha256:"), "{h}");
    // The edge's own clock (a manual one here), not the test machine's.
    assert_eq!(h["timestampMs"], T0);
    e.clock.advance_ms(1234);
    assert_eq!(e.http.get("/health").await.json()["timestampMs"], T0 + 1234);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_and_notifications_answer_204() {
    let e = InProc::start().await;
    for path in ["/mcp", "/oauth/token", "/oauth/register"] {
        let r = e.http.client.request(reqwest::Method::OPTIONS, format!("{}{path}", e.http.base))
            .header("origin", "https://chatgpt.com")
            .header("access-control-request-method", "POST")
            .send().await.unwrap();
        assert_eq!(r.status().as_u16(), 204, "{path}");
        let h = |n: &str| r.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        assert_eq!(h("access-control-allow-origin"), "*", "{path}");
        assert_eq!(h("access-control-allow-methods"), "GET,HEAD,POST,OPTIONS");
        assert!(h("access-control-allow-headers").contains("Mcp-Protocol-Version"));
        assert_eq!(h("access-control-expose-headers"), "WWW-Authenticate, Mcp-Session-Id");
    }
    let (_, t, _) = e.tokens().await;
    let note = e.http.post_json("/mcp", &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), Some(&t.access)).await;
    assert_eq!((note.status, note.body.as_str()), (202, ""));
    // Stateless: no session id is handed out.
    let init = e.http.mcp(&t.access, "initialize", json!({"protocolVersion": "2025-03-26"})).await;
    assert!(init.header("mcp-session-id").is_empty());
    assert_eq!(init.json()["result"]["protocolVersion"], "2025-03-26");
    let unknown = e.http.mcp(&t.access, "initialize", json!({"protocolVersion": "1999-01-01"})).await;
    assert_eq!(unknown.json()["result"]["protocolVersion"], "2025-11-25");
}

/// The JSON-RPC object carried by a one-event SSE body.
fn sse_message(body: &str) -> Value {
    let data: Vec<&str> = body.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(data.len(), 1, "one data line expected: {body:?}");
    assert!(body.ends_with("\n\n"), "an event ends with a blank line: {body:?}");
    serde_json::from_str(data[0]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handshake_is_framed_as_sse_when_the_client_accepts_it() {
    let e = InProc::start().await;
    let (_, t, _) = e.tokens().await;
    let post = |accept: &'static str, method: &'static str| {
        let params = edge_support::with_initialize_defaults(method, json!({"protocolVersion": "2025-06-18"}));
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        e.http.client.post(format!("{}/mcp", e.http.base))
            .header("authorization", format!("Bearer {}", t.access))
            .header("content-type", "application/json")
            .header("accept", accept)
            .body(body.to_string())
            .send()
    };
    let both = "application/json, text/event-stream";
    for method in ["initialize", "tools/list"] {
        let r = post(both, method).await.unwrap();
        assert_eq!(r.headers()["content-type"], "text/event-stream", "{method}");
        let msg = sse_message(&r.text().await.unwrap());
        assert_eq!(msg["id"], 7);
        assert!(msg["result"]["_meta"]["herdr"]["contract_hash"].is_string(), "{method}: {msg}");
        // A client that takes JSON only gets JSON.
        let r = post("application/json", method).await.unwrap();
        assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/json"), "{method}");
        assert_eq!(r.json::<Value>().await.unwrap()["id"], 7);
    }
    // Other answers stay JSON for a client that accepts both …
    let r = post(both, "ping").await.unwrap();
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/json"));
    // … and are SSE for one that accepts only SSE.
    let r = post("text/event-stream", "ping").await.unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    assert_eq!(sse_message(&r.text().await.unwrap())["result"], json!({}));
}

/// Spec §10: `GET /mcp` is a sessionless SSE probe. The edge pushes nothing, so
/// the stream opens, tells the client to wait before reopening it, and ends; it
/// still needs the bearer, and a GET that does not take SSE is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_mcp_is_a_sessionless_sse_probe() {
    let e = InProc::start().await;
    let (_, t, _) = e.tokens().await;
    let get = |bearer: Option<&str>, accept: &str| {
        let mut rb = e.http.client.get(format!("{}/mcp", e.http.base)).header("accept", accept);
        if let Some(b) = bearer {
            rb = rb.header("authorization", format!("Bearer {b}"));
        }
        rb.header("user-agent", "openai-mcp/1.0.0").send()
    };
    let r = tokio::time::timeout(std::time::Duration::from_secs(10), get(Some(&t.access), "text/event-stream")).await.expect("answered").unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    assert!(r.headers().get("mcp-session-id").is_none(), "stateless: no session");
    // The body ends by itself: the probe holds no connection open.
    let body = tokio::time::timeout(std::time::Duration::from_secs(10), r.text()).await.expect("the probe ends").unwrap();
    let retry = herdr_mcp::edge::mcp::SSE_PROBE_RETRY_MS;
    assert_eq!(body, format!(": connected\nretry: {retry}\n\n"));
    assert!(!body.contains("data:"), "no event is sent: {body:?}");

    let r = get(None, "text/event-stream").await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.headers()["www-authenticate"].to_str().unwrap().contains("resource_metadata="));
    let r = get(Some(&t.access), "application/json").await.unwrap();
    assert_eq!(r.status().as_u16(), 406);
    assert_eq!(r.json::<Value>().await.unwrap()["error"]["code"], -32600);
    // DELETE ends a session; without one there is nothing to end.
    let r = e.http.client.delete(format!("{}/mcp", e.http.base)).header("authorization", format!("Bearer {}", t.access)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pending_page_speaks_english_chinese_or_japanese() {
    let e = InProc::start().await;
    let c = e.client().await;
    for (accept, lang, phrase) in [
        (None, "en", "Approval code"),
        (Some("zh-CN,zh;q=0.9,en;q=0.8"), "zh", "批准码"),
        (Some("ja"), "ja", "承認コード"),
        (Some("fr, de;q=0.8"), "en", "Approval code"),
    ] {
        let (_, ch) = pkce();
        let path = authorize_path(&[("response_type", "code"), ("client_id", &c.id), ("redirect_uri", REDIRECT), ("code_challenge", &ch), ("code_challenge_method", "S256"), ("state", lang)]);
        let headers: Vec<(&str, &str)> = accept.map(|a| vec![("accept-language", a)]).unwrap_or_default();
        let page = e.http.get_with(&path, &headers).await;
        assert_eq!(page.status, 200, "{accept:?}: {}", page.body);
        assert!(page.body.contains(&format!("lang=\"{lang}\"")) && page.body.contains(phrase), "{accept:?}");
        assert_eq!(page.header("x-frame-options"), "DENY");
        let (request_id, _, _) = scrape_page(&page.body);
        assert!(page.body.contains(&format!("herdr-mcp connector approve {request_id}")));
        // Free the client's slot (4 pending per client).
        herdr_mcp::edge::connectors::cancel(&e.store, &request_id).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_disconnect_finds_no_revocation_endpoint_and_revokes_nothing() {
    let e = InProc::start().await;
    let (c, t, conn) = e.tokens().await;
    // What an RFC 7009 client would send on "Disconnect".
    for path in ["/oauth/revoke", "/revoke", "/oauth/token/revoke"] {
        for token in [&t.access, &t.refresh] {
            let r = e.http.post_form(path, &[("token", token), ("client_id", &c.id)]).await;
            assert_eq!((r.status, r.json()["code"].as_str()), (404, Some("not_found")), "{path}");
        }
    }
    assert_eq!(e.http.mcp(&t.access, "tools/list", json!({})).await.status, 200);
    let row = herdr_mcp::edge::connectors::list(&e.store).unwrap().into_iter().find(|r| r.connector_id == conn).unwrap();
    assert_eq!(row.status, "active");
    assert_eq!(e.refresh(&c, &t.refresh).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_catalog_is_19_actions_and_every_forwarded_one_takes_a_device() {
    let (e, _hub) = InProc::start_linked(Arc::new(TestDevices::default())).await;
    let (_, t, _) = e.tokens().await;
    let list = e.http.mcp(&t.access, "tools/list", json!({})).await.json();
    let tools = list["result"]["tools"].as_array().cloned().unwrap_or_default();
    assert_eq!(tools.len(), 19, "{list}");
    assert_eq!(list["result"]["_meta"]["herdr"]["contract_epoch"], herdr_mcp::edge::mcp::PUBLIC_CONTRACT_EPOCH);
    let (runtime, _) = herdr_mcp::edge::forward::local_runtime_contract();
    assert_eq!(runtime.len(), 18);
    for rt in &runtime {
        let public = tools.iter().find(|t| t["name"] == rt["name"]).unwrap_or_else(|| panic!("{} is not public", rt["name"]));
        assert_eq!(public["inputSchema"]["properties"]["device"]["type"], "string", "{}", rt["name"]);
        // The selector is optional: what the runtime requires stays what is required.
        assert_eq!(public["inputSchema"]["required"], rt["inputSchema"]["required"], "{}", rt["name"]);
    }
    let devices = tools.iter().find(|t| t["name"] == "herdr_devices").expect("herdr_devices");
    assert_eq!(devices["inputSchema"], json!({"type": "object", "properties": {}, "additionalProperties": false}));
    assert_eq!(devices["execution"]["taskSupport"], "forbidden");
    let mut read_only: Vec<&str> =
        tools.iter().filter(|t| t["annotations"]["readOnlyHint"] == true).filter_map(|t| t["name"].as_str()).collect();
    read_only.sort_unstable();
    assert_eq!(
        read_only,
        ["herdr_devices", "herdr_exec_read", "herdr_fs_grep", "herdr_fs_image", "herdr_fs_list", "herdr_fs_read", "herdr_git", "herdr_inspect", "herdr_methods", "herdr_since", "herdr_skill"]
    );
    let mut open_world: Vec<&str> =
        tools.iter().filter(|t| t["annotations"]["openWorldHint"] == true).filter_map(|t| t["name"].as_str()).collect();
    open_world.sort_unstable();
    assert_eq!(open_world, ["herdr_call", "herdr_exec", "herdr_exec_start", "herdr_prompt", "herdr_skill"]);
    assert!(tools.iter().all(|t| t["annotations"]["readOnlyHint"].is_boolean()), "every action says whether it writes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_discover_is_answered_by_the_edge_as_json_with_what_initialize_says() {
    let (e, _hub) = InProc::start_linked(Arc::new(TestDevices::default())).await;
    let (_, t, _) = e.tokens().await;
    let init = e.http.mcp(&t.access, "initialize", json!({"protocolVersion": "2025-11-25"})).await.json()["result"].clone();
    let info = e.http.get("/info").await.json();
    let post = |accept: &'static str, user_agent: &'static str, body: Value, bearer: Option<String>| {
        let mut rb = e.http.client.post(format!("{}/mcp", e.http.base))
            .header("content-type", "application/json")
            .header("accept", accept)
            .header("user-agent", user_agent)
            .body(body.to_string());
        if let Some(b) = bearer {
            rb = rb.header("authorization", format!("Bearer {b}"));
        }
        rb.send()
    };
    let discover = json!({"jsonrpc": "2.0", "id": 4, "method": "server/discover"});
    let bearer = Some(t.access.clone());

    // JSON even for a client that accepts only SSE; no session.
    let r = post("text/event-stream", "herdr-test/1", discover.clone(), bearer.clone()).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers()["content-type"].to_str().unwrap().starts_with("application/json"), "{:?}", r.headers());
    assert!(r.headers().get("mcp-session-id").is_none());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["id"], 4);
    let result = &body["result"];
    let mut keys: Vec<&str> = result.as_object().expect("a result").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["_meta", "cacheScope", "capabilities", "instructions", "resultType", "supportedVersions", "ttlMs"], "{body}");
    assert_eq!((result["resultType"].as_str(), result["ttlMs"].as_u64(), result["cacheScope"].as_str()), (Some("complete"), Some(3_600_000), Some("private")));
    assert_eq!(result["supportedVersions"], json!(herdr_mcp::edge::mcp::SUPPORTED_VERSIONS));
    assert_eq!(result["capabilities"], init["capabilities"]);
    assert_eq!(result["instructions"], init["instructions"]);
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"], init["serverInfo"]);
    assert_eq!(result["_meta"]["herdr"], init["_meta"]["herdr"]);
    assert_eq!(
        json!({"epoch": result["_meta"]["herdr_contract_epoch"], "hash": result["_meta"]["herdr_contract_hash"], "toolCount": result["_meta"]["herdr"]["tool_count"]}),
        info["publicContract"]
    );

    // OpenAI's connector is offered the same versions; 2026-07-28 has no initialize.
    let r = post("application/json, text/event-stream", "openai-mcp/1.0.0", discover.clone(), bearer.clone()).await.unwrap();
    assert_eq!(r.json::<Value>().await.unwrap()["result"]["supportedVersions"], json!(herdr_mcp::edge::mcp::SUPPORTED_VERSIONS));
    let init = e.http.mcp(&t.access, "initialize", json!({"protocolVersion": "2026-07-28"})).await.json();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");

    // Behind the OAuth bearer like every /mcp call; a notification gets no reply.
    let r = post("application/json", "openai-mcp/1.0.0", discover.clone(), None).await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let note = e.http.post_json("/mcp", &json!({"jsonrpc": "2.0", "method": "server/discover"}), Some(&t.access)).await;
    assert_eq!((note.status, note.body.as_str()), (202, ""));
    let bad = e.http.mcp(&t.access, "server/discover", json!("x")).await;
    assert_eq!((bad.status, &bad.json()["error"]["code"]), (400, &json!(-32600)), "{}", bad.body);
}

//! The edge's negative corpus: each case drives a fresh in-process edge on a
//! loopback port (with a manual clock) into one failure and checks the exact HTTP
//! status and error code. All cases run; failures are reported together.

mod edge_support;
#[path = "edge_support/corpus.rs"]
mod corpus;

use corpus::{Case, Outcome, case};
use edge_support::*;
use herdr_mcp::edge::connectors::{self, ApprovalError};
use serde_json::json;

fn oauth(r: Resp) -> Outcome {
    (r.status, r.oauth_error())
}

/// Spec §4 statuses of the approval answers.
fn approval(r: Result<connectors::ApprovalInfo, ApprovalError>) -> Outcome {
    match r {
        Ok(_) => (200, "approved".into()),
        Err(e) => {
            let status = match e {
                ApprovalError::InvalidCode { .. } => 403,
                ApprovalError::Locked => 423,
                ApprovalError::Expired | ApprovalError::NotFound => 404,
                ApprovalError::AlreadyUsed | ApprovalError::AlreadyApproved => 409,
                ApprovalError::Rejected => 410,
                ApprovalError::Db(_) => 500,
            };
            (status, e.code().to_string())
        }
    }
}

fn poll_outcome(r: Resp) -> Outcome {
    let v = r.json();
    (r.status, v.get("code").or_else(|| v.get("status")).and_then(|c| c.as_str()).unwrap_or("").to_string())
}

fn rpc(r: Resp) -> Outcome {
    let v = r.json();
    let code = v.pointer("/error/code").and_then(|c| c.as_i64()).map(|c| c.to_string()).unwrap_or_default();
    (r.status, code)
}

/// A client whose connections leave from 127.0.0.`n`.
fn source(e: &InProc, n: usize) -> Http {
    Http::from_source(&e.issuer, &format!("127.0.0.{n}"), "corpus")
}

fn wrong_code(code: &str) -> String {
    format!("{:06}", (code.parse::<u32>().unwrap() + 1) % 1_000_000)
}

fn cases() -> Vec<Case> {
    vec![
        // ---- /mcp bearer ----
        case!("mcp without a token", 401, "-32000", |e| {
            let r = e.http.post_json("/mcp", &json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}), None).await;
            assert!(r.header("www-authenticate").contains("resource_metadata=\""), "{:?}", r.headers);
            rpc(r)
        }),
        case!("mcp with an unknown token", 401, "-32000", |e| { rpc(e.http.mcp("hat_nope", "tools/list", json!({})).await) }),
        case!("mcp with a Basic scheme", 401, "-32000", |e| {
            let (_, t, _) = e.tokens().await;
            let r = e.http.client.post(format!("{}/mcp", e.http.base)).header("authorization", format!("Basic {}", t.access))
                .header("content-type", "application/json").body("{}").send().await.unwrap();
            (r.status().as_u16(), "-32000".into())
        }),
        case!("mcp with a refresh token as bearer", 401, "-32000", |e| {
            let (_, t, _) = e.tokens().await;
            rpc(e.http.mcp(&t.refresh, "tools/list", json!({})).await)
        }),
        case!("mcp tools/call of a tool outside the contract", 200, "-32602", |e| {
            let (_, t, _) = e.tokens().await;
            rpc(e.http.mcp(&t.access, "tools/call", json!({"name": "herdr_nope", "arguments": {}})).await)
        }),
        case!("mcp unknown method", 200, "-32601", |e| {
            let (_, t, _) = e.tokens().await;
            rpc(e.http.mcp(&t.access, "resources/list", json!({})).await)
        }),
        case!("connector bearer cannot reach an admin action", 401, "device_auth_required", |e| {
            let (_, t, _) = e.tokens().await;
            let r = e.http.post_json("/connectors/approve", &json!({"request_id": "req_x", "code": "123456"}), Some(&t.access)).await;
            (r.status, r.json()["code"].as_str().unwrap_or("").into())
        }),
        // ---- DCR ----
        case!("dcr without redirect_uris", 400, "invalid_client_metadata", |e| { oauth(e.register(json!({"client_name": "x"})).await) }),
        case!("dcr with empty redirect_uris", 400, "invalid_client_metadata", |e| { oauth(e.register(json!({"redirect_uris": []})).await) }),
        case!("dcr with 33 redirect_uris", 400, "invalid_client_metadata", |e| {
            let uris: Vec<String> = (0..33).map(|i| format!("https://c.example/cb{i}")).collect();
            oauth(e.register(json!({"redirect_uris": uris})).await)
        }),
        case!("dcr with 32 redirect_uris is accepted", 201, "", |e| {
            let uris: Vec<String> = (0..32).map(|i| format!("https://c.example/cb{i}")).collect();
            oauth(e.register(json!({"redirect_uris": uris})).await)
        }),
        case!("dcr redirect_uri of 4097 chars", 400, "invalid_client_metadata", |e| {
            let u = format!("https://c.example/{}", "a".repeat(4097 - 18));
            assert_eq!(u.len(), 4097);
            oauth(e.register(json!({"redirect_uris": [u]})).await)
        }),
        case!("dcr redirect_uri of 4096 chars is accepted", 201, "", |e| {
            let u = format!("https://c.example/{}", "a".repeat(4096 - 18));
            oauth(e.register(json!({"redirect_uris": [u]})).await)
        }),
        case!("dcr body over 256 KiB", 413, "invalid_client_metadata", |e| {
            let body = format!("{{\"redirect_uris\":[\"https://c.example/cb\"],\"pad\":\"{}\"}}", "x".repeat(256 * 1024));
            oauth(e.http.post_raw("/oauth/register", "application/json", body.into_bytes(), None).await)
        }),
        case!("dcr http redirect to a public host", 400, "invalid_redirect_uri", |e| {
            oauth(e.register(json!({"redirect_uris": ["http://c.example/cb"]})).await)
        }),
        case!("dcr javascript: redirect", 400, "invalid_redirect_uri", |e| {
            oauth(e.register(json!({"redirect_uris": ["javascript:alert(1)"]})).await)
        }),
        case!("dcr redirect with a fragment", 400, "invalid_redirect_uri", |e| {
            oauth(e.register(json!({"redirect_uris": ["https://c.example/cb#frag"]})).await)
        }),
        case!("dcr client_name of 257 chars", 400, "invalid_client_metadata", |e| {
            oauth(e.register(json!({"redirect_uris": [REDIRECT], "client_name": "n".repeat(257)})).await)
        }),
        case!("dcr body that is a JSON array", 400, "invalid_client_metadata", |e| {
            oauth(e.http.post_raw("/register", "application/json", b"[1]".to_vec(), None).await)
        }),
        // The shared cap still holds when many sources register: 26 addresses
        // of 10 each (one source alone is held to its own bucket, below).
        case!("dcr past 256 unapproved clients", 429, "temporarily_unavailable", |e| {
            for i in 0..256 {
                let r = source(&e, 2 + i / 10).register(json!({"redirect_uris": [REDIRECT]})).await;
                assert_eq!(r.status, 201, "registration {i}: {}", r.body);
            }
            let r = source(&e, 30).register(json!({"redirect_uris": [REDIRECT]})).await;
            assert_eq!(r.json()["error_description"], "dcr_capacity_reached");
            // An hour later the unapproved registrations have expired.
            e.clock.advance_ms(60 * 60 * 1000 + 1);
            assert_eq!(source(&e, 30).register(json!({"redirect_uris": [REDIRECT]})).await.status, 201);
            oauth(r)
        }),
        case!("registration_flood_from_one_source_is_rate_limited_not_shared", 429, "temporarily_unavailable", |e| {
            let flood = source(&e, 2);
            let mut accepted = 0;
            let mut last = None;
            for _ in 0..40 {
                let r = flood.register(json!({"redirect_uris": [REDIRECT]})).await;
                if r.status == 201 { accepted += 1 } else { last = Some(r) }
            }
            assert_eq!(accepted, 10, "one source gets its burst, then waits");
            let r = last.expect("the flood was refused");
            assert_eq!(r.json()["error_description"], "registration_rate_limited");
            assert_eq!(r.header("retry-after"), "60");
            assert_eq!(source(&e, 3).register(json!({"redirect_uris": [REDIRECT]})).await.status, 201, "another source is unaffected");
            // The bucket refills: one a minute.
            e.clock.advance_ms(60_000);
            assert_eq!(flood.register(json!({"redirect_uris": [REDIRECT]})).await.status, 201);
            oauth(r)
        }),
        case!("unapproved registration expires on its own (hourly sweep)", 400, "invalid_request", |e| {
            let c = e.client().await;
            e.clock.advance_ms(60 * 60 * 1000 + 1);
            connectors::sweep(&e.store).unwrap();
            let gone: i64 = e.store.read(|tx| tx.query_row("SELECT COUNT(*) FROM clients WHERE client_id = ?1", [&c.id], |r| r.get(0))).unwrap();
            assert_eq!(gone, 0, "the sweep removed the stale registration");
            let (_, ch) = pkce();
            oauth(e.authorize(&c, &ch, "late").await)
        }),
        // ---- /oauth/authorize ----
        case!("authorize with an unknown client", 400, "invalid_request", |e| {
            let (_, ch) = pkce();
            let r = e.http.get(&authorize_path(&[("response_type","code"),("client_id","dcr-0000000000000000"),("redirect_uri",REDIRECT),("code_challenge",&ch),("code_challenge_method","S256")])).await;
            assert!(r.header("location").is_empty(), "must not redirect");
            oauth(r)
        }),
        case!("authorize with an unregistered redirect_uri", 400, "invalid_request", |e| {
            let c = e.client().await;
            let (_, ch) = pkce();
            let r = e.http.get(&authorize_path(&[("response_type","code"),("client_id",&c.id),("redirect_uri","https://client.example/other"),("code_challenge",&ch),("code_challenge_method","S256")])).await;
            assert!(r.header("location").is_empty(), "must not redirect");
            oauth(r)
        }),
        case!("authorize for a client without the code grant", 400, "unauthorized_client", |e| {
            let r = e.register(json!({"redirect_uris": [REDIRECT], "grant_types": ["refresh_token"]})).await;
            let id = r.json()["client_id"].as_str().unwrap().to_string();
            let (_, ch) = pkce();
            oauth(e.http.get(&authorize_path(&[("response_type","code"),("client_id",&id),("redirect_uri",REDIRECT),("code_challenge",&ch),("code_challenge_method","S256")])).await)
        }),
        case!("authorize with response_type=token (unapproved client: no redirect)", 400, "unsupported_response_type", |e| {
            let c = e.client().await;
            let (_, ch) = pkce();
            let r = e.http.get(&authorize_path(&[("response_type","token"),("client_id",&c.id),("redirect_uri",REDIRECT),("code_challenge",&ch),("code_challenge_method","S256"),("state","s1")])).await;
            assert!(r.header("location").is_empty(), "an unapproved client's redirect_uri is not trusted: {:?}", r.headers);
            oauth(r)
        }),
        // Once an operator approved the client, errors go back to it (RFC 6749
        // §4.1.2.1) with state and iss (RFC 9207).
        case!("authorize with response_type=token (approved client: redirect)", 302, "unsupported_response_type", |e| {
            let (c, _, _) = e.tokens().await;
            let (_, ch) = pkce();
            let r = e.http.get(&authorize_path(&[("response_type","token"),("client_id",&c.id),("redirect_uri",REDIRECT),("code_challenge",&ch),("code_challenge_method","S256"),("state","s1")])).await;
            let q = query_of(&r.header("location"));
            assert_eq!(q.get("state").map(String::as_str), Some("s1"));
            assert_eq!(q.get("iss"), Some(&e.issuer));
            oauth(r)
        }),
        case!("authorize with another scope (approved client: redirect)", 302, "invalid_scope", |e| {
            let (c, _, _) = e.tokens().await;
            let (_, ch) = pkce();
            oauth(e.http.get(&authorize_path(&[("response_type","code"),("client_id",&c.id),("redirect_uri",REDIRECT),("code_challenge",&ch),("code_challenge_method","S256"),("scope","mcp admin")])).await)
        }),
        case!("authorize without PKCE (unapproved client: no redirect)", 400, "invalid_request", |e| {
            let c = e.client().await;
            let r = e.http.get(&authorize_path(&[("response_type","code"),("client_id",&c.id),("redirect_uri",REDIRECT)])).await;
            assert_eq!(r.json()["error_description"], "PKCE code_challenge is required (S256)");
            oauth(r)
        }),
        case!("authorize with PKCE plain (unapproved client: no redirect)", 400, "invalid_request", |e| {
            let c = e.client().await;
            let (v, _) = pkce();
            let r = e.http.get(&authorize_path(&[("response_type","code"),("client_id",&c.id),("redirect_uri",REDIRECT),("code_challenge",&v),("code_challenge_method","plain")])).await;
            assert_eq!(r.json()["error_description"], "only code_challenge_method=S256 is supported");
            oauth(r)
        }),
        case!("authorize with PKCE method omitted (means plain) (unapproved client: no redirect)", 400, "invalid_request", |e| {
            let c = e.client().await;
            let (_, ch) = pkce();
            oauth(e.http.get(&authorize_path(&[("response_type","code"),("client_id",&c.id),("redirect_uri",REDIRECT),("code_challenge",&ch)])).await)
        }),
        case!("authorize with a malformed S256 challenge (unapproved client: no redirect)", 400, "invalid_request", |e| {
            let c = e.client().await;
            oauth(e.http.get(&authorize_path(&[("response_type","code"),("client_id",&c.id),("redirect_uri",REDIRECT),("code_challenge","short"),("code_challenge_method","S256")])).await)
        }),
        case!("authorize with another scope (unapproved client: no redirect)", 400, "invalid_scope", |e| {
            let c = e.client().await;
            let (_, ch) = pkce();
            oauth(e.http.get(&authorize_path(&[("response_type","code"),("client_id",&c.id),("redirect_uri",REDIRECT),("code_challenge",&ch),("code_challenge_method","S256"),("scope","mcp admin")])).await)
        }),
        case!("authorize with a foreign resource (unapproved client: no redirect)", 400, "invalid_target", |e| {
            let c = e.client().await;
            let (_, ch) = pkce();
            oauth(e.http.get(&authorize_path(&[("response_type","code"),("client_id",&c.id),("redirect_uri",REDIRECT),("code_challenge",&ch),("code_challenge_method","S256"),("resource","https://evil.example/mcp")])).await)
        }),
        case!("authorize query over 16 KiB", 400, "invalid_request", |e| {
            let pad = "p".repeat(4000);
            let pairs: Vec<(String, String)> = (0..5).map(|i| (format!("x{i}"), pad.clone())).collect();
            oauth(e.http.get(&format!("/oauth/authorize?{}", serde_urlencoded::to_string(&pairs).unwrap())).await)
        }),
        case!("authorize parameter over 4096 bytes", 400, "invalid_request", |e| {
            oauth(e.http.get(&authorize_path(&[("state", &"s".repeat(4097))])).await)
        }),
        case!("authorize with a repeated parameter", 400, "invalid_request", |e| {
            oauth(e.http.get("/oauth/authorize?client_id=a&client_id=b").await)
        }),
        case!("authorize duplicate of a pending request", 409, "duplicate_pending", |e| {
            let c = e.client().await;
            let (_, ch) = pkce();
            assert_eq!(e.authorize(&c, &ch, "same").await.status, 200);
            let r = e.authorize(&c, &ch, "same").await;
            assert!(r.header("retry-after").parse::<i64>().unwrap() > 0);
            (r.status, if r.body.contains("duplicate_pending") { "duplicate_pending".into() } else { r.body })
        }),
        case!("authorize fifth pending request of one client", 429, "temporarily_unavailable", |e| {
            let c = e.client().await;
            for _ in 0..4 { e.pending(&c).await; }
            let (_, ch) = pkce();
            let r = e.authorize(&c, &ch, "fifth").await;
            assert_eq!(r.json()["error_description"], "client_pending_limit");
            oauth(r)
        }),
        // The shared cap still holds when many sources ask: 13 addresses of 10
        // each (one source is held to its bucket and its own share, below).
        case!("authorize past 128 pending requests", 429, "temporarily_unavailable", |e| {
            let mut made = 0;
            for n in 2..15 {
                let from = source(&e, n);
                let clients = [from.dcr_client().await, from.dcr_client().await, from.dcr_client().await];
                for k in 0..10 {
                    if made < 128 {
                        from.pending(&clients[k / 4]).await;
                        made += 1;
                    }
                }
            }
            let from = source(&e, 20);
            let c = from.dcr_client().await;
            let (_, ch) = pkce();
            let r = from.authorize(&c, &ch, "one-too-many").await;
            assert_eq!(r.json()["error_description"], "pending_capacity_reached");
            oauth(r)
        }),
        case!("pending_flood_from_one_source_leaves_others_their_requests", 429, "temporarily_unavailable", |e| {
            // A public client_id is shared (ChatGPT's is everyone's): a stranger
            // using it from one address fills only that address's share.
            let shared = e.client().await;
            let flood = source(&e, 2);
            let mut made = 0;
            let mut first = None;
            for i in 0..20 {
                let (_, ch) = pkce();
                let r = flood.authorize(&shared, &ch, &format!("flood-{i}")).await;
                if r.status == 200 { made += 1 } else if first.is_none() { first = Some(r) }
            }
            assert_eq!(made, 4, "one source holds at most 4 pending requests of one client");
            let r = first.expect("the flood was refused");
            assert_eq!(r.json()["error_description"], "client_pending_limit");
            assert!(r.header("retry-after").parse::<u64>().is_ok_and(|s| s > 0), "{:?}", r.headers);
            let (_, ch) = pkce();
            assert_eq!(e.authorize(&shared, &ch, "legit").await.status, 200, "another source still gets its approval page");
            // Other clients from the flooding source: its bucket (10 at once) runs dry.
            let mut refused = None;
            for _ in 0..3 {
                let c = flood.dcr_client().await;
                for _ in 0..4 {
                    let (_, ch) = pkce();
                    let r = flood.authorize(&c, &ch, "more").await;
                    if r.status != 200 { refused = Some(r) }
                }
            }
            let r = refused.expect("the bucket ran dry");
            assert_eq!(r.json()["error_description"], "authorization_rate_limited");
            oauth(r)
        }),
        case!("approved_public_client_does_not_mint_for_strangers", 202, "pending", |e| {
            let (c, t, _) = e.tokens().await;
            let stranger = source(&e, 2);
            let (_, ch) = pkce();
            let r = stranger.authorize(&c, &ch, "mine-now").await;
            assert!(r.header("location").is_empty(), "a code for a stranger: {:?}", r.headers);
            assert_eq!(e.http.mcp(&t.access, "tools/list", json!({})).await.status, 200);
            let (rid, _, resume) = scrape_page(&r.body);
            let q = serde_urlencoded::to_string([("request_id", &rid), ("resume_token", &resume)]).unwrap();
            poll_outcome(stranger.get(&format!("/oauth/authorize/poll?{q}")).await)
        }),
        case!("approving_one_request_approves_only_that_request", 202, "pending", |e| {
            let c = e.client().await;
            let (a, b) = (e.pending(&c).await, source(&e, 2).pending(&c).await);
            let info = e.approve(&a).unwrap();
            let other: String = e.store.read(|tx| tx.query_row("SELECT connector_id FROM approvals WHERE request_id = ?1", [&b.request_id], |r| r.get(0))).unwrap();
            assert_ne!(info.connector_id, other, "each request is its own connector");
            assert_eq!(e.poll(&a).await.status, 200);
            poll_outcome(e.poll(&b).await)
        }),
        case!("mcp tools/call with arguments deeper than a link accepts", 200, "-32602", |e| {
            let (_, t, _) = e.tokens().await;
            let mut v = json!({});
            for _ in 0..herdr_mcp::edge::relay::MAX_ARGUMENTS_DEPTH { v = json!({"n": v}); }
            let r = e.http.mcp(&t.access, "tools/call", json!({"name": "herdr_fs_read", "arguments": v})).await;
            assert!(r.json()["error"]["message"].as_str().unwrap_or("").contains("31 levels"), "{}", r.body);
            rpc(r)
        }),
        case!("authorize for a revoked grant", 302, "access_denied", |e| {
            let (c, _, conn) = e.tokens().await;
            connectors::revoke(&e.store, &conn, "test").unwrap();
            let (_, ch) = pkce();
            let r = e.authorize(&c, &ch, "after-revoke").await;
            assert_eq!(query_of(&r.header("location"))["error_description"], "client grant is revoked");
            oauth(r)
        }),
        // ---- approvals ----
        case!("approve with a wrong code", 403, "invalid_code", |e| {
            let c = e.client().await;
            let p = e.pending(&c).await;
            let r = connectors::approve(&e.store, &p.request_id, &wrong_code(&p.code), "t");
            assert_eq!(r.as_ref().err(), Some(&ApprovalError::InvalidCode { remaining: 4 }));
            approval(r)
        }),
        case!("approve after five wrong codes is locked", 423, "locked", |e| {
            let c = e.client().await;
            let p = e.pending(&c).await;
            for _ in 0..4 { assert!(matches!(connectors::approve(&e.store, &p.request_id, &wrong_code(&p.code), "t"), Err(ApprovalError::InvalidCode { .. }))); }
            assert_eq!(connectors::approve(&e.store, &p.request_id, &wrong_code(&p.code), "t").err(), Some(ApprovalError::Locked));
            assert_eq!(poll_outcome(e.poll(&p).await), (423, "locked".into()));
            approval(e.approve(&p))
        }),
        case!("approve after the 10 minute TTL", 404, "expired", |e| {
            let c = e.client().await;
            let p = e.pending(&c).await;
            e.clock.advance_ms(10 * 60 * 1000);
            assert_eq!(poll_outcome(e.poll(&p).await), (410, "expired".into()));
            approval(e.approve(&p))
        }),
        case!("approve just before the TTL succeeds", 200, "approved", |e| {
            let c = e.client().await;
            let p = e.pending(&c).await;
            e.clock.advance_ms(10 * 60 * 1000 - 1);
            approval(e.approve(&p))
        }),
        case!("approve an unknown request", 404, "not_found", |e| {
            approval(connectors::approve(&e.store, "req_unknown", "123456", "t"))
        }),
        case!("approve a cancelled request", 404, "not_found", |e| {
            let c = e.client().await;
            let p = e.pending(&c).await;
            connectors::cancel(&e.store, &p.request_id).unwrap();
            assert_eq!(poll_outcome(e.poll(&p).await), (410, "not_found".into()));
            approval(e.approve(&p))
        }),
        case!("cancel after tokens were issued", 409, "already_used", |e| {
            let c = e.client().await;
            let (code, p) = e.code(&c).await;
            assert_eq!(e.redeem(&c, &code, &p.verifier).await.status, 200);
            approval(connectors::cancel(&e.store, &p.request_id).map(|_| unreachable!()))
        }),
        case!("poll with a wrong resume token", 403, "invalid_resume", |e| {
            let c = e.client().await;
            let mut p = e.pending(&c).await;
            p.resume = "forged".into();
            poll_outcome(e.poll(&p).await)
        }),
        case!("poll while pending", 202, "pending", |e| {
            let c = e.client().await;
            let p = e.pending(&c).await;
            poll_outcome(e.poll(&p).await)
        }),
        // ---- /oauth/token: authorization_code ----
        case!("token with a wrong PKCE verifier", 400, "invalid_grant", |e| {
            let c = e.client().await;
            let (code, _) = e.code(&c).await;
            let (other, _) = pkce();
            let r = e.redeem(&c, &code, &other).await;
            assert_eq!(r.json()["error_description"], "PKCE verification failed");
            oauth(r)
        }),
        case!("token without a PKCE verifier", 400, "invalid_grant", |e| {
            let c = e.client().await;
            let (code, _) = e.code(&c).await;
            let resource = format!("{}/mcp", e.issuer);
            let r = e.http.post_form("/oauth/token", &[("grant_type","authorization_code"),("client_id",&c.id),("code",&code),("redirect_uri",REDIRECT),("resource",&resource)]).await;
            assert_eq!(r.json()["error_description"], "PKCE verification failed");
            oauth(r)
        }),
        case!("token with the plain verifier as challenge", 400, "invalid_grant", |e| {
            let c = e.client().await;
            let (code, p) = e.code(&c).await;
            oauth(e.redeem(&c, &code, &p.challenge).await)
        }),
        case!("token code reused", 400, "invalid_grant", |e| {
            let c = e.client().await;
            let (code, p) = e.code(&c).await;
            assert_eq!(e.redeem(&c, &code, &p.verifier).await.status, 200);
            oauth(e.redeem(&c, &code, &p.verifier).await)
        }),
        case!("token code reused after a failed attempt", 400, "invalid_grant", |e| {
            let c = e.client().await;
            let (code, p) = e.code(&c).await;
            let (other, _) = pkce();
            assert_eq!(e.redeem(&c, &code, &other).await.status, 400);
            oauth(e.redeem(&c, &code, &p.verifier).await)
        }),
        case!("token code after 5 minutes", 400, "invalid_grant", |e| {
            let c = e.client().await;
            let (code, p) = e.code(&c).await;
            e.clock.advance_ms(5 * 60 * 1000);
            oauth(e.redeem(&c, &code, &p.verifier).await)
        }),
        case!("token with a different redirect_uri", 400, "invalid_grant", |e| {
            let c = e.client().await;
            let (code, p) = e.code(&c).await;
            let resource = format!("{}/mcp", e.issuer);
            oauth(e.http.post_form("/oauth/token", &[("grant_type","authorization_code"),("client_id",&c.id),("code",&code),("redirect_uri","https://client.example/other"),("code_verifier",&p.verifier),("resource",&resource)]).await)
        }),
        case!("token with a foreign resource", 400, "invalid_target", |e| {
            let c = e.client().await;
            let (code, p) = e.code(&c).await;
            oauth(e.http.post_form("/oauth/token", &[("grant_type","authorization_code"),("client_id",&c.id),("code",&code),("redirect_uri",REDIRECT),("code_verifier",&p.verifier),("resource","https://evil.example/mcp")]).await)
        }),
        case!("token without resource", 400, "invalid_target", |e| {
            let c = e.client().await;
            let (code, p) = e.code(&c).await;
            oauth(e.http.post_form("/oauth/token", &[("grant_type","authorization_code"),("client_id",&c.id),("code",&code),("redirect_uri",REDIRECT),("code_verifier",&p.verifier)]).await)
        }),
        case!("token for an unknown client", 401, "invalid_client", |e| {
            let c = TestClient { id: "dcr-ffffffffffffffff".into(), secret: String::new() };
            oauth(e.redeem(&c, "hac_x", "v").await)
        }),
        case!("token with a code issued to another client", 400, "invalid_grant", |e| {
            let c = e.client().await;
            let other = e.client().await;
            let (code, p) = e.code(&c).await;
            oauth(e.redeem(&other, &code, &p.verifier).await)
        }),
        case!("token confidential client with a wrong secret", 401, "invalid_client", |e| {
            let r = e.register(json!({"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_post"})).await;
            let id = r.json()["client_id"].as_str().unwrap().to_string();
            let resource = format!("{}/mcp", e.issuer);
            oauth(e.http.post_form("/oauth/token", &[("grant_type","authorization_code"),("client_id",&id),("client_secret","wrong"),("code","hac_x"),("resource",&resource)]).await)
        }),
        // client_credentials is only for automation (svc_…) clients (spec §3).
        case!("token with grant_type=client_credentials from a DCR client", 400, "unauthorized_client", |e| {
            let c = e.client().await;
            oauth(e.http.post_form("/oauth/token", &[("grant_type","client_credentials"),("client_id",&c.id)]).await)
        }),
        case!("token with an unknown grant_type", 400, "unsupported_grant_type", |e| {
            let c = e.client().await;
            oauth(e.http.post_form("/oauth/token", &[("grant_type","password"),("client_id",&c.id)]).await)
        }),
        case!("token without grant_type", 400, "invalid_request", |e| {
            oauth(e.http.post_form("/oauth/token", &[("client_id","x")]).await)
        }),
        case!("token with a repeated parameter", 400, "invalid_request", |e| {
            oauth(e.http.post_raw("/oauth/token", "application/x-www-form-urlencoded", b"grant_type=refresh_token&grant_type=refresh_token".to_vec(), None).await)
        }),
        case!("token body over 64 KiB", 413, "invalid_request", |e| {
            oauth(e.http.post_raw("/oauth/token", "application/x-www-form-urlencoded", vec![b'a'; 64 * 1024 + 1], None).await)
        }),
        // ---- refresh ----
        case!("refresh token reused revokes its family", 400, "invalid_grant", |e| {
            let (c, t, _) = e.tokens().await;
            let r1 = e.refresh(&c, &t.refresh).await;
            assert_eq!(r1.status, 200, "{}", r1.body);
            let new_access = r1.json()["access_token"].as_str().unwrap().to_string();
            let new_refresh = r1.json()["refresh_token"].as_str().unwrap().to_string();
            assert_eq!(e.http.mcp(&new_access, "tools/list", json!({})).await.status, 200);
            let reuse = e.refresh(&c, &t.refresh).await;
            // The whole family is gone: the newest pair fails too.
            assert_eq!(e.http.mcp(&new_access, "tools/list", json!({})).await.status, 401);
            assert_eq!(e.refresh(&c, &new_refresh).await.status, 400);
            oauth(reuse)
        }),
        case!("refresh with an unknown token", 400, "invalid_grant", |e| {
            let (c, _, _) = e.tokens().await;
            oauth(e.refresh(&c, "hrt_unknown").await)
        }),
        case!("refresh after 30 days", 400, "invalid_grant", |e| {
            let (c, t, _) = e.tokens().await;
            e.clock.advance_ms(30 * 86_400 * 1000);
            oauth(e.refresh(&c, &t.refresh).await)
        }),
        case!("refresh by another client", 400, "invalid_grant", |e| {
            let (_, t, _) = e.tokens().await;
            let other = e.client().await;
            oauth(e.refresh(&other, &t.refresh).await)
        }),
        case!("refresh of a revoked connector", 400, "invalid_grant", |e| {
            let (c, t, conn) = e.tokens().await;
            connectors::revoke(&e.store, &conn, "test").unwrap();
            oauth(e.refresh(&c, &t.refresh).await)
        }),
        // ---- revocation and expiry of access ----
        case!("revoked connector's access token on the very next request", 401, "-32000", |e| {
            let (_, t, conn) = e.tokens().await;
            assert_eq!(e.http.mcp(&t.access, "tools/list", json!({})).await.status, 200);
            let r = connectors::revoke(&e.store, &conn, "test").unwrap();
            assert_eq!(r.deleted_tokens, 2);
            rpc(e.http.mcp(&t.access, "tools/list", json!({})).await)
        }),
        case!("revoke twice", 409, "already_revoked", |e| {
            let (_, _, conn) = e.tokens().await;
            connectors::revoke(&e.store, &conn, "test").unwrap();
            let err = connectors::revoke(&e.store, &conn, "test").unwrap_err();
            (409, err.to_string().split(':').next().unwrap().to_string())
        }),
        case!("access token after 24 hours", 401, "-32000", |e| {
            let (_, t, _) = e.tokens().await;
            e.clock.advance_ms(86_400 * 1000);
            rpc(e.http.mcp(&t.access, "tools/list", json!({})).await)
        }),
        case!("inactive for 30 days is swept", 401, "-32000", |e| {
            let (_, t, conn) = e.tokens().await;
            e.clock.advance_ms(30 * 86_400 * 1000);
            assert!(connectors::sweep(&e.store).unwrap().is_empty(), "exactly 30 days is not yet idle");
            e.clock.advance_ms(1);
            assert_eq!(connectors::sweep(&e.store).unwrap(), vec![conn.clone()]);
            let row = connectors::list(&e.store).unwrap().into_iter().find(|r| r.connector_id == conn).unwrap();
            assert_eq!((row.status.as_str(), row.revoked_by.as_deref()), ("revoked", Some("inactive_30d")));
            assert_eq!(row.active_access_tokens + row.active_refresh_tokens, 0);
            rpc(e.http.mcp(&t.access, "tools/list", json!({})).await)
        }),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_corpus() {
    let cases = cases();
    assert!(cases.len() >= 40, "the corpus must hold at least 40 cases, has {}", cases.len());
    corpus::run_all("negative", cases).await;
}

//! The `client_credentials` grant of `POST /oauth/token` (spec edge.md §3): only
//! automation clients (`svc_…`) may use it, authenticated by their secret
//! (`client_secret_post`, or HTTP Basic as for the other grants). The answer has
//! no refresh token: the client holds its secret and simply asks again.

use std::collections::HashMap;

use axum::response::Response;
use serde_json::json;

use super::automation::{ACCESS_TTL_MS, is_automation_client, issue_token};
use super::http::{internal_error, json_response, oauth_error};
use super::{EdgeState, SCOPE};

const AUTH_FAILED: &str = "client authentication failed";

pub fn grant(
    s: &EdgeState,
    p: &HashMap<String, String>,
    client_id: &str,
    secret: Option<&str>,
) -> Response {
    if !is_automation_client(client_id) {
        return oauth_error(
            400,
            "unauthorized_client",
            "client_credentials is only for automation clients (svc_…)",
        );
    }
    let Some(secret) = secret else {
        return oauth_error(401, "invalid_client", AUTH_FAILED);
    };
    let iss = &s.config.issuer;
    if p.get("resource")
        .and_then(|r| s.config.normalize_resource(r))
        .is_none()
    {
        return oauth_error(
            400,
            "invalid_target",
            &format!("resource must be {iss} or {iss}/mcp"),
        );
    }
    match issue_token(&s.store, client_id, secret) {
        Ok(Ok(token)) => json_response(
            200,
            json!({"access_token": token, "token_type": "Bearer", "expires_in": ACCESS_TTL_MS / 1000, "scope": SCOPE}),
        ),
        // Unknown, revoked, rotated away or wrong: the same answer for each.
        Ok(Err(_)) => oauth_error(401, "invalid_client", AUTH_FAILED),
        Err(e) => internal_error("cannot issue tokens", e),
    }
}

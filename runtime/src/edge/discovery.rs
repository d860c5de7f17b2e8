//! Discovery documents: RFC 8414 authorization-server metadata (also served as
//! `openid-configuration`), RFC 9728 protected-resource metadata for the issuer and
//! for `/mcp`, and `/.well-known/mcp.json`.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};

use super::http::json_response;
use super::{EdgeConfig, EdgeState, SCOPE};

pub const SERVER_NAME: &str = "herdr-mcp";

pub fn as_metadata(c: &EdgeConfig) -> Value {
    let iss = &c.issuer;
    json!({
        "issuer": iss,
        "authorization_endpoint": format!("{iss}/oauth/authorize"),
        "token_endpoint": format!("{iss}/oauth/token"),
        "registration_endpoint": format!("{iss}/oauth/register"),
        "scopes_supported": [SCOPE],
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        // Only what /oauth/token really accepts; `private_key_jwt` is advertised once
        // it is implemented.
        "token_endpoint_auth_methods_supported": ["none", "client_secret_post"],
        "code_challenge_methods_supported": ["S256"],
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": true,
        "protected_resources": [c.resource],
    })
}

pub fn resource_metadata(c: &EdgeConfig, resource: &str) -> Value {
    json!({
        "resource": resource,
        "authorization_servers": [c.issuer],
        "scopes_supported": [SCOPE],
        "bearer_methods_supported": ["header"],
        "resource_name": SERVER_NAME,
    })
}

/// The `WWW-Authenticate` value of a 401 from `/mcp`.
pub fn bearer_challenge(c: &EdgeConfig) -> String {
    format!("Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\", scope=\"{SCOPE}\"", c.issuer)
}

pub fn routes() -> Router<Arc<EdgeState>> {
    let mut r = Router::new();
    for base in ["/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"] {
        for path in [base.to_string(), format!("{base}/mcp"), format!("/mcp{base}")] {
            r = r.route(&path, get(authorization_server));
        }
    }
    r.route("/.well-known/oauth-protected-resource", get(protected_resource_issuer))
        .route("/.well-known/oauth-protected-resource/mcp", get(protected_resource_mcp))
        .route("/mcp/.well-known/oauth-protected-resource", get(protected_resource_mcp))
        .route("/.well-known/mcp.json", get(mcp_json))
}

async fn authorization_server(State(s): State<Arc<EdgeState>>) -> Response {
    json_response(200, as_metadata(&s.config))
}

async fn protected_resource_issuer(State(s): State<Arc<EdgeState>>) -> Response {
    json_response(200, resource_metadata(&s.config, &s.config.issuer))
}

async fn protected_resource_mcp(State(s): State<Arc<EdgeState>>) -> Response {
    json_response(200, resource_metadata(&s.config, &s.config.resource))
}

async fn mcp_json(State(s): State<Arc<EdgeState>>) -> Response {
    json_response(200, json!({"serverUrl": s.config.resource, "name": SERVER_NAME, "version": env!("CARGO_PKG_VERSION")}))
}

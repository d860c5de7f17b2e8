//! Edge mode: the OAuth 2.1 authorization server and the public, bearer-protected
//! MCP endpoint that ChatGPT connectors talk to (`herdr-mcp edge serve`).
//!
//! Layout, one concern per file:
//! - [`store`]: SQLite state (`edge.db`) and the pepper file; [`clock`]: injectable time;
//!   [`secrets`]: randomness, hashing, HMAC, PKCE.
//! - [`discovery`]: RFC 8414 / RFC 9728 metadata and `/.well-known/mcp.json`.
//! - [`dcr`]: dynamic client registration (RFC 7591); [`cimd`] (+ `_fetch`): Client ID
//!   Metadata Documents, fetched under the SSRF rules.
//! - [`authorize`]: `/oauth/authorize` and the pending-approval records; [`approval_page`]: its HTML;
//!   [`approval_reject`]: rejecting a damaged approved request and withdrawing its connector;
//!   [`ratelimit`]: per-source token buckets for registration and pending requests.
//! - [`token`]: `/oauth/token`, codes and token rotation; bearer verification.
//! - [`connectors`]: approve / revoke / cancel and the inactivity sweep;
//!   [`connectors_inventory`]: the inventory `list` shows (spec §5), printed
//!   by [`connectors_table`]; [`connectors_listing`]: reading it, or an older
//!   edge's plainer list, from a `GET /connectors` answer;
//!   [`connectors_revoke_client`]: every connector of one client at once, or a
//!   tombstone for a client that has none; [`connectors_http`]: the same over
//!   `/connectors/*` for enrolled devices;
//!   [`connectors_cli`]: `herdr-mcp connector …`, local or over HTTP.
//! - [`mcp`]: the stateless `/mcp` endpoint and the [`mcp::WorkstationRouter`] seam.
//! - [`relay`]: Relay protocol v1 frames; [`link_hub`] (+ `_socket`, `_auth`, `_watch`): the
//!   workstation links at `/ws/<workstation_id>`; [`forward`] (+ `_route`,
//!   `_errors`, `_pending`): the real [`mcp::WorkstationRouter`]; [`info`]: `/info`;
//!   [`status`]: `/status/<workstation_id>`.
//! - [`http`]: the router and the server loop; [`cli`]: `edge` and `connector` commands.
//! - [`devices`]: the device registry and the link-credential check the link hub
//!   uses; [`devices_lifecycle`]: suspend, resume, re-key, the link-offered name;
//!   [`pairing`]: enrolling a new computer; [`devices_local`]: the credential
//!   file on an enrolled workstation; [`devices_admin`]: the operator's
//!   `device revoke|suspend|resume` on the edge host.
//!
//! How the operator CLI reaches the state: on the edge host it may open the same
//! `edge.db` directly (see [`store`]); on any enrolled computer it calls the
//! admin routes (`/connectors/*`, `/devices/*`) with that device's credential.
//! Those routes accept nothing else, so a connector's bearer can never approve,
//! revoke or cancel anything.
//!
//! Access tokens are opaque (not JWTs): the store keeps their hash with
//! `connector_id` and `grant_generation`, and every `/mcp` request looks them up,
//! so a revocation is effective on the very next request.

pub mod approval_page;
pub mod approval_reject;
pub mod authorize;
pub mod automation;
pub mod automation_cli;
pub mod automation_grant;
pub mod cimd;
pub mod cimd_fetch;
pub mod cli;
pub mod clock;
pub mod connectors;
pub mod connectors_cli;
pub mod connectors_http;
pub mod connectors_inventory;
pub mod connectors_listing;
pub mod connectors_table;
pub mod connectors_revoke_client;
pub mod dcr;
pub mod devices;
pub mod devices_admin;
pub mod devices_cli;
pub mod devices_http;
pub mod devices_lifecycle;
pub mod devices_link;
pub mod devices_local;
pub mod discovery;
pub mod forward;
pub mod forward_errors;
pub mod forward_idem;
pub mod forward_pending;
pub mod forward_route;
pub mod http;
pub mod info;
pub mod link_hub;
pub mod link_hub_auth;
pub mod link_hub_socket;
pub mod link_hub_watch;
pub mod mcp;
pub mod relay;
pub mod pairing;
pub mod ratelimit;
pub mod secrets;
pub mod status;
pub mod store;
pub mod tls;
pub mod token;

use std::sync::Arc;

use store::EdgeStore;

/// The only scope this server grants.
pub const SCOPE: &str = "mcp";

/// The deployment name `/health` reports as `edgeEnv` when none is chosen.
pub const DEFAULT_ENV: &str = "production";
/// Longest deployment name: enough for `staging-eu-west-2`, short enough for a
/// monitor's label.
pub const MAX_ENV_CHARS: usize = 32;

/// Checks a deployment name (`--env`, `$HERDR_EDGE_ENV`): 1 to [`MAX_ENV_CHARS`]
/// characters of a-z, 0-9, '_' or '-'. Monitors compare it as a label, so no
/// case, spaces or punctuation that would make two spellings of one name.
pub fn parse_env_name(name: &str) -> Result<String, String> {
    let ok = (1..=MAX_ENV_CHARS).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !ok {
        return Err(format!("{name:?} is not a deployment name: use 1 to {MAX_ENV_CHARS} characters of a-z, 0-9, '_' or '-'"));
    }
    Ok(name.to_string())
}

/// Identity of this deployment.
/// True when `url` names this computer (`127.0.0.1`, `localhost`, `[::1]`): the
/// only host plain http may carry tokens, codes or device secrets to.
pub fn is_loopback_url(url: &url::Url) -> bool {
    matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"))
}

#[derive(Debug, Clone)]
pub struct EdgeConfig {
    /// Issuer URL without trailing slashes.
    pub issuer: String,
    /// `issuer + "/mcp"`: the protected resource and the audience of every token.
    pub resource: String,
    /// Deployment name (`production`, `staging`, …), reported as `edgeEnv`.
    pub env: String,
    /// Browser origins allowed on `/mcp`: a request with another `Origin` gets 403
    /// (default [`mcp::DEFAULT_ALLOWED_ORIGINS`]; requests without one pass).
    pub mcp_allowed_origins: Vec<String>,
}

impl EdgeConfig {
    /// Fails closed: the issuer must be an absolute http(s) URL without query or
    /// fragment (plain http only for loopback, for tests and reverse proxies).
    pub fn new(issuer: &str) -> Result<Self, String> {
        let issuer = issuer.trim_end_matches('/');
        let url = url::Url::parse(issuer).map_err(|e| format!("--issuer {issuer:?} is not a URL: {e}"))?;
        match url.scheme() {
            "https" => {}
            "http" if is_loopback_url(&url) => {}
            _ => return Err(format!("--issuer {issuer:?} must be https (http only on loopback)")),
        }
        if url.query().is_some() || url.fragment().is_some() || url.host_str().is_none() {
            return Err(format!("--issuer {issuer:?} must have a host and no query or fragment"));
        }
        Ok(Self {
            issuer: issuer.to_string(),
            resource: format!("{issuer}/mcp"),
            env: DEFAULT_ENV.to_string(),
            mcp_allowed_origins: mcp::DEFAULT_ALLOWED_ORIGINS.iter().map(|o| o.to_string()).collect(),
        })
    }

    /// This config with `origins` as the `/mcp` Origin allow-list (empty: every
    /// request carrying an `Origin` is refused).
    pub fn with_mcp_allowed_origins(self, origins: Vec<String>) -> Self {
        Self { mcp_allowed_origins: origins, ..self }
    }

    /// This config under the deployment name `env` (checked by [`parse_env_name`]).
    pub fn with_env(self, env: &str) -> Result<Self, String> {
        Ok(Self { env: parse_env_name(env)?, ..self })
    }

    /// RFC 8707 `resource` normalised: "", the issuer or the resource (each with or
    /// without one trailing `/`) mean the resource; anything else is refused.
    pub fn normalize_resource(&self, given: &str) -> Option<String> {
        let g = given.strip_suffix('/').unwrap_or(given);
        (g.is_empty() || g == self.issuer || g == self.resource).then(|| self.resource.clone())
    }
}

/// Everything a request handler needs.
pub struct EdgeState {
    pub config: EdgeConfig,
    pub store: Arc<EdgeStore>,
    pub router: Arc<dyn mcp::WorkstationRouter>,
    /// Enrolled devices; shared with the link hub, which subscribes to revocations.
    pub devices: Arc<devices::DeviceRegistry>,
    /// Test-only: lets CIMD fetch loopback metadata URLs.
    pub allow_loopback_cimd: bool,
    /// Per-source limits on the unauthenticated entry points (DCR, new pending
    /// authorizations), and which proxies' `X-Forwarded-For` is believed.
    pub limits: ratelimit::SourceLimits,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_normalisation() {
        let c = EdgeConfig::new("https://edge.example/").unwrap();
        assert_eq!(c.issuer, "https://edge.example");
        for ok in ["", "https://edge.example", "https://edge.example/", "https://edge.example/mcp", "https://edge.example/mcp/"] {
            assert_eq!(c.normalize_resource(ok).as_deref(), Some("https://edge.example/mcp"), "{ok}");
        }
        for bad in ["https://edge.example/mcp//", "https://other.example/mcp", "https://edge.example/mcpx", "/mcp"] {
            assert_eq!(c.normalize_resource(bad), None, "{bad}");
        }
        assert!(EdgeConfig::new("http://edge.example").is_err());
        assert!(EdgeConfig::new("http://127.0.0.1:9").is_ok());
    }

    #[test]
    fn deployment_names_are_short_lowercase_labels() {
        assert_eq!(EdgeConfig::new("https://edge.example").unwrap().env, "production");
        let at_limit = "a".repeat(MAX_ENV_CHARS);
        for ok in ["staging", "dev_2", "eu-west-1", "0", at_limit.as_str()] {
            assert_eq!(EdgeConfig::new("https://edge.example").unwrap().with_env(ok).unwrap().env, ok);
        }
        let over = "a".repeat(MAX_ENV_CHARS + 1);
        for bad in ["", "Prod", "pre prod", "prod!", "prød", "a/b", over.as_str()] {
            let e = parse_env_name(bad).unwrap_err();
            assert!(e.contains("a-z, 0-9") && e.contains(&format!("{bad:?}")), "{bad:?}: {e}");
        }
    }
}

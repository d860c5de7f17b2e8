//! `herdr-nmhost`: the Chrome Native Messaging host of herdr-mcp. It relays the extension's
//! calls to the runtime's Unix socket and nothing else.
//!
//! Modules, one job each: `framing` (length-prefixed frames), `messages` (wire shapes, error
//! codes), `allow` (what may be forwarded), `origin` (which extension may call), `socket_path`
//! (where the runtime listens), `runtime_client` (HTTP/1.1 over the socket), `chunking`
//! (frames ≤ 1 MiB), `outbox` (the one writer and the live-call table), `session` (one port),
//! `install` (host manifests), `cli` (argument handling).

pub mod allow;
pub mod chunking;
pub mod cli;
pub mod framing;
pub mod install;
pub mod messages;
pub mod origin;
pub mod outbox;
pub mod platform;
pub mod runtime_client;
pub mod session;
pub mod socket_path;

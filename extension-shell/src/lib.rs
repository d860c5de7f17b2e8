//! extension-shell: binds ext-core to `chrome.*` for the unpacked MV3 extension.
//!
//! Pure pieces (site table, sender checks, MCP framing, the catalog cache, applying the binding migration) are
//! plain Rust tested natively; the `wasm` half (native port, conversations, storage) only runs
//! inside the service worker, behind the thin `sw.js` bootstrap.

pub mod catalog;
pub mod continuity_handoff;
pub mod continuity_page;
pub mod conversation_state;
pub mod mcp;
pub mod notices;
pub mod panic_log;
pub mod sender;
pub mod sites;

#[cfg(target_arch = "wasm32")]
mod wasm;

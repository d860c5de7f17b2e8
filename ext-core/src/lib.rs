//! ext-core: the bridge's brain, pure Rust with no browser dependency. It compiles
//! natively (for tests) and to `wasm32-unknown-unknown` (for the extension's service
//! worker). Each module has one job; `engine` ties them into the tool loop.

pub mod continuity;
pub mod engine;
pub mod fold;
pub mod journal;
pub mod parser;
pub mod protocol_text;
pub mod sanitize;
pub mod tool_result;
pub mod ui_text;
pub mod validate;

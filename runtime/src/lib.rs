//! The herdr-mcp runtime: one MCP server exposing files, Git, commands and Herdr
//! workspaces of this machine, behind hard policy (managed roots, secret paths,
//! read-only mode, write roots).
//!
//! The binary (`src/main.rs`) is a thin CLI over this library so that tests and
//! benchmarks can build the same server in-process when they need to.

pub mod activity;
pub mod contract;
pub mod doctor;
pub mod edge;
pub mod exec;
pub mod herdr;
pub mod link;
pub mod mcp_discover;
pub mod platform;
pub mod policy;
pub mod push;
pub mod runtime_info;
pub mod state;
pub mod server;
pub mod stdio;
pub mod tools;
pub mod update;

#![allow(dead_code)]
pub mod fake_runtime;
pub mod host;
pub mod real_runtime;

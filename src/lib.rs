//! **orch**: compile AgentDock-style orchestration templates into typed Rust state
//! machines. This crate re-exports the runtime ([`orch_runtime`]); the compiler is
//! `orch-codegen` (build.rs) and the macro `orch-macros`.
//!
//! This root package also hosts the workspace's examples (`examples/`), integration
//! tests (`tests/`) and benchmarks (`benches/`).
#![deny(missing_docs)]

pub use orch_runtime::*;

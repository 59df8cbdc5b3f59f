//! Shared by the integration tests: proptest strategies for event streams and random
//! templates, and a deterministic runner (kept in `orch-test-support`, which `orch-cli`'s
//! tests use too).

pub use orch_test_support::events::*;

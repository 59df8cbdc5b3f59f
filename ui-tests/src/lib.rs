//! The `orchestration!` macro's diagnostics as a user sees them.
//!
//! This package has no code of its own: its test `tests/ui.rs` runs trybuild over one
//! compile-fail case per diagnostic code (`tests/ui/fail/`, each with its reviewed
//! `.stderr`) and over pass cases (`tests/ui/pass/`). It is a package apart from the
//! workspace's other integration tests because trybuild builds its cases against the
//! package's own dependencies: here they are only `orch` with its `macros` and `serde` features.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

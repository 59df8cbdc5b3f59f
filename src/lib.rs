pub use orch_runtime::*;

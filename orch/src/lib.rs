//! **orch** compiles agent orchestration templates — AgentDock's `template.json`, or the
//! same workflow written in Rust — into typed state machines: `enum Step`, `enum Tool`,
//! exhaustive tables and a `Copy` [`Session`] that answers "which tools may the model
//! use now?" without allocating. Every mistake a template can contain is a compile error
//! or warning at its exact place.
//!
//! This is the crate to depend on. It holds the runtime (at its root), the
//! [`orchestration!`] macro (feature `macros`, on by default) and [`include_machine!`] for
//! templates compiled in build.rs by the `orch-build` crate:
//!
//! ```toml
//! [dependencies]
//! orch = "0.1"
//!
//! [build-dependencies]
//! orch-build = "0.1"
//! ```
//!
//! # A workflow in Rust
//!
//! ```
//! orch::orchestration! {
//!     pub machine Researcher {
//!         tools: [search, think, reflect],
//!         default step Chat;
//!         step Research {
//!             when message_contains("research");
//!             sequence: [search, think, reflect];
//!         }
//!     }
//! }
//! use researcher::{Outcome, Session, Step, Tool};
//!
//! let mut s = Session::new();
//! s.on_user_message("Research the impact of AI on jobs");
//! assert_eq!(s.step(), Some(Step::Research));
//! assert_eq!(s.allowed().iter().collect::<Vec<_>>(), [Tool::Search]);
//! assert!(s.check(Tool::Reflect).is_err()); // out of order
//! assert_eq!(s.record(Tool::Search), Outcome::Advanced { index: 1 });
//! ```
//!
//! # A template compiled in build.rs
//!
//! ```ignore
//! // build.rs (orch-build is a build-dependency)
//! orch_build::Builder::new()
//!     .template("agents/cognitive-reasoner/template.json")
//!     .compile()
//!     .expect("orchestration templates");
//! ```
//!
//! ```ignore
//! // src/main.rs
//! orch::include_machine!("cognitive-reasoner");
//! let mut session = cognitive_reasoner::Session::new();
//! ```
//!
//! The same file can be read by the macro instead:
//! `orch::orchestration!(file = "agents/cognitive-reasoner/template.json");`.
//!
//! # Features
//!
//! | feature | adds |
//! |---|---|
//! | `macros` (default) | [`orchestration!`] |
//! | `serde` | serde for sessions, tool sets and snapshots |
//! | `store` | [`store`]: session stores with compare-and-set updates |
//! | `redis` | `store::RedisStore` |
//! | `compiler` | [`compiler`]: compile templates at run time into a [`DynMachine`] |
//! | `agent` | [`agent`]: the agent loop over any model |
//! | `openai` | `agent::OpenAiModel`, an OpenAI-compatible client |
//! | `genai` | `agent::GenaiModel`: the agent loop over any genai provider |
//! | `rig` | `agent::OrchHook`: orchestration inside a rig agent (rig-agent 0.44, Rust 1.95) |
//! | `audit-store` | `agent::audit::store::StoreLog`: decision records kept in a session store |
//! | `otel` | OpenTelemetry spans of the agent loop, and `agent::otel::init_otlp` |
//! | `restate` | `restate`: durable runs on Restate (restate-sdk, Rust 1.90) |
//!
//! The semantics (activation, conditions, sequences, allowed tools, snapshots) are
//! documented in the repository's `docs/`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

// The runtime, item by item (a new item of the engine is exported here on purpose).
pub use orch_runtime::{
    approval, args, compiled, dynamic, include_machine, printable, snapshot, AgentDockView,
    Approval, BitIter, Call, CallDigest, DynMachine, DynSession, HistoryEntry, LostRule, Machine,
    Outcome, OutcomeKind, QuestionId, Refusal, RestoreError, RestoreReport, Session,
    SessionRefusal, Snapshot, StepEnum, ToolEnum, ToolIter, ToolSet, Usage, Verdict,
};
#[allow(deprecated)]
pub use orch_runtime::{Denied, SessionDenied};

/// Session stores: keep each conversation's orchestration state between requests
/// (`orch-store`).
#[cfg(feature = "store")]
pub use orch_store as store;

/// The compiler, for templates loaded at run time: `compile_json(src, None)` gives the
/// diagnostics and, via `.to_machine()`, a [`DynMachine`]; also the verifier (re-exports
/// `orch-codegen`).
#[cfg(feature = "compiler")]
pub use orch_codegen as compiler;

/// Driving an LLM under the orchestration (re-exports `orch-agent`).
#[cfg(feature = "agent")]
pub use orch_agent as agent;

/// Durable runs on Restate (re-exports `orch-restate`; docs/restate.md).
#[cfg(feature = "restate")]
pub use orch_restate as restate;

#[doc(hidden)]
#[cfg(feature = "macros")]
pub use orch_macros as __macros;

/// Compiles an orchestration workflow into a module: `Tool`, `Step`, `Session`, ...
///
/// Inline (the DSL):
///
/// ```
/// orch::orchestration! {
///     pub machine CognitiveReasoner {
///         tools: [search, think, reflect, compare, critique, debate],
///         default step DefaultMode;
///         /// Research-based cognitive flow
///         step ResearchMode {
///             when message_regex("(?i)research");
///             sequence: [search, think, reflect];
///             allow: [search, think, reflect];
///         }
///         step EvaluationMode {
///             when message_regex("(?i)critique|evaluate|assess");
///             sequence: [critique, (debate | compare), reflect];
///             allow: [critique, debate, compare, reflect, search];
///             reset_sequence_on: [message_regex];
///         }
///     }
/// }
///
/// let mut s = cognitive_reasoner::Session::new();
/// s.on_user_message("Critique this plan");
/// assert_eq!(s.step(), Some(cognitive_reasoner::Step::EvaluationMode));
/// ```
///
/// From a template file (relative to `CARGO_MANIFEST_DIR`; editing it rebuilds the
/// crate):
///
/// ```ignore
/// orch::orchestration!(file = "agents/cognitive-reasoner/template.json");
/// orch::orchestration!(file = "agents/dr-house.json", allow = [shadowed_step]);
/// ```
///
/// Every error is a compile error on the exact token (or `file:line:column` of the JSON
/// value), with `help:` where a fix is known. Stable Rust has no macro warnings, so
/// warnings are errors unless allowed (`#![allow(unreachable_step)]` at the top of the
/// inline form, `allow = [..]` in the file form). The grammar is in the repository's
/// `docs/macro-and-build.md`.
#[cfg(feature = "macros")]
#[macro_export]
macro_rules! orchestration {
    ($($input:tt)*) => {
        $crate::__macros::orchestration! { crate = $crate; $($input)* }
    };
}

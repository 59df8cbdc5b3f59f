//! The native half of the `@orch/core` npm package: templates compiled with every
//! diagnostic, and sessions driven by tool names, over the same engine, wording and
//! snapshot format as the Rust crates. Built twice from this one source by napi-rs: a
//! Node-API addon per platform, and a `wasm32-wasip1-threads` module for runtimes where
//! the native addon cannot be installed. The TypeScript declarations (`index.d.ts`) are
//! generated from the items below; the JavaScript half (`js/`) adds the AI SDK adapter
//! and the AgentDock drop-in.
#![deny(missing_docs)]

use napi_derive::napi;

mod compile;
// Reached only through the module's registration, which napi-derive leaves out of test
// builds.
#[cfg_attr(test, allow(dead_code))]
mod fast;
mod kinds;
mod machine;
mod session;

pub use compile::*;
pub use kinds::*;
pub use machine::*;
pub use session::*;

/// What a tool result (JSON text, an MCP `CallToolResult`) says about the call: `'ran'`
/// when it completed successfully, else why not (orch's one rule: only a call that ran
/// is recorded).
#[napi]
pub fn result_kind(result: String) -> ResultKind {
    use orch_agent::protocol::{classify_text, NotRun, ToolResult};
    match classify_text(&result) {
        ToolResult::Ran => ResultKind::Ran,
        ToolResult::NotRun(NotRun::Error) => ResultKind::Error,
        ToolResult::NotRun(NotRun::InputRequired) => ResultKind::InputRequired,
        ToolResult::NotRun(NotRun::Task) => ResultKind::Task,
        ToolResult::NotRun(NotRun::Other(_)) => ResultKind::Other,
        ToolResult::NotRun(NotRun::Malformed(_)) => ResultKind::Malformed,
        // `NotRun` is non-exhaustive: a kind this package does not name is another one.
        ToolResult::NotRun(_) => ResultKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::RefusalKind;

    /// Each of the engine's refusal kinds becomes the string enum value of its own name.
    #[test]
    fn every_refusal_kind_has_its_name() {
        for kind in orch_agent::RefusalKind::ALL {
            let ours = format!("{:?}", RefusalKind::from(kind));
            let snake: String = ours
                .chars()
                .enumerate()
                .flat_map(|(i, c)| {
                    let sep = (i > 0 && c.is_ascii_uppercase()).then_some('_');
                    sep.into_iter()
                        .chain(std::iter::once(c.to_ascii_lowercase()))
                })
                .collect();
            assert_eq!(snake, kind.as_str());
        }
    }
}

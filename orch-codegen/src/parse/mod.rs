//! The front ends, side by side: each turns its source into the one
//! [`crate::model::Template`] the checks judge.
//!
//! - [`json`]: a template file (JSON with comments), keeping byte spans;
//! - [`dsl`]: the `orchestration!` macro's inline syntax, keeping token spans.

pub(crate) mod dsl;
pub(crate) mod json;

/// `` `a`, `b`, `c` ``: names as a list of code words, for messages of both front ends.
fn ticked(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

//! The front ends, side by side: each turns its source into the one
//! [`crate::model::Template`] the checks judge.
//!
//! - [`json`]: a template file (JSON with comments), keeping byte spans;
//! - [`dsl`]: the `orchestration!` macro's inline syntax, keeping token spans.

pub(crate) mod dsl;
pub(crate) mod json;

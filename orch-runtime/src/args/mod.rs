//! Rules on arguments (semantics §16): what a call may carry, not only which tool.
//!
//! A template's rules are compiled into [`Rules`] (part of the machine's tables). When
//! a call is checked with its arguments, the rules that apply to its tool in the active
//! step judge the arguments' exact text — read once, strictly ([`MAX_BYTES`],
//! [`MAX_DEPTH`], [`MAX_VALUES`]; a key written twice is unreadable), numbers compared as
//! the decimals written, strings decoded only to compare them. A call of a tool no rule
//! applies to is judged without reading its arguments and without allocating.

mod budget;
mod charges;
mod explain;
mod found;
mod json;
mod literal;
pub(crate) mod memory;
mod numbers;
mod origins;
mod provenance;
mod remember;
mod rules;
mod scalar;
mod seen;
mod source;

pub use budget::{
    amount, bound, decimal, window_ms, window_text, Budget, Per, BUDGET_EVENTS, EVERY_CALL,
    MAX_BUDGET_EVENTS, MAX_WINDOW_MS, UNIT,
};
pub(crate) use charges::{budget_view, budget_view_mut};
pub use found::{email_addresses, link_hosts};
pub use json::{is_pointer, string_literal, Unreadable, MAX_BYTES, MAX_DEPTH, MAX_VALUES};
pub use memory::{MAX_MEMORY_VALUES, MEMORY_VALUES, MEMORY_WORDS};
pub use numbers::NUMBER_WORDS;
pub use provenance::{normal_form, values_in_text, words_of};
pub use rules::{
    ArgRule, Broken, Judged, OwnedRules, Pred, RuleKind, Rules, Test, ANY_STEP, UNBOUNDED,
};
pub use scalar::{address_list, compare_numbers, host_name, is_number, url_host};
pub use source::{Origin, Source, NO_TOOL};

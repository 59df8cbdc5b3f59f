//! The limits of the compiled form. A template over one of them is rejected with
//! E019 (`limit_exceeded`): every session and table is sized from these numbers.

/// The largest template accepted, in bytes (a guard against feeding the compiler a
/// 50 MB file by mistake; real templates are a few KB).
pub const MAX_TEMPLATE_BYTES: usize = 16 * 1024 * 1024;
/// The largest history capacity H a template may ask for (it sizes every session).
pub const MAX_HISTORY: usize = 1024;
/// The most tools a machine may have.
pub const MAX_TOOLS: usize = 16_384;
/// The most steps a template may have (not to be confused with `options.maxSteps`,
/// the agent loop's cap on model calls per turn).
pub const MAX_TEMPLATE_STEPS: usize = 16_384;
/// The most distinct message conditions a machine may have.
pub const MAX_MESSAGE_CONDITIONS: usize = 4096;
/// The most `u64` words the compiled tool sets may take (2 MiB): the static sets and
/// sequence positions of all steps, each distinct set stored once. It bounds the
/// generated tables (what rustc compiles) and every session's machine: steps that
/// share their tools cost nothing, but many steps with distinct `availableTools` over
/// a large universe multiply (16,384 tools take 256 words a set).
pub const MAX_TABLE_WORDS: usize = 1 << 18;
/// The most memory the `message_regex` patterns may compile to, all together (each
/// pattern is also limited to `REGEX_SIZE_LIMIT`, 1 MiB of program).
pub const MAX_REGEX_BYTES: usize = 64 << 20;

//! The engine's hot path for an instruction counter: `cargo xtask test` builds this (release)
//! and runs it under
//! `valgrind --tool=callgrind`, collecting only inside [`turn`] and [`message`], and
//! fails when a turn or a message costs more instructions than its budget (xtask's
//! `INSTRUCTION_BUDGETS`). Counts are exact and do not depend on the machine's load, so
//! the guard cannot be flaky; `cargo bench --bench instructions` measures the same
//! workloads with gungraun.
//!
//! - `turn`: `allowed()` then `record()` on the sequence-driven shape of AgentDock's
//!   cognitive reasoner (`tests/fixtures/machines/sequence-shaped.json`), cycling its
//!   seven tools (a sequence completes and the step changes on the way), `TURNS` times.
//! - `message`: one 200-byte user message against 40 message conditions
//!   (`messages-40.json`), `MESSAGES` times.
//! - `research`: the research turn of the npm and Python benches on the cognitive
//!   reasoner (`examples/agents/cognitive-reasoner`): a user message (one of six
//!   requests, each selecting a mode), then three times the allowed tools, a check of
//!   the first and its record; `RESEARCH` turns.

use std::hint::black_box;

orch_runtime::include_machine!("sequence-shaped");
orch_runtime::include_machine!("messages-40");
orch_runtime::include_machine!("cognitive-reasoner");

/// How many turns `turn` is called for (a multiple of the cycle's 7).
const TURNS: usize = 7_000;
/// How many messages `message` is called for.
const MESSAGES: usize = 100;
/// How many research turns `research` is called for (a multiple of the six requests).
const RESEARCH: usize = 600;

/// The six requests of the research turn, one a line.
const REQUESTS: &str = include_str!("../../examples/agents/cognitive-reasoner/requests.txt");

const CYCLE: [sequence_shaped::Tool; 7] = {
    use sequence_shaped::Tool;
    [
        Tool::Search,
        Tool::Think,
        Tool::Reflect,
        Tool::Compare,
        Tool::Critique,
        Tool::Brainstorm,
        Tool::Debate,
    ]
};

/// 200 bytes of an ordinary support message that matches one condition.
const MESSAGE: &str = "Hello, I have a question about the invoice 3 you sent last week: the amounts do not add up and I would like to know whom to contact about it before the deadline 9 passes. Thanks, Ana Reference: A1B2C3";

/// One turn: the allowed tools, then recording one.
#[inline(never)]
fn turn(s: &mut sequence_shaped::Session, tool: sequence_shaped::Tool) {
    black_box(s.allowed());
    black_box(s.record(black_box(tool)));
}

/// One user message.
#[inline(never)]
fn message(s: &mut messages_40::Session, text: &str) {
    s.on_user_message(black_box(text));
}

/// One research turn: the message, then three tool calls.
#[inline(never)]
fn research(s: &mut cognitive_reasoner::Session, request: &str) {
    s.on_user_message(black_box(request));
    for _ in 0..3 {
        let allowed = black_box(s.allowed());
        if let Some(tool) = allowed.first() {
            if black_box(s.check(tool)).is_ok() {
                black_box(s.record(tool));
            }
        }
    }
}

fn main() {
    let mut s = sequence_shaped::Session::new();
    // Warm: the session has been cycling its tools for a while.
    for t in CYCLE.iter().cycle().take(23) {
        s.record(*t);
    }
    for t in CYCLE.iter().cycle().take(TURNS) {
        turn(&mut s, *t);
    }
    let mut m = messages_40::Session::new();
    // The regexes are compiled on first use: once, before the counted calls.
    m.on_user_message("warm up");
    for _ in 0..MESSAGES {
        message(&mut m, MESSAGE);
    }
    let mut r = cognitive_reasoner::Session::new();
    // Warm: the regexes compiled, every request served once.
    for request in REQUESTS.lines() {
        research(&mut r, request);
    }
    for request in REQUESTS.lines().cycle().take(RESEARCH) {
        research(&mut r, request);
    }
    println!(
        "turns={TURNS} messages={MESSAGES} research={RESEARCH} step={:?} {:?}",
        black_box(&s).step(),
        black_box(&r).step()
    );
}

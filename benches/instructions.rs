//! Instruction counts (callgrind, through gungraun): exact and repeatable, so a change
//! in the hot path shows as a number, not as noise. Run with
//! `cargo bench --bench instructions` (needs valgrind and `gungraun-runner` of the same
//! version as the `gungraun` dev-dependency: `cargo install gungraun-runner --version 0.20.0`).
//!
//! - `turn`: one `allowed()` and one `record()` on the sequence-driven shape of
//!   AgentDock's cognitive reasoner (`tests/fixtures/machines/sequence-shaped.json`:
//!   a default step and six steps entered by `sequence_match`, 7 tools), on a session
//!   that has been cycling its tools; `lap`: seven such turns, one per tool of the
//!   cycle (the average turn is a seventh of it).
//! - `message`: one 200-byte user message against 2, 10 and 40 message conditions
//!   (`messages-{2,10,40}.json`, half `message_contains`, half `message_regex`).

use gungraun::{library_benchmark, library_benchmark_group, main};
use std::hint::black_box;

orch::include_machine!("sequence-shaped");
orch::include_machine!("messages-2");
orch::include_machine!("messages-10");
orch::include_machine!("messages-40");
orch::include_machine!("cognitive-reasoner");

/// The order the benchmark session cycles its tools in: every lap completes
/// `Investigate`'s sequence (search, think, reflect), so the step changes and sequence
/// atoms flip on the way.
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

/// A session that has cycled through its tools for a while.
fn cycling() -> sequence_shaped::Session {
    let mut s = sequence_shaped::Session::new();
    for t in CYCLE.iter().cycle().take(23) {
        s.record(*t);
    }
    s
}

#[library_benchmark]
#[bench::cycling(cycling())]
fn turn(mut s: sequence_shaped::Session) {
    black_box(s.allowed());
    black_box(s.record(black_box(sequence_shaped::Tool::Think)));
    black_box(&s);
}

// One whole lap: seven `allowed()` + `record()` turns (divide by 7 for one turn).
#[library_benchmark]
#[bench::cycling(cycling())]
fn lap(mut s: sequence_shaped::Session) {
    for t in black_box(CYCLE) {
        black_box(s.allowed());
        black_box(s.record(t));
    }
    black_box(&s);
}

/// 200 bytes of an ordinary support message that matches one condition.
const MESSAGE: &str = "Hello, I have a question about the invoice 3 you sent last week: the amounts do not add up and I would like to know whom to contact about it before the deadline 9 passes. Thanks, Ana Reference: A1B2C3";

#[library_benchmark]
#[bench::message(messages_2::Session::new())]
fn message_2_conditions(mut s: messages_2::Session) -> messages_2::Session {
    s.on_user_message(black_box(MESSAGE));
    s
}

#[library_benchmark]
#[bench::message(messages_10::Session::new())]
fn message_10_conditions(mut s: messages_10::Session) -> messages_10::Session {
    s.on_user_message(black_box(MESSAGE));
    s
}

#[library_benchmark]
#[bench::message(messages_40::Session::new())]
fn message_40_conditions(mut s: messages_40::Session) -> messages_40::Session {
    s.on_user_message(black_box(MESSAGE));
    s
}

/// The six requests of the research turn (the npm and Python benches' workload), one a
/// line, each selecting one of the cognitive reasoner's modes.
const REQUESTS: &str = include_str!("../examples/agents/cognitive-reasoner/requests.txt");

/// The six requests, split into lines.
fn requests() -> [&'static str; 6] {
    let mut requests = [""; 6];
    for (slot, line) in requests.iter_mut().zip(REQUESTS.lines()) {
        *slot = line;
    }
    requests
}

/// A session of the cognitive reasoner that has served the six requests once, and the
/// requests.
fn served() -> (cognitive_reasoner::Session, [&'static str; 6]) {
    let mut s = cognitive_reasoner::Session::new();
    let requests = requests();
    for request in requests {
        research(&mut s, request);
    }
    (s, requests)
}

/// The research turn: a user message, then three times the allowed tools, a check of
/// the first and its record.
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

// The six research turns in a row (one per request), as the other languages' benches
// run them.
#[library_benchmark]
#[bench::served(served())]
fn research_turns(
    (mut s, requests): (cognitive_reasoner::Session, [&'static str; 6]),
) -> cognitive_reasoner::Session {
    for request in black_box(requests) {
        research(&mut s, request);
    }
    s
}

library_benchmark_group!(
    name = hot_path;
    benchmarks = turn, lap, message_2_conditions, message_10_conditions, message_40_conditions,
        research_turns
);

main!(library_benchmark_groups = hot_path);

//! ns per `allowed()`, `record`, `on_user_message` and host-list filtering, for the
//! cognitive reasoner (7 tools), its sequence-driven shape, a 200-tool machine and
//! messages against 2, 10 and 40 conditions, with 1 and 100 000 live sessions (the cost must not grow with the number of sessions: there is no shared
//! state). Run: `cargo bench --bench session`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use std::hint::black_box;
use std::time::Duration;

orch::include_machine!("cognitive-reasoner");
orch::include_machine!("wide");
orch::include_machine!("sequence-shaped");
orch::include_machine!("messages-2");
orch::include_machine!("messages-10");
orch::include_machine!("messages-40");

const LIVE: [usize; 2] = [1, 100_000];

/// `allowed()`, `record` and `check` on `live` sessions of machine `M`, each after
/// `message`, recording `cycle` round robin.
fn per_session<M: orch::Machine>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    message: &str,
    cycle: [M::Tool; 3],
    check: M::Tool,
) {
    for live in LIVE {
        let mut sessions = vec![orch::Session::<M>::new(); live];
        for s in &mut sessions {
            s.on_user_message(message);
        }
        let mut i = 0usize;
        g.bench_function(format!("allowed/{live}_sessions"), |b| {
            b.iter(|| {
                i = (i + 1) % live;
                black_box(black_box(&sessions[i]).allowed())
            })
        });
        let mut k = 0usize;
        g.bench_function(format!("record/{live}_sessions"), |b| {
            b.iter(|| {
                i = (i + 1) % live;
                k = (k + 1) % 3;
                black_box(sessions[i].record(black_box(cycle[k])))
            })
        });
        g.bench_function(format!("check/{live}_sessions"), |b| {
            b.iter(|| {
                i = (i + 1) % live;
                black_box(sessions[i].check(black_box(check)).is_ok())
            })
        });
    }
}

fn cognitive(c: &mut Criterion) {
    use cognitive_reasoner::{Machine, Session, Tool};
    let mut g = c.benchmark_group("cognitive_reasoner");
    per_session::<Machine>(
        &mut g,
        "Research the impact of AI on jobs",
        [Tool::Search, Tool::Think, Tool::Reflect],
        Tool::Reflect,
    );
    let mut s = Session::new();
    g.bench_function("on_user_message/regex", |b| {
        b.iter(|| {
            s.on_user_message(black_box(
                "Critique the argument that remote work improves productivity",
            ))
        })
    });
    let host = [
        "search",
        "think",
        "reflect",
        "compare",
        "critique",
        "brainstorm",
        "debate",
        "weather",
    ];
    s.on_user_message("Research the impact of AI on jobs");
    g.bench_function("filter_names/8_host_tools", |b| {
        b.iter(|| black_box(s.filter_names(black_box(host)).count()))
    });
    g.bench_function("new_session", |b| b.iter(|| black_box(Session::new())));
    g.bench_function("full_research_turn", |b| {
        b.iter_batched(
            Session::new,
            |mut s| {
                s.on_user_message("Research the impact of AI on jobs");
                for t in [Tool::Search, Tool::Think, Tool::Reflect] {
                    let _ = black_box(s.check(t));
                    black_box(s.record(t));
                }
                s
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn wide(c: &mut Criterion) {
    use wide::{Machine, Tool};
    let mut g = c.benchmark_group("wide_200_tools");
    per_session::<Machine>(
        &mut g,
        "hundreds",
        [Tool::T150, Tool::T001, Tool::T199],
        Tool::T150,
    );
    g.finish();
}

/// The sequence-driven shape of AgentDock's cognitive reasoner
/// (`tests/fixtures/machines/sequence-shaped.json`: a default step and six steps entered
/// by `sequence_match`, 7 tools): one `allowed()` + `record()` turn on sessions that
/// cycle their tools (every lap completes a sequence and changes step).
fn sequence_shaped(c: &mut Criterion) {
    use sequence_shaped::{Session, Tool};
    let cycle = [
        Tool::Search,
        Tool::Think,
        Tool::Reflect,
        Tool::Compare,
        Tool::Critique,
        Tool::Brainstorm,
        Tool::Debate,
    ];
    let mut g = c.benchmark_group("sequence_shaped");
    for live in LIVE {
        let mut sessions = vec![Session::new(); live];
        let (mut i, mut k) = (0usize, 0usize);
        g.bench_function(format!("allowed_and_record/{live}_sessions"), |b| {
            b.iter(|| {
                i = (i + 1) % live;
                if i == 0 {
                    k = (k + 1) % cycle.len();
                }
                let s = &mut sessions[i];
                black_box(s.allowed());
                black_box(s.record(black_box(cycle[k])))
            })
        });
    }
    g.finish();
}

/// One 200-byte message against 2, 10 and 40 message conditions (half
/// `message_contains`, half `message_regex`; `tests/fixtures/machines/messages-*.json`).
fn messages(c: &mut Criterion) {
    const MESSAGE: &str = "Hello, I have a question about the invoice 3 you sent last week: the amounts do not add up and I would like to know whom to contact about it before the deadline 9 passes. Thanks, Ana Reference: A1B2C3";
    let mut g = c.benchmark_group("message_200_bytes");
    let mut s2 = messages_2::Session::new();
    g.bench_function("2_conditions", |b| {
        b.iter(|| s2.on_user_message(black_box(MESSAGE)))
    });
    let mut s10 = messages_10::Session::new();
    g.bench_function("10_conditions", |b| {
        b.iter(|| s10.on_user_message(black_box(MESSAGE)))
    });
    let mut s40 = messages_40::Session::new();
    g.bench_function("40_conditions", |b| {
        b.iter(|| s40.on_user_message(black_box(MESSAGE)))
    });
    g.finish();
}

/// `message_contains` is one pass over the message: a 2 MB message against a 20 KB
/// needle (found at the very end) and against 40 needles.
fn contains(c: &mut Criterion) {
    let mut g = c.benchmark_group("contains");
    let needle = "ab".repeat(10_000);
    let src = format!(
        r#"{{"agentId": "big-needle", "tools": ["t"], "orchestration": {{"steps": [
            {{"name": "Idle", "isDefault": true}},
            {{"name": "Found", "conditions": [{{"type": "message_contains", "value": "{needle}"}}]}}]}}}}"#
    );
    let machine = orch_codegen::compile_json(&src, None).to_machine().unwrap();
    let message = format!(
        "{}{}",
        "AB".repeat(1_000_000 - 10_000),
        needle.to_uppercase()
    );
    g.sample_size(10);
    g.bench_function("2MB_message_20KB_needle", |b| {
        b.iter(|| {
            let mut s = machine.session();
            s.on_user_message(black_box(&message));
            assert_eq!(s.step(), Some("Found"));
        })
    });
    g.finish();
}

/// A research turn through the policy (what the agent loop, the rig hook and `orch mcp`
/// use) — the message, then each call admitted and recorded — without a decision log,
/// with a callback sink that drops each record, with JSON lines written to a file, and
/// with chained JSON lines (a SHA-256 per record).
fn audit(c: &mut Criterion) {
    use cognitive_reasoner::Session;
    use orch::agent::audit::{Auditor, DecisionRecord, JsonLines};
    use orch::agent::Policy;
    use std::sync::Arc;
    let mut g = c.benchmark_group("audit");
    let tools = [
        "search",
        "think",
        "reflect",
        "compare",
        "critique",
        "brainstorm",
        "debate",
    ];
    let calls: Vec<(&str, orch::Call<'static>)> = ["search", "think", "reflect"]
        .iter()
        .map(|t| (*t, orch::Call::of_text(t, r#"{"input": "AI and jobs"}"#)))
        .collect();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-audit");
    let _ = std::fs::create_dir_all(&dir);
    let policies = [
        ("no_log", Policy::new(tools)),
        (
            "callback",
            Policy::new(tools).audited(Arc::new(Auditor::new(
                |r: &DecisionRecord| {
                    black_box(r);
                },
                "bench",
            ))),
        ),
        (
            "json_lines",
            Policy::new(tools).audited(Arc::new(Auditor::new(
                JsonLines::append(dir.join("plain.jsonl")).expect("a log file"),
                "bench",
            ))),
        ),
        (
            "json_lines_chained",
            Policy::new(tools).audited(Arc::new(
                Auditor::new(
                    JsonLines::append(dir.join("chained.jsonl")).expect("a log file"),
                    "bench",
                )
                .chained(),
            )),
        ),
    ];
    for (name, policy) in &policies {
        g.bench_function(format!("research_turn/{name}"), |b| {
            b.iter_batched(
                Session::new,
                |mut s| {
                    policy.message(&mut s, "Research the impact of AI on jobs");
                    for (tool, call) in &calls {
                        let _ = black_box(policy.admit_call(&mut s, tool, call));
                        black_box(policy.record(&mut s, tool));
                    }
                    s
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    targets = contains, cognitive, wide, sequence_shaped, messages, audit
}
criterion_main!(benches);

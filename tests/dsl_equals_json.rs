//! The DSL machine and the JSON machine of the same workflow are the same machine:
//! identical tables (fingerprint) and identical traces over many random event streams.

mod common;
use common::Rng;

use orch::{Outcome, ToolEnum};

mod json {
    orch::include_machine!("conformance");
}

mod dsl {
    orch_macros::orchestration! {
        /// tests/fixtures/machines/conformance.json, written in the DSL.
        pub machine "conformance" {
            tools: [search, think, reflect, critique, debate, compare, summarize,
                    web_fetch, cognitive_map, cognitive_load, danger],
            description: "Every condition type, groups, patterns, deny and resets: the project's conformance machine.";
            default step Idle;
            step Research {
                when message_contains("Research");
                sequence: [search, think, reflect];
                allow: [search, think, reflect];
            }
            step Evaluation {
                when message_regex("(?i)critique|evaluate");
                sequence: [critique, (debate | compare), reflect];
                allow: [critique, debate, compare, reflect, search];
                reset_sequence_on: [message_regex];
            }
            step Summary {
                when tool_used(summarize);
                allow: ["*cognitive*", summarize];
                deny: [cognitive_load];
            }
            step Fresh {
                when message_contains("fresh");
                when not_recently_used(search, window = 2);
                allow: ["*"];
                deny: [danger, "web_*"];
            }
            step Restart {
                when message_contains("again");
                sequence: [think, reflect];
                allow: [think, reflect];
                reset_sequence_on: [user_message];
            }
            step Fetch {
                when message_contains("fetch");
                sequence: [web_fetch, summarize];
                allow: [web_fetch, summarize];
            }
        }
    }
}

#[test]
fn same_tables() {
    assert_eq!(
        dsl::conformance::FINGERPRINT,
        json::conformance::FINGERPRINT
    );
    assert_eq!(
        dsl::conformance::DESCRIPTION,
        json::conformance::DESCRIPTION
    );
}

fn outcome<T: ToolEnum>(o: Outcome<T>) -> String {
    match o {
        Outcome::OutOfSequence { expected } => format!("out_of_sequence {expected}"),
        Outcome::Advanced { index } => format!("advanced {index}"),
        o => o.as_str().into(),
    }
}

#[test]
fn same_traces_for_random_events() {
    use dsl::conformance as d;
    use json::conformance as j;
    let messages = [
        "research",
        "critique it",
        "EVALUATE",
        "fresh",
        "fetch",
        "again",
        "nothing",
        "",
    ];
    for seed in 1..=300u64 {
        let mut rng = Rng::new(seed);
        let (mut a, mut b) = (d::Session::new(), j::Session::new());
        for event in 0..150 {
            match rng.below(6) {
                0 | 1 => {
                    let m = messages[rng.below(messages.len())];
                    a.on_user_message(m);
                    b.on_user_message(m);
                }
                2 => {
                    a.reset();
                    b.reset();
                }
                _ => {
                    let i = rng.below(d::Tool::ALL.len());
                    let (ta, tb) = (d::Tool::ALL[i], j::Tool::ALL[i]);
                    assert_eq!(ta.name(), tb.name());
                    assert_eq!(a.check(ta).is_ok(), b.check(tb).is_ok());
                    assert_eq!(
                        outcome(a.record(ta)),
                        outcome(b.record(tb)),
                        "seed {seed} event {event}"
                    );
                }
            }
            assert_eq!(
                a.step().map(|s| s.name()),
                b.step().map(|s| s.name()),
                "seed {seed} event {event}"
            );
            assert_eq!(a.sequence_index(), b.sequence_index());
            assert_eq!(
                a.allowed().names().collect::<Vec<_>>(),
                b.allowed().names().collect::<Vec<_>>()
            );
        }
    }
}

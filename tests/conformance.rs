//! Conformance: semantics §2–§8 and the seed narratives, on machines compiled by build.rs
//! (tests/fixtures/machines/ and examples/agents/). Each test reads as "the user says X,
//! the agent may use only Y".

orch::include_machine!("conformance");
orch::include_machine!("sequence-modes");
orch::include_machine!("cognitive-reasoner");
orch::include_machine!("no-default");
orch::include_machine!("sequence-shaped");

use orch::{HistoryEntry, Outcome};

fn names<T: orch::ToolEnum>(set: orch::ToolSet<T>) -> Vec<&'static str> {
    set.names().collect()
}

mod research_flow {
    use super::*;
    use cognitive_reasoner::{Session, Step, Tool};

    /// Seed 001: "Research the impact of AI on jobs" → ResearchMode, the sequence
    /// requires search, then think, then reflect; only the expected tool is offered.
    #[test]
    fn research_the_impact_of_ai_on_jobs() {
        let mut s = Session::new();
        assert_eq!(s.step(), Some(Step::DefaultMode));
        assert_eq!(s.allowed().len(), 7, "the default step allows every tool");

        s.on_user_message("Research the impact of AI on jobs");
        assert_eq!(s.step(), Some(Step::ResearchMode));
        assert_eq!(s.sequence_index(), 0);
        assert_eq!(names(s.allowed()), ["search"]);

        assert_eq!(s.record(Tool::Search), Outcome::Advanced { index: 1 });
        assert_eq!(names(s.allowed()), ["think"]);
        assert_eq!(s.record(Tool::Think), Outcome::Advanced { index: 2 });
        assert_eq!(names(s.allowed()), ["reflect"]);
        assert_eq!(s.record(Tool::Reflect), Outcome::Completed);
        // Sequence finished: the step's own allowed tools.
        assert_eq!(names(s.allowed()), ["search", "think", "reflect"]);
        assert_eq!(s.expected(), None);
    }

    #[test]
    fn check_explains_why() {
        let mut s = Session::new();
        s.on_user_message("research this");
        let err = s.check(Tool::Reflect).unwrap_err();
        assert_eq!(
            err,
            cognitive_reasoner::Refusal::SequenceExpects {
                step: Step::ResearchMode,
                index: 0,
                expected: Tool::Search.into(),
            }
        );
        assert_eq!(
            err.to_string(),
            "the sequence of step `ResearchMode` expects `search` at position 0"
        );
        s.record(Tool::Search);
        s.record(Tool::Think);
        s.record(Tool::Reflect);
        let err = s.check(Tool::Debate).unwrap_err();
        assert_eq!(err.to_string(), "not allowed in step `ResearchMode`");
        assert!(s.check(Tool::Search).is_ok());
    }

    #[test]
    fn out_of_sequence_tool_still_runs_but_does_not_advance() {
        let mut s = Session::new();
        s.on_user_message("research this");
        assert_eq!(
            s.record(Tool::Think),
            Outcome::OutOfSequence {
                expected: Tool::Search.into()
            }
        );
        assert_eq!(s.sequence_index(), 0);
        assert!(s.used().contains(Tool::Think), "a recorded tool did run");
        assert_eq!(
            s.history().collect::<Vec<_>>(),
            [HistoryEntry::Tool(Tool::Think)]
        );
    }
}

mod evaluation_flow {
    use super::*;
    use sequence_modes::{Session, Step, Tool};

    /// Seeds 000/002: the EvaluationMode of the cognitive reasoner is activated by
    /// `sequence_match` once critique → debate → reflect has been used; activation
    /// resets the index to 0, so the sequence is enforced from its start again.
    #[test]
    fn sequence_match_activates_and_resets_the_index() {
        let mut s = Session::new();
        assert_eq!(s.step(), Some(Step::DefaultMode));
        assert_eq!(s.record(Tool::Critique), Outcome::Free);
        assert_eq!(s.record(Tool::Debate), Outcome::Free);
        assert_eq!(s.step(), Some(Step::DefaultMode));
        // The last three history entries now match EvaluationMode's sequence; the
        // transition happens within the same record call.
        assert_eq!(s.record(Tool::Reflect), Outcome::Free);
        assert_eq!(s.step(), Some(Step::EvaluationMode));
        assert_eq!(s.sequence_index(), 0);
        assert_eq!(names(s.allowed()), ["critique"]);
    }

    /// A step that is already active and matches again keeps its index (semantics §6.4).
    #[test]
    fn reactivation_does_not_reset() {
        let mut s = Session::new();
        for t in [Tool::Search, Tool::Think, Tool::Reflect] {
            s.record(t);
        }
        assert_eq!(s.step(), Some(Step::ResearchMode));
        assert_eq!(s.record(Tool::Search), Outcome::Advanced { index: 1 });
        assert_eq!(s.record(Tool::Think), Outcome::Advanced { index: 2 });
        // Completing the sequence makes sequence_match hold again for the active step:
        // it stays active with its index (3 = complete), not reset to 0.
        assert_eq!(s.record(Tool::Reflect), Outcome::Completed);
        assert_eq!(s.step(), Some(Step::ResearchMode));
        assert_eq!(s.sequence_index(), 3);
        assert_eq!(names(s.allowed()), ["search", "think", "reflect"]);
    }

    #[test]
    fn history_is_chronological_with_duplicates() {
        let mut s = Session::new();
        for t in [Tool::Search, Tool::Search, Tool::Think] {
            s.record(t);
        }
        let h: Vec<_> = s.history().collect();
        assert_eq!(
            h,
            [
                HistoryEntry::Tool(Tool::Search),
                HistoryEntry::Tool(Tool::Search),
                HistoryEntry::Tool(Tool::Think)
            ]
        );
    }

    #[test]
    fn history_keeps_the_last_h_entries() {
        let mut s = Session::new();
        for _ in 0..25 {
            s.record(Tool::Debate);
        }
        s.record(Tool::Search);
        let h: Vec<_> = s.history().collect();
        assert_eq!(h.len(), 10, "H = max(10, longest sequence 3)");
        assert_eq!(h.last(), Some(&HistoryEntry::Tool(Tool::Search)));
    }
}

mod conditions {
    use super::*;
    use conformance::{Session, Step, Tool};

    #[test]
    fn message_contains_is_unicode_case_insensitive() {
        let mut s = Session::new();
        s.on_user_message("please RESEARCH this");
        assert_eq!(s.step(), Some(Step::Research));
        let mut s = Session::new();
        s.on_user_message("résumé: no match here");
        assert_eq!(s.step(), Some(Step::Idle));
    }

    /// Full Unicode case folding (not lowercasing): a final sigma equals a sigma, `ß`
    /// equals `ss`, and the search is one pass over the message whatever the needles.
    #[test]
    fn message_contains_uses_full_case_folding() {
        let src = r#"{"agentId": "fold", "tools": ["t"], "orchestration": {"steps": [
            {"name": "Idle", "isDefault": true},
            {"name": "Street", "conditions": [{"type": "message_contains", "value": "ΟΔΌΣ"}]},
            {"name": "Strasse", "conditions": [{"type": "message_contains", "value": "straße"}]},
            {"name": "Istanbul", "conditions": [{"type": "message_contains", "value": "İSTANBUL"}]},
            {"name": "Empty", "conditions": [{"type": "message_contains", "value": "zz"}, {"type": "message_contains", "value": ""}]}
        ]}}"#;
        let machine = orch_codegen::compile_json(src, None).to_machine().unwrap();
        for (message, step) in [
            ("η οδός είναι κλειστή", "Street"),
            ("Η ΟΔΌΣ", "Street"),
            ("die STRASSE", "Strasse"),
            ("die Straße", "Strasse"),
            ("i̇stanbul'da", "Istanbul"),
            ("buzz", "Empty"),
            ("nothing", "Idle"),
        ] {
            let mut s = machine.session();
            s.on_user_message(message);
            assert_eq!(s.step(), Some(step), "{message:?}");
        }
        // Many overlapping needles, found in one pass.
        let needles: Vec<String> = (1..=40).map(|n| "ab".repeat(n)).collect();
        let steps: Vec<String> = needles
            .iter()
            .enumerate()
            .map(|(i, n)| format!(r#"{{"name": "S{i}", "conditions": [{{"type": "message_contains", "value": "{n}"}}]}}"#))
            .collect();
        let src = format!(
            r#"{{"agentId": "many", "tools": ["t"], "orchestration": {{"steps": [{{"name": "Idle", "isDefault": true}}, {}]}}}}"#,
            steps.join(",")
        );
        let machine = orch_codegen::compile_json(&src, None).to_machine().unwrap();
        for k in [1usize, 7, 40] {
            let mut s = machine.session();
            s.on_user_message(&format!("x{}y", "AB".repeat(k)));
            // The first step whose needle the message contains: `ab`.
            assert_eq!(s.step(), Some("S0"));
            let snap = s.snapshot();
            assert_eq!(snap.matched.len(), k, "needles `ab`..`ab`×{k} all matched");
        }
    }

    #[test]
    fn message_regex_follows_its_flags() {
        let mut s = Session::new();
        s.on_user_message("Could you EVALUATE my essay?");
        assert_eq!(s.step(), Some(Step::Evaluation), "(?i) in the pattern");
        assert_eq!(names(s.allowed()), ["critique"]);
    }

    #[test]
    fn message_conditions_hold_until_the_next_message() {
        let mut s = Session::new();
        s.on_user_message("research");
        assert_eq!(s.step(), Some(Step::Research));
        s.on_user_message("ok thanks");
        // No step matches: the active step stays (semantics §6.2).
        assert_eq!(s.step(), Some(Step::Research));
    }

    #[test]
    fn tool_used_looks_at_the_whole_session() {
        let mut s = Session::new();
        s.record(Tool::Summarize);
        assert_eq!(s.step(), Some(Step::Summary));
        for _ in 0..30 {
            s.record(Tool::Think);
        }
        assert!(
            s.history().all(|h| h == HistoryEntry::Tool(Tool::Think)),
            "summarize left the history"
        );
        s.on_user_message("nothing in particular");
        assert_eq!(s.step(), Some(Step::Summary), "but not the used set");
    }

    #[test]
    fn not_recently_used_with_a_window() {
        let mut s = Session::new();
        s.record(Tool::Search);
        s.on_user_message("something fresh");
        assert_eq!(s.step(), Some(Step::Idle), "search is among the last 2");
        s.record(Tool::Think);
        s.on_user_message("something fresh");
        assert_eq!(s.step(), Some(Step::Idle), "still among the last 2");
        s.record(Tool::Think);
        s.on_user_message("something fresh");
        assert_eq!(s.step(), Some(Step::Fresh), "search fell out of the window");
    }

    #[test]
    fn all_conditions_must_hold() {
        let mut s = Session::new();
        s.on_user_message("fresh");
        assert_eq!(
            s.step(),
            Some(Step::Fresh),
            "empty history: search not recently used"
        );
        let mut s = Session::new();
        s.record(Tool::Search);
        s.on_user_message("stale");
        assert_eq!(s.step(), Some(Step::Idle));
    }

    #[test]
    fn first_match_wins() {
        let mut s = Session::new();
        s.on_user_message("research and critique");
        assert_eq!(
            s.step(),
            Some(Step::Research),
            "Research comes before Evaluation"
        );
    }

    #[test]
    fn a_tool_can_trigger_a_transition_within_the_turn() {
        let mut s = Session::new();
        s.on_user_message("fetch the page");
        assert_eq!(s.step(), Some(Step::Fetch));
        assert_eq!(s.record(Tool::WebFetch), Outcome::Advanced { index: 1 });
        // summarize completes Fetch's sequence, and tool_used summarize activates the
        // earlier step Summary before the call returns.
        assert_eq!(s.record(Tool::Summarize), Outcome::Completed);
        assert_eq!(s.step(), Some(Step::Summary));
        assert_eq!(s.sequence_index(), 0);
    }
}

mod sequences {
    use super::*;
    use conformance::{Session, Step, Tool};

    #[test]
    fn groups_accept_any_of_their_tools() {
        for middle in [Tool::Debate, Tool::Compare] {
            let mut s = Session::new();
            s.on_user_message("critique it");
            s.record(Tool::Critique);
            assert_eq!(names(s.allowed()), ["debate", "compare"]);
            assert_eq!(s.expected().map(names), Some(vec!["debate", "compare"]));
            assert_eq!(s.record(middle), Outcome::Advanced { index: 2 });
            assert_eq!(s.record(Tool::Reflect), Outcome::Completed);
        }
    }

    #[test]
    fn reset_sequence_on_message_regex() {
        let mut s = Session::new();
        s.on_user_message("critique it");
        s.record(Tool::Critique);
        s.record(Tool::Debate);
        assert_eq!(s.sequence_index(), 2);
        s.on_user_message("thanks");
        assert_eq!(
            s.sequence_index(),
            2,
            "a message that does not match keeps the index"
        );
        s.on_user_message("now evaluate the second part");
        assert_eq!(s.step(), Some(Step::Evaluation));
        assert_eq!(s.sequence_index(), 0, "its own regex matched: reset");
    }

    #[test]
    fn reset_sequence_on_user_message() {
        let mut s = Session::new();
        s.on_user_message("again");
        s.record(Tool::Think);
        assert_eq!(s.sequence_index(), 1);
        s.on_user_message("ok");
        assert_eq!(s.step(), Some(Step::Restart));
        assert_eq!(s.sequence_index(), 0, "every new user message resets");
    }

    #[test]
    fn without_reset_the_index_survives_messages() {
        let mut s = Session::new();
        s.on_user_message("research");
        s.record(Tool::Search);
        s.on_user_message("research more");
        assert_eq!(s.sequence_index(), 1);
    }

    #[test]
    fn blocked_on_a_tool_the_host_lacks() {
        let mut s =
            Session::new().with_available(Tool::ALL.into_iter().filter(|t| *t != Tool::Search));
        s.on_user_message("research");
        assert_eq!(
            s.allowed(),
            conformance::ToolSet::EMPTY,
            "never silently widens"
        );
        assert_eq!(s.blocked_on(), Some(Tool::Search.into()));
        assert_eq!(
            s.check(Tool::Search),
            Err(conformance::Refusal::Unavailable)
        );
        s.set_available(Tool::ALL);
        assert_eq!(s.blocked_on(), None);
        assert_eq!(names(s.allowed()), ["search"]);
    }

    #[test]
    fn not_allowed_outcome_when_no_sequence_waits() {
        let mut s = Session::new();
        s.record(Tool::Summarize);
        assert_eq!(s.step(), Some(Step::Summary));
        assert_eq!(s.record(Tool::Danger), Outcome::NotAllowed);
        assert_eq!(s.record(Tool::CognitiveMap), Outcome::Free);
    }
}

mod tool_sets {
    use super::*;
    use conformance::{Session, Step, Tool};

    #[test]
    fn patterns_and_deny_wins() {
        let mut s = Session::new();
        s.record(Tool::Summarize);
        assert_eq!(s.step(), Some(Step::Summary));
        // allowed ["*cognitive*", "summarize"], denied ["cognitive_load"]
        assert_eq!(names(s.allowed()), ["summarize", "cognitive_map"]);
    }

    #[test]
    fn deny_only_allows_the_rest() {
        let mut s = Session::new();
        s.on_user_message("fresh start");
        assert_eq!(s.step(), Some(Step::Fresh));
        // allowed ["*"], denied ["danger", "web_*"]
        assert_eq!(
            names(s.allowed()),
            [
                "search",
                "think",
                "reflect",
                "critique",
                "debate",
                "compare",
                "summarize",
                "cognitive_map",
                "cognitive_load"
            ]
        );
    }

    #[test]
    fn host_lists_are_filtered_lazily_by_name_with_foreign_tools_judged_by_patterns() {
        let mut s = Session::new();
        let host = [
            "summarize",
            "cognitive_boost",
            "cognitive_load",
            "weather",
            "web_fetch",
        ];
        // Default step, no allowed list: every tool, foreign ones included.
        assert_eq!(s.filter_names(host).collect::<Vec<_>>(), host);
        s.record(Tool::Summarize);
        // Summary: `*cognitive*` admits the foreign `cognitive_boost`; deny still wins.
        assert_eq!(
            s.filter_names(host).collect::<Vec<_>>(),
            ["summarize", "cognitive_boost"]
        );
        let mut s = Session::new();
        s.on_user_message("fresh");
        assert_eq!(s.step(), Some(Step::Fresh));
        assert_eq!(
            s.filter_names(host).collect::<Vec<_>>(),
            ["summarize", "cognitive_boost", "cognitive_load", "weather"]
        );
    }

    #[test]
    fn foreign_tools_enter_the_history_but_never_advance_a_sequence() {
        let mut s = Session::new();
        s.on_user_message("research");
        let out = s.record_name("weather");
        assert_eq!(
            out,
            Outcome::OutOfSequence {
                expected: Tool::Search.into()
            }
        );
        assert_eq!(s.history().collect::<Vec<_>>(), [HistoryEntry::Foreign]);
        assert_eq!(
            s.check_name("weather").unwrap_err().to_string(),
            "the sequence of step `Research` expects `search` at position 0"
        );
        assert_eq!(s.record_name("search"), Outcome::Advanced { index: 1 });
        // A foreign entry equals no tool: not_recently_used and sequence_match see it.
        let mut s = Session::new();
        s.record(Tool::Search);
        s.record_name("x");
        s.record_name("y");
        s.on_user_message("fresh");
        assert_eq!(s.step(), Some(Step::Fresh));
    }

    #[test]
    fn no_active_step_allows_the_hosts_tools() {
        use no_default::{Session, Step, Tool};
        let mut s = Session::new();
        assert_eq!(s.step(), None);
        assert_eq!(s.allowed().len(), 3);
        assert_eq!(s.record(Tool::Delete), Outcome::Free);
        s.on_user_message("open it");
        assert_eq!(s.step(), Some(Step::Open));
        assert_eq!(names(s.allowed()), ["read", "write"]);
        s.on_user_message("nothing");
        assert_eq!(s.step(), Some(Step::Open), "once a step is active it stays");
        s.on_user_message("lock");
        assert_eq!(names(s.allowed()), ["read"]);
        let s = s.with_available([Tool::Write]);
        assert!(s.allowed().is_empty());
    }
}

mod lifecycle {
    use super::*;
    use conformance::{Session, Step, Tool};

    #[test]
    fn usage_accumulates_and_saturates() {
        let mut s = Session::new();
        s.record_usage(100, 20);
        s.record_usage(5, 7);
        assert_eq!(
            (s.usage().prompt, s.usage().completion, s.usage().total()),
            (105, 27, 132)
        );
        s.record_usage(u64::MAX, u64::MAX);
        assert_eq!(s.usage().prompt, u64::MAX);
        assert_eq!(s.usage().total(), u64::MAX);
    }

    #[test]
    fn reset_is_a_fresh_session_but_keeps_the_host_tools() {
        let mut s = Session::new().with_available([Tool::Search, Tool::Think]);
        s.on_user_message("research");
        s.record(Tool::Search);
        s.record(Tool::Summarize);
        s.record_usage(3, 4);
        s.reset();
        let fresh = Session::new().with_available([Tool::Search, Tool::Think]);
        assert_eq!(s, fresh);
        assert_eq!(s.step(), Some(Step::Idle));
        assert_eq!(s.history().count(), 0);
        assert!(s.used().is_empty());
    }

    #[test]
    fn sessions_are_small_copyable_values() {
        let a = Session::new();
        let mut b = a;
        b.record(Tool::Search);
        assert_ne!(a, b);
        // State: step, index, history cursor, transition-table node (4 × u16; the ring's
        // unwritten slots mark its length), used set (1 word),
        // message flags (1 word), history (10 × u16), usage (2 × u64), derived condition
        // state (holds: 1 word, eligible steps: 1 word; no sequence_match, so no
        // shift-and word), `not_recently_used` counters (cognitive reasoner: none;
        // this machine: one u16, in what was padding); the held verdict on a gated call
        // (a 32-byte call digest, its verdict and the 8-byte identity of the question it
        // answers, semantics §13); plus the host's
        // available tools (1 word). Exact on 64-bit targets.
        #[cfg(target_pointer_width = "64")]
        {
            assert_eq!(std::mem::size_of::<cognitive_reasoner::Session>(), 128);
            assert_eq!(std::mem::size_of::<Session>(), 128);
            // The sequence-driven shape (six `sequence_match` steps, 7 tools, no message
            // condition): no flag word, one word each of atoms, eligible steps and
            // shift-and bits (19 positions).
            assert_eq!(std::mem::size_of::<sequence_shaped::Session>(), 128);
        }
    }

    #[test]
    fn generated_names_round_trip() {
        for t in Tool::ALL {
            assert_eq!(Tool::from_name(t.name()), Some(t));
            assert_eq!(t.to_string(), t.name());
        }
        for s in Step::ALL {
            assert_eq!(Step::from_name(s.name()), Some(s));
        }
        assert_eq!(Tool::from_name("nope"), None);
        assert_eq!(Tool::CognitiveMap.name(), "cognitive_map");
        assert_eq!(conformance::NAME, "conformance");
        assert_eq!(cognitive_reasoner::MAX_ROUNDS, Some(10));
        assert_eq!(
            cognitive_reasoner::Step::ResearchMode.description(),
            Some("Research-based cognitive flow: search, then think, then reflect")
        );
    }
}

use orch::orchestration;

orchestration! {
    /// Every feature of the template format, in the DSL.
    pub machine "every-feature" {
        tools: [search, think, reflect, critique, debate, compare, "web-fetch", cognitive_map, r#type],
        description: "All the features.";
        history: 12;
        max_steps: 7;
        default step Idle;
        /// Research: message contains, sequence.
        step "Research Mode" {
            when message_contains("research");
            sequence: [search, think, reflect];
            allow: [search, think, reflect];
        }
        step Evaluation {
            description: "regex, groups, reset";
            when message_regex("(?i)critique|evaluate");
            sequence: [critique, (debate | compare), reflect];
            allow: [critique, debate, compare, reflect, search];
            reset_sequence_on: [message_regex, user_message];
        }
        step Fresh {
            when message_contains("fresh");
            when not_recently_used(search, window = 3);
            allow: ["*"];
            deny: ["web-*", r#type];
        }
        step Cognitive {
            when tool_used("web-fetch");
            allow: ["*cognitive*"];
        }
    }
}

fn main() {
    use every_feature::{Session, Step, Tool};
    assert_eq!(every_feature::NAME, "every-feature");
    assert_eq!(every_feature::MAX_ROUNDS, Some(7));
    assert_eq!(Step::ResearchMode.name(), "Research Mode");
    assert_eq!(Tool::WebFetch.name(), "web-fetch");
    assert_eq!(Tool::Type.name(), "type");
    let mut s = Session::new();
    s.on_user_message("Critique it");
    assert_eq!(s.step(), Some(Step::Evaluation));
    s.record(Tool::Critique);
    assert_eq!(s.allowed().iter().collect::<Vec<_>>(), [Tool::Debate, Tool::Compare]);
}

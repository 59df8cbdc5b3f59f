// The DSL example of the README, verbatim: it must compile.
use orch::orchestration;

orchestration! {
    #![allow(unreachable_step)]            // warnings are errors unless allowed
    /// Docs for the generated module.
    pub machine CognitiveReasoner {        // -> `pub mod cognitive_reasoner`
        tools: [search, think, reflect, compare, critique, debate, "web-fetch", cognitive_map];
        history: 20;                       // orchestration.historyLength
        max_steps: 10;                     // options.maxSteps
        description: "Pick a mode, follow its sequence.";
        default step DefaultMode;
        /// Doc comments become the step's description.
        step ResearchMode {
            when message_regex("(?i)\\bresearch\\b");
            sequence: [search, think, reflect];
            allow: [search, think, reflect];
        }
        step EvaluationMode {
            when message_regex("(?i)critique|evaluate|assess");
            sequence: [critique, (debate | compare), reflect];   // a group: debate or compare
            allow: [critique, debate, compare, reflect, search];
            reset_sequence_on: [message_regex];
        }
        step "Fresh Look" {                // names that are not identifiers are strings
            when message_contains("fresh");
            when not_recently_used(search, window = 3);
            allow: ["*"];                  // patterns are strings
            deny: ["web-*"];
        }
        step AfterFetch {
            when tool_used("web-fetch");
            allow: ["*cognitive*"];
        }
        step Unused { allow: [search]; }   // W001, allowed above
    }
}

fn main() {
    let mut s = cognitive_reasoner::Session::new();
    s.on_user_message("please research this");
    assert_eq!(s.step(), Some(cognitive_reasoner::Step::ResearchMode));
    assert_eq!(cognitive_reasoner::Step::FreshLook.name(), "Fresh Look");
}

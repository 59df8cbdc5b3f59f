use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search, think, reflect],
        default step Idle;
        step Research {
            when message_contains("research");
            sequence: [serch, think];
        }
    }
}

fn main() {
    // The machine is still generated (without behaviour), so code using it reports
    // nothing else.
    let s = demo::Session::new();
    let _ = s.check(demo::Tool::Search);
    let _ = demo::Step::Research;
}

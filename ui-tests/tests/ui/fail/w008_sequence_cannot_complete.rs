use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search, think, reflect],
        default step Idle;
        step Plan {
            when not_recently_used(search, window = 3);
            when message_contains("plan");
            sequence: [search, think];
        }
        step Research { when tool_used(search); }
    }
}

fn main() {}

use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search, think],
        default step Idle;
        step Broad { when message_contains("plan"); }
        step Narrow {
            when message_contains("planning");
            when tool_used(think);
        }
    }
}

fn main() {}

use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step Idle { when tool_used(search); }
    }
}

fn main() {}

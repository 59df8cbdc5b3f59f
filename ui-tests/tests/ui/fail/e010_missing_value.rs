use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step Idle;
        step Research { when tool_used; }
    }
}

fn main() {}

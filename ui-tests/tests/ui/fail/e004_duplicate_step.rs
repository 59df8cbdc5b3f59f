use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step Idle;
        step Research { when tool_used(search); }
        step Research { when tool_used(search); }
    }
}

fn main() {}

use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search, think],
        default step Idle;
        step Research {
            when tool_used(search);
            sequence: [search, ()];
        }
    }
}

fn main() {}

use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step Idle { deny: ["*"]; }
    }
}

fn main() {}

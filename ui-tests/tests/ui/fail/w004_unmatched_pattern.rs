use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step Idle { allow: [search, "*cognitive*"]; }
    }
}

fn main() {}

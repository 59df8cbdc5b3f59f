use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step Idle;
        step Lonely { allow: [search]; }
    }
}

fn main() {}

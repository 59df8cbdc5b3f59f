use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step Idle;
        default step Waiting;
    }
}

fn main() {}

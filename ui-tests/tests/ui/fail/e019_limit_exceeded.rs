use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        history: 100000;
        default step Idle;
    }
}

fn main() {}

use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step Idle;
        step Research { when sequence_match; }
    }
}

fn main() {}

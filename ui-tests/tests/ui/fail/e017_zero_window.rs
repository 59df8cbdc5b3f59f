use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step Idle;
        step Fresh { when not_recently_used(search, window = 0); }
    }
}

fn main() {}

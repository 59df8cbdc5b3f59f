use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step Idle;
        step Research { when message_regex("(critique"); }
    }
}

fn main() {}

use orch_macros::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step Idle;
        step Research { when message_regex("(critique"); }
    }
}

fn main() {}

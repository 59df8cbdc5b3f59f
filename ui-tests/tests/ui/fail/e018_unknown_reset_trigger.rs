use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step Idle;
        step Research {
            when tool_used(search);
            sequence: [search];
            reset_sequence_on: [user_mesage];
        }
    }
}

fn main() {}

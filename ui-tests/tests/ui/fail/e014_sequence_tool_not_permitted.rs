use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search, think, reflect],
        default step Idle;
        step Research {
            when message_contains("research");
            sequence: [search, think, reflect];
            allow: [search, think];
        }
    }
}

fn main() {}

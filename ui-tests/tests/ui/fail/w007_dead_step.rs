use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search, think, reflect],
        default step Idle { allow: [search, think]; }
        step AuditDesk {
            when message_regex("^a");
            when message_regex("^b");
            allow: [reflect];
        }
    }
}

fn main() {}

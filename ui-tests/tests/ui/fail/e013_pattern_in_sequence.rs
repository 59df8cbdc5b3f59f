use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search, web_fetch],
        default step Idle;
        step Research {
            when tool_used(search);
            sequence: [search, "web_*"];
        }
    }
}

fn main() {}

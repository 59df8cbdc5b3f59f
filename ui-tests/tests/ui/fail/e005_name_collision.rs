use orch::orchestration;

orchestration! {
    machine demo {
        tools: ["web-fetch", web_fetch],
        default step Idle;
    }
}

fn main() {}

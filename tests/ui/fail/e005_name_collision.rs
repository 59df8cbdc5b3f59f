use orch_macros::orchestration;

orchestration! {
    machine demo {
        tools: ["web-fetch", web_fetch],
        default step Idle;
    }
}

fn main() {}

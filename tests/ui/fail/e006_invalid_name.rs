use orch_macros::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step "---";
    }
}

fn main() {}

use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        default step "---";
    }
}

fn main() {}

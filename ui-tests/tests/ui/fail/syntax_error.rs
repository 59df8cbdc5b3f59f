use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        step Research { colour: red; }
    }
}

fn main() {}

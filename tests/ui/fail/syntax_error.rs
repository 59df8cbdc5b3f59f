use orch_macros::orchestration;

orchestration! {
    machine demo {
        tools: [search],
        step Research { colour: red; }
    }
}

fn main() {}

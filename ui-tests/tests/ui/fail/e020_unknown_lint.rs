use orch::orchestration;

orchestration! {
    #![allow(unreachable_stp)]
    machine demo {
        tools: [search],
        default step Idle;
    }
}

fn main() {}

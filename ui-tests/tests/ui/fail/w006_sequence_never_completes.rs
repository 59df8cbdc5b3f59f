use orch::orchestration;

orchestration! {
    machine demo {
        tools: [search, think, reflect],
        default step Idle;
        step AfterSearch { when tool_used(search); }
        step Deep {
            when tool_used(think);
            sequence: [reflect, search, think];
        }
    }
}

fn main() {}

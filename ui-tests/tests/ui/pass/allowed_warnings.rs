use orch::orchestration;

orchestration! {
    #![allow(unreachable_step, shadowed_step)]
    pub(crate) machine demo {
        tools: [search],
        default step Idle;
        step Lonely { allow: [search]; }
        step Broad { when tool_used(search); }
        step Narrow { when tool_used(search); }
    }
}

fn main() {
    let mut s = demo::Session::new();
    s.record(demo::Tool::Search);
    assert_eq!(s.step(), Some(demo::Step::Broad));
}

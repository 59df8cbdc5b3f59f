//! The reviewed snapshot of generated code (orch-codegen/tests/snapshots/) must compile
//! and run, not only match text.

include!("../orch-codegen/tests/snapshots/demo_agent.rs");

#[test]
fn the_snapshot_is_a_working_machine() {
    use demo_agent::{Session, Step, Tool};
    let mut s = Session::new();
    assert_eq!(s.step(), Some(Step::Chat));
    s.on_user_message("Research please");
    assert_eq!(s.step(), Some(Step::ResearchMode));
    assert_eq!(s.allowed().iter().collect::<Vec<_>>(), [Tool::Search]);
    s.record(Tool::Search);
    assert_eq!(
        s.allowed().iter().collect::<Vec<_>>(),
        [Tool::Think, Tool::Reflect]
    );
}

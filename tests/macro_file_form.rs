//! `orchestration!(file = ...)` generates the same machine as build.rs.

orch::orchestration!(file = "tests/fixtures/machines/sequence-modes.json");

mod via_build_rs {
    orch::include_machine!("sequence-modes");
}

#[test]
fn file_form_equals_build_rs() {
    assert_eq!(
        sequence_modes::FINGERPRINT,
        via_build_rs::sequence_modes::FINGERPRINT
    );
    let mut s = sequence_modes::Session::new();
    for t in [
        sequence_modes::Tool::Critique,
        sequence_modes::Tool::Debate,
        sequence_modes::Tool::Reflect,
    ] {
        s.record(t);
    }
    assert_eq!(s.step(), Some(sequence_modes::Step::EvaluationMode));
}

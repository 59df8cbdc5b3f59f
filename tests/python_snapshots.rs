//! The Python package (`orch-py`) and the Rust crates share one snapshot format: the
//! bytes in `orch-py/tests/fixtures/cognitive-reasoner.snapshot` are what a Rust run-time
//! session writes after the scenario below. This test keeps the fixture true (set
//! `ORCH_BLESS=1` to write it afresh after a deliberate format change);
//! `orch-py/tests/test_core.py` restores it in Python and writes the same bytes after the
//! same scenario.

use std::path::Path;

/// The scenario: a research question, then the first two tools of its sequence.
fn scenario_bytes() -> Vec<u8> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source =
        std::fs::read_to_string(root.join("examples/agents/cognitive-reasoner/template.json"))
            .expect("the template");
    let machine = orch_codegen::compile_json(&source, None)
        .to_machine()
        .expect("it compiles");
    let mut session = machine.session();
    session.on_user_message("research how many moons Jupiter has");
    session.record("search");
    session.record("think");
    session.snapshot().to_bytes()
}

#[test]
fn the_python_fixture_is_what_rust_writes() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("orch-py/tests/fixtures/cognitive-reasoner.snapshot");
    let bytes = scenario_bytes();
    if std::env::var_os("ORCH_BLESS").is_some() {
        std::fs::write(&fixture, &bytes).expect("write the fixture");
    }
    let stored = std::fs::read(&fixture).expect("the fixture (ORCH_BLESS=1 writes it)");
    assert_eq!(
        stored, bytes,
        "the snapshot format changed: the Python package's fixture no longer matches"
    );
}

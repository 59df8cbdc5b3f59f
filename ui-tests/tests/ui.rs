//! The `orchestration!` macro's diagnostics, as a user sees them: one compile-fail case
//! per diagnostic code (tests/ui/fail/, each with its reviewed `.stderr`) and pass cases
//! (tests/ui/pass/). Regenerate after a reviewed change with `TRYBUILD=overwrite`.
//! That every code has its case is checked in the root package (tests/house_rules.rs),
//! so that trybuild's project depends on `orch` alone, not on the compiler a second time.

#[test]
fn ui() {
    // The file form resolves paths against this package, not trybuild's copy of it.
    std::env::set_var("ORCH_MANIFEST_DIR", env!("CARGO_MANIFEST_DIR"));
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}

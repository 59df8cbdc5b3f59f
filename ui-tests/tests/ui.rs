//! The `orchestration!` macro's diagnostics, as a user sees them: one compile-fail case
//! per diagnostic code (tests/ui/fail/, each with its reviewed `.stderr`) and pass cases
//! (tests/ui/pass/). Regenerate after a reviewed change with `TRYBUILD=overwrite`.

#[test]
fn ui() {
    // The file form resolves paths against this package, not trybuild's copy of it.
    std::env::set_var("ORCH_MANIFEST_DIR", env!("CARGO_MANIFEST_DIR"));
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}

#[test]
fn every_code_has_a_compile_fail_case() {
    let cases: Vec<String> = std::fs::read_dir("tests/ui/fail")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for code in orch_codegen::Code::ALL {
        // E024 and W009 depend on the surface a template runs on (an MCP gateway); the
        // macro compiles for the agent's own process, where they never arise (their
        // cases are in orch-codegen's tests/diagnostics.rs, compiled for each surface).
        if orch_codegen::explain::explain(*code).surface != orch_codegen::Surface::Agent {
            continue;
        }
        let prefix = code.as_str().to_lowercase();
        assert!(
            cases
                .iter()
                .any(|c| c.starts_with(&prefix) && c.ends_with(".rs")),
            "no ui case for {code}"
        );
        assert!(
            cases
                .iter()
                .any(|c| c.starts_with(&prefix) && c.ends_with(".stderr")),
            "no .stderr for {code}"
        );
    }
}

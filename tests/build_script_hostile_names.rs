//! A real cargo project (edition 2024) whose build.rs compiles a template with hostile
//! names: a step name that tries to inject a `cargo:` directive through a warning, a
//! CR and a bidi control in descriptions and names, a tool name with an uncommon code
//! point, and `agentId: "gen"` (a keyword in edition 2024). The project must build with
//! no warning from the generated code and without the injected `cfg`.

use std::path::Path;
use std::process::Command;

const TEMPLATE: &str = r#"{"agentId": "gen", "tools": ["search", "ⅰ", "a\u202eb", "c\rd"],
 "orchestration": {"description": ["line1\rline2", "evil \u202e text"], "steps": [
  {"name": "Idle", "isDefault": true, "description": "first\r\nsecond \u2066x\u2069"},
  {"name": "Lonely\ncargo:rustc-cfg=pwned\ncargo:warning=injected"},
  {"name": "Go", "conditions": [{"type": "tool_used", "value": "ⅰ"}]}
 ]}}"#;

#[test]
fn hostile_names_neither_break_the_build_nor_inject_directives() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let project = orch_test_support::scratch::Scratch::new("hostile");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        format!(
            "[package]\nname = \"hostile-names\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n[dependencies]\norch = {{ path = {:?} }}\n\n[build-dependencies]\norch-build = {{ path = {:?} }}\n\n[workspace]\n",
            root.join("orch"),
            root.join("orch-build")
        ),
    )
    .unwrap();
    std::fs::copy(root.join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
    std::fs::write(project.join("template.json"), TEMPLATE).unwrap();
    std::fs::write(
        project.join("build.rs"),
        // `pwned` is a cfg the build may know; only an injected directive would set it.
        "fn main() {\n    println!(\"cargo::rustc-check-cfg=cfg(pwned)\");\n    orch_build::Builder::new().template(\"template.json\").compile().expect(\"templates\");\n}\n",
    )
    .unwrap();
    std::fs::write(
        project.join("src/main.rs"),
        r#"#![deny(warnings)]
#[cfg(pwned)]
compile_error!("a build directive was injected through a template name");
orch::include_machine!("gen");
fn main() {
    let mut s = gen_::Session::new();
    s.record(gen_::Tool::I);
    println!("{} {:?}", gen_::Tool::AU202eB.name().len(), s.step().map(|s| s.name()));
}
"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--offline"])
        .current_dir(&project)
        .env("CARGO_TARGET_DIR", root.join("target/rebuild-check"))
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the project did not build:\n{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "5 Some(\"Go\")"
    );
}

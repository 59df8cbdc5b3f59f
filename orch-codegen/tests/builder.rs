//! The build.rs API: files written, keys, cargo directives, error text, and a reviewed
//! snapshot of the generated code.

use orch_codegen::Builder;
use std::path::Path;

fn temp_dir(name: &str) -> orch_test_support::scratch::Scratch {
    orch_test_support::scratch::Scratch::new(&format!("builder-{name}"))
}

const DEMO: &str = r#"{
  "agentId": "demo-agent",
  "tools": ["search", "think", "reflect"],
  "orchestration": {
    "description": "A small demo.",
    "steps": [
      { "name": "Chat", "isDefault": true },
      {
        "name": "Research Mode",
        "description": "search, then think",
        "conditions": [{ "type": "message_regex", "value": "(?i)research" }],
        "sequence": ["search", ["think", "reflect"]],
        "availableTools": { "allowed": ["search", "think", "reflect"] }
      },
      { "name": "Lonely" }
    ]
  }
}
"#;

#[test]
fn writes_modules_under_every_key_and_reports_warnings() {
    let dir = temp_dir("ok");
    let template = dir.join("template.json");
    std::fs::write(&template, DEMO).unwrap();
    let out = dir.join("out");
    let report = Builder::new()
        .template(&template)
        .out_dir(&out)
        .cargo_directives(false)
        .compile()
        .expect("compiles");
    assert_eq!(report.machines.len(), 1);
    assert_eq!(report.machines[0].1, "demo_agent");
    for key in ["demo_agent", "demo-agent"] {
        let code = std::fs::read_to_string(out.join(format!("{key}.rs"))).unwrap();
        assert!(code.contains("pub mod demo_agent {"), "{key}");
        syn::parse_file(&code).expect("valid Rust");
    }
    assert_eq!(report.warnings.len(), 1);
    let w = &report.warnings[0];
    assert!(
        w.contains("template.json:15:17: warning[W001]: step `Lonely` can never become active"),
        "{w}"
    );
}

#[test]
fn errors_render_with_path_line_and_column_and_write_nothing() {
    let dir = temp_dir("err");
    let template = dir.join("bad.json");
    std::fs::write(
        &template,
        DEMO.replace(r#"["search", ["think""#, r#"["serch", ["think""#),
    )
    .unwrap();
    let out = dir.join("out");
    let err = Builder::new()
        .template(&template)
        .out_dir(&out)
        .cargo_directives(false)
        .compile()
        .unwrap_err();
    let text = format!("{err:?}");
    assert!(
        text.starts_with("1 error(s) in orchestration templates"),
        "{text}"
    );
    assert!(text.contains("error[E015]: unknown tool `serch`"), "{text}");
    assert!(text.contains("bad.json:12:22"), "{text}");
    assert!(text.contains("help: did you mean `search`?"), "{text}");
    assert!(!out.exists(), "nothing written on error");
    // The same as data, to match on.
    assert_eq!(err.kind, orch_codegen::BuildErrorKind::Templates);
    assert_eq!(err.diagnostics.len(), 1);
    let (file, d) = &err.diagnostics[0];
    assert!(file.ends_with("bad.json"), "{file}");
    assert_eq!(d.code.as_str(), "E015");
}

#[test]
fn deny_warnings_and_missing_files() {
    let dir = temp_dir("deny");
    let template = dir.join("t.json");
    std::fs::write(&template, DEMO).unwrap();
    let err = Builder::new()
        .template(&template)
        .out_dir(dir.join("out"))
        .cargo_directives(false)
        .deny_warnings(true)
        .compile()
        .unwrap_err();
    assert!(err.rendered.contains("warning[W001]"), "{err}");
    assert!(err
        .diagnostics
        .iter()
        .any(|(_, d)| d.code.as_str() == "W001"));

    let err = Builder::new()
        .template(dir.join("missing.json"))
        .out_dir(dir.join("out"))
        .cargo_directives(false)
        .compile()
        .unwrap_err();
    assert!(
        err.rendered
            .contains("missing.json: cannot read the template"),
        "{err}"
    );

    std::fs::write(dir.join("binary.json"), [0xff, 0xfe, 0x00, 0x41]).unwrap();
    let err = Builder::new()
        .template(dir.join("binary.json"))
        .out_dir(dir.join("out"))
        .cargo_directives(false)
        .compile()
        .unwrap_err();
    assert!(err.rendered.contains("not UTF-8"), "{err}");
    assert_eq!(err.kind, orch_codegen::BuildErrorKind::Templates);

    let err = Builder::new()
        .template(&template)
        .runtime_path("not a path")
        .out_dir(dir.join("out"))
        .cargo_directives(false)
        .compile()
        .unwrap_err();
    assert_eq!(err.kind, orch_codegen::BuildErrorKind::Config);
    // A file where the output directory should be: the generated file cannot be written.
    std::fs::write(dir.join("blocked"), "a file").unwrap();
    let err = Builder::new()
        .template(&template)
        .out_dir(dir.join("blocked"))
        .cargo_directives(false)
        .compile()
        .unwrap_err();
    assert_eq!(err.kind, orch_codegen::BuildErrorKind::Io, "{err}");
}

/// The generated code is reviewed like source: a change in the emitter shows up as a
/// diff of this file. Regenerate with `UPDATE_SNAPSHOTS=1 cargo test -p orch-codegen`.
#[test]
fn generated_code_snapshot() {
    let compiled = orch_codegen::compile_json(DEMO, None);
    let code = orch_codegen::emit::pretty(
        &compiled,
        orch_codegen::emit::Origin::File("demo/template.json"),
        &orch_codegen::emit::runtime_path(orch_codegen::emit::DEFAULT_RUNTIME).unwrap(),
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/demo_agent.rs");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &code).unwrap();
    }
    let expected =
        std::fs::read_to_string(&path).expect("snapshot exists (UPDATE_SNAPSHOTS=1 creates it)");
    assert_eq!(
        code, expected,
        "generated code changed; review and run with UPDATE_SNAPSHOTS=1"
    );
}

#[test]
fn two_templates_of_one_machine_are_an_error_naming_both() {
    let dir = temp_dir("twice");
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    std::fs::write(&a, DEMO).unwrap();
    std::fs::write(&b, DEMO.replace("A small demo.", "Another demo.")).unwrap();
    let err = Builder::new()
        .templates([&a, &b])
        .out_dir(dir.join("out"))
        .cargo_directives(false)
        .compile()
        .unwrap_err();
    assert_eq!(err.errors, 1);
    assert!(
        err.rendered.contains(&format!(
            "error: {} and {} both compile to the machine `demo_agent`",
            a.display(),
            b.display()
        )),
        "{err}"
    );
    assert!(!dir.join("out").exists(), "nothing is written");
}

/// The template of the machine the runtime's documentation examples drive
/// (`orch_runtime::__doc_machine!()`).
const DOC_DEMO: &str = r#"{
  "agentId": "demo",
  "tools": ["search", "think", "reflect", "publish"],
  "orchestration": {
    "steps": [
      { "name": "Chat", "isDefault": true },
      {
        "name": "Research",
        "conditions": [{ "type": "message_contains", "value": "research" }],
        "sequence": ["search", "think", "reflect"],
        "availableTools": { "allowed": ["search", "think", "reflect"] }
      },
      {
        "name": "Publish",
        "conditions": [{ "type": "message_contains", "value": "publish" }],
        "availableTools": { "allowed": ["publish"], "approve": ["publish"] }
      }
    ]
  }
}"#;

/// `orch_runtime::__doc_machine!` (orch-runtime/src/doc_machine.rs) is this emitter's
/// output for [`DOC_DEMO`], so the runtime's doc examples run generated code, not a
/// hand-written imitation of it, and follow every change of the compiled form.
/// Regenerate with `UPDATE_SNAPSHOTS=1 cargo test -p orch-codegen`.
#[test]
fn the_runtime_doc_machine_is_generated() {
    let compiled = orch_codegen::compile_json(DOC_DEMO, None);
    assert!(
        compiled.diagnostics.is_empty(),
        "{:?}",
        compiled.diagnostics
    );
    let module = orch_codegen::emit::pretty(
        &compiled,
        orch_codegen::emit::Origin::File("orch-codegen/tests/builder.rs (DOC_DEMO)"),
        &orch_codegen::emit::runtime_path("__orch_runtime_crate__").unwrap(),
    );
    let body: String = module
        .replace("__orch_runtime_crate__", "$crate")
        .lines()
        .map(|line| match line {
            "" => "\n".to_owned(),
            line => format!("        {line}\n"),
        })
        .collect();
    let code = format!(
        "//! `__doc_machine!()`: the machine of this crate's documentation examples, as\n\
         //! `orch-codegen` generates it for the template in orch-codegen/tests/builder.rs\n\
         //! (`DOC_DEMO`). Generated; do not edit: `UPDATE_SNAPSHOTS=1 cargo test -p\n\
         //! orch-codegen` rewrites it (the test `the_runtime_doc_machine_is_generated`).\n\
         \n\
         /// Defines `mod demo`, a generated machine, for documentation examples.\n\
         #[doc(hidden)]\n\
         #[rustfmt::skip]\n\
         #[macro_export]\n\
         macro_rules! __doc_machine {{\n    () => {{\n{body}    }};\n}}\n"
    );
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../orch-runtime/src/doc_machine.rs");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &code).unwrap();
    }
    let expected = std::fs::read_to_string(&path).expect("orch-runtime/src/doc_machine.rs exists");
    assert_eq!(
        code, expected,
        "the runtime's doc machine is not what the emitter writes; run with UPDATE_SNAPSHOTS=1"
    );
}

/// build.rs fails on a violated property (E023), naming it at its place, and writes
/// nothing; the same template with the gate it lacked builds.
#[test]
fn a_violated_property_fails_the_build() {
    let dir = temp_dir("property");
    let template = dir.join("shop.json");
    let ungated = r#"{"agentId": "shop", "tools": ["browse", "pay"], "orchestration": {
  "steps": [{"name": "Shop", "isDefault": true}],
  "properties": [{"name": "pay-approved", "tool": "pay", "approved": true}]}}"#;
    std::fs::write(&template, ungated).unwrap();
    let err = Builder::new()
        .template(&template)
        .out_dir(dir.join("out"))
        .cargo_directives(false)
        .compile()
        .unwrap_err();
    assert_eq!(err.kind, orch_codegen::BuildErrorKind::Templates);
    assert!(
        err.rendered
            .contains("error[E023]: property `pay-approved` is violated"),
        "{err}"
    );
    assert!(err.rendered.contains("shop.json:3:"), "{err}");
    assert!(!dir.join("out").join("orch").join("shop.rs").exists());
    std::fs::write(
        &template,
        ungated.replace(
            r#""orchestration": {"#,
            r#""orchestration": {"approve": ["pay"],"#,
        ),
    )
    .unwrap();
    Builder::new()
        .template(&template)
        .out_dir(dir.join("out"))
        .cargo_directives(false)
        .compile()
        .expect("gated, the property holds");
}

//! Editing a template used by `orchestration!(file = ...)` rebuilds the crate that uses
//! it: a real cargo project is built, the JSON is edited, and the rebuilt binary shows
//! the change. (Slow the first time: it builds the runtime's dependencies once, into
//! target/rebuild-check, which later runs reuse.)

use std::path::Path;
use std::process::Command;

fn run(project: &Path, target: &Path) -> String {
    let out = Command::new(env!("CARGO"))
        .args(["run", "--quiet", "--offline"])
        .current_dir(project)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("ORCH_MANIFEST_DIR")
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo run failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn template(steps: &[&str]) -> String {
    let steps: Vec<String> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            if i == 0 {
                format!(r#"{{"name": "{s}", "isDefault": true}}"#)
            } else {
                format!(r#"{{"name": "{s}", "conditions": [{{"type": "message_contains", "value": "{s}"}}]}}"#)
            }
        })
        .collect();
    format!(
        r#"{{"agentId": "agent", "tools": ["search"], "orchestration": {{"steps": [{}]}}}}"#,
        steps.join(",")
    )
}

#[test]
fn editing_the_template_rebuilds_the_crate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let project = orch_test_support::scratch::Scratch::new("rebuild");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        format!(
            "[package]\nname = \"rebuild-check\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\norch = {{ path = {:?} }}\n\n[workspace]\n",
            root.join("orch"),
        ),
    )
    .unwrap();
    std::fs::copy(root.join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
    std::fs::write(
        project.join("src/main.rs"),
        "orch::orchestration!(file = \"agent.json\");\n\
         fn main() {\n    let names: Vec<&str> = agent::Step::ALL.iter().map(|s| s.name()).collect();\n    println!(\"{}\", names.join(\",\"));\n}\n",
    )
    .unwrap();
    let target = root.join("target/rebuild-check");

    std::fs::write(project.join("agent.json"), template(&["Idle", "Plan"])).unwrap();
    assert_eq!(run(&project, &target), "Idle,Plan");

    std::fs::write(
        project.join("agent.json"),
        template(&["Idle", "Plan", "Review"]),
    )
    .unwrap();
    assert_eq!(
        run(&project, &target),
        "Idle,Plan,Review",
        "the edit must trigger a rebuild"
    );
}

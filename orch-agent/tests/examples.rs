//! The agent examples run for real against a local model server (tests/common/fake.rs):
//! `openai_agent`, `genai_agent` and `rig_agent` over OpenAI's chat completions, and
//! `genai_agent` over Anthropic's messages. Each must finish the research turn in order
//! and print the offered tools, the forced choice and the refusal.

mod common;

use common::fake::{call, text, Fake};
use std::path::PathBuf;
use std::process::Command;

/// An example's binary, built by `cargo test` next to this test's own.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is not built: `cargo test` builds the examples (or `cargo build -p orch-agent --all-features --examples`)",
        path.display()
    );
    path
}

/// The research turn, with one out-of-order call on the way.
fn script() -> Fake {
    Fake::new([
        call("think", r#"{"input": "too early"}"#),
        call("search", r#"{"query": "AI jobs automation"}"#),
        call("think", r#"{"input": "AI changes tasks within jobs."}"#),
        call("reflect", r#"{"input": "what we know"}"#),
        text("AI reshapes tasks more than it removes jobs."),
    ])
}

async fn run(name: &str, adapter: Option<&str>) -> String {
    let fake = script();
    let base = fake.start().await;
    let mut command = Command::new(example(name));
    command
        .args(["Research", "the", "impact", "of", "AI", "on", "jobs"])
        .env("OPENAI_BASE_URL", &base)
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_MODEL", "fake-model");
    if let Some(adapter) = adapter {
        command.env("GENAI_ADAPTER", adapter);
    }
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{name}: {stderr}\n{stdout}");
    assert_eq!(fake.requests().len(), 5, "{stdout}");
    assert!(
        stdout.contains("AI reshapes tasks more than it removes jobs."),
        "{stdout}"
    );
    assert!(
        stdout.contains(r#"offered ["search"], tool choice forced: search"#),
        "{stdout}"
    );
    assert!(
        stdout.contains(r#"offered ["think"], tool choice forced: think"#),
        "{stdout}"
    );
    assert!(
        stdout.contains("`think` was not run: the sequence of step `ResearchMode` expects `search` at position 0"),
        "{stdout}"
    );
    stdout
}

#[tokio::test]
async fn openai_agent_runs_against_a_local_server() {
    run("openai_agent", None).await;
}

#[tokio::test]
async fn genai_agent_runs_against_a_local_openai_compatible_server() {
    run("genai_agent", None).await;
}

#[tokio::test]
async fn genai_agent_runs_against_a_local_anthropic_server() {
    let out = run("genai_agent", Some("anthropic")).await;
    assert!(out.contains("(anthropic, through genai)"), "{out}");
}

#[tokio::test]
async fn rig_agent_runs_against_a_local_openai_compatible_server() {
    let out = run("rig_agent", None).await;
    assert!(out.contains("search -> advanced"), "{out}");
    assert!(out.contains("reflect -> completed"), "{out}");
    assert!(out.contains("answer (step ResearchMode at 3)"), "{out}");
}

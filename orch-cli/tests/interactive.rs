//! `orch simulate FILE` with a terminal on stdin is an interactive session. This test
//! drives it as a person would: a real terminal (tmux), typed lines, and the screen read
//! back. Without tmux the test says so and passes, except under `CI=true`.

use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let out = Command::new("tmux").args(args).output().expect("tmux runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits (bounded) until the screen shows `what`; returns the screen.
fn wait_for(session: &str, what: &str) -> String {
    let start = Instant::now();
    loop {
        let screen = tmux(&["capture-pane", "-p", "-t", session, "-S", "-100"]);
        if screen.contains(what) {
            return screen;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "never saw {what:?}; screen:\n{screen}"
        );
        sleep(Duration::from_millis(50));
    }
}

fn send(session: &str, line: &str) {
    tmux(&["send-keys", "-t", session, "-l", line]);
    tmux(&["send-keys", "-t", session, "Enter"]);
}

#[test]
#[ignore = "needs tmux: `cargo xtask test` installs it and runs this"]
fn interactive_session_in_a_real_terminal() {
    assert!(
        Command::new("tmux").arg("-V").output().is_ok(),
        "tmux is not installed: `cargo xtask test` installs it"
    );
    let session = format!("orch-test-{}", std::process::id());
    let template = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/agents/cognitive-reasoner/template.json"
    );
    let cmd = format!("{} simulate {template}", env!("CARGO_BIN_EXE_orch"));
    let started = Command::new("tmux")
        .args([
            "new-session",
            "-d",
            "-s",
            &session,
            "-x",
            "160",
            "-y",
            "50",
            &cmd,
        ])
        .status()
        .expect("tmux starts");
    assert!(started.success());
    let result = std::panic::catch_unwind(|| {
        wait_for(&session, "step: DefaultMode");
        send(&session, "Research the impact of AI on jobs");
        let screen = wait_for(&session, "step: ResearchMode  sequence: 0/3");
        assert!(screen.contains("allowed: search"), "{screen}");
        send(&session, "/tool think");
        wait_for(&session, "think: out_of_sequence (the sequence of step `ResearchMode` expects `search` at position 0)");
        send(&session, "/tool search");
        let screen = wait_for(&session, "search: advanced");
        assert!(screen.contains("sequence: 1/3"), "{screen}");
        send(&session, "/available reflect");
        wait_for(&session, "blocked on: think");
        send(&session, "/frobnicate");
        wait_for(&session, "unknown command /frobnicate");
        send(&session, "/quit");
    });
    let _ = Command::new("tmux")
        .args(["kill-session", "-t", &session])
        .status();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

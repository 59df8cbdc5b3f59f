//! The attacked-assistant examples run to the end: each asserts, as it goes, which
//! injected calls were refused with no human, which were asked about (and with which
//! origins shown), and that only the user's own calls ran.

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
        "{} is not built: `cargo test -p orch-examples` builds the examples",
        path.display()
    );
    path
}

fn run(name: &str) -> String {
    let out = Command::new(example(name))
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn the_office_assistant_stops_injected_text_from_a_mail_a_file_and_a_page() {
    let out = run("office_assistant");
    assert!(out.contains("it breaks rule `known-recipient`"), "{out}");
    assert!(
        out.contains("`/url` \"https://evil.example/collect?d=rent\": seen only in untrusted results of `fetch_page`"),
        "{out}"
    );
    assert!(
        out.contains("`/to` \"eve@evil.example\": seen only in untrusted results of `read_file`"),
        "{out}"
    );
}

#[test]
fn the_payments_assistant_refuses_the_injected_calls() {
    let out = run("payments_assistant");
    assert!(out.contains("it breaks rule `known-recipient`"), "{out}");
    assert!(out.contains("it breaks rule `bank-pages-only`"), "{out}");
}

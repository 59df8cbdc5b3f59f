//! Compiles template files and prints their diagnostics, rustc-style:
//! `cargo run -p orch-codegen --example check_files -- path/to/template.json ...`
use std::path::Path;

fn main() {
    let mut failed = false;
    for path in std::env::args().skip(1) {
        let source = match std::fs::read_to_string(&path) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {path}: {e}");
                failed = true;
                continue;
            }
        };
        let fallback = orch_codegen::fallback_name(Path::new(&path));
        let compiled = orch_codegen::compile_json(&source, fallback.as_deref());
        for d in &compiled.diagnostics {
            println!(
                "{}",
                orch_codegen::diagnostic::render(d, &path, &source, false)
            );
        }
        failed |= compiled.has_errors();
        println!("{path}: {} diagnostic(s)", compiled.diagnostics.len());
    }
    std::process::exit(i32::from(failed));
}

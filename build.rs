//! Compiles the example agents (examples/agents/*/template.json) and the test machines
//! (tests/fixtures/machines/*.json) into `$OUT_DIR/orch/`, for `include_machine!`.

use std::path::PathBuf;

fn json_files(dir: &str, nested: bool) -> Vec<PathBuf> {
    println!("cargo:rerun-if-changed={dir}");
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .map(|p| if nested { p.join("template.json") } else { p })
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

fn main() {
    let mut templates = json_files("examples/agents", true);
    templates.extend(json_files("tests/fixtures/machines", false));
    orch_build::Builder::new()
        .templates(&templates)
        .compile()
        .expect("orchestration templates");
}

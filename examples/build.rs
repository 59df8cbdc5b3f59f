//! Compiles the example agents (`agents/*/template.json`) into `$OUT_DIR/orch/`, for
//! `orch::include_machine!`, as a user's build.rs would.

fn main() {
    println!("cargo:rerun-if-changed=agents");
    let mut templates: Vec<std::path::PathBuf> = std::fs::read_dir("agents")
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path().join("template.json"))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    templates.sort();
    orch_build::Builder::new()
        .templates(&templates)
        .compile()
        .expect("orchestration templates");
}

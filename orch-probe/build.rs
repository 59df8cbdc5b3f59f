//! Compiles the three machines the probe drives (two of the repository's test fixtures and the cognitive reasoner example) into
//! `$OUT_DIR/orch/`, for `include_machine!`.

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let machines = root.join("tests").join("fixtures").join("machines");
    let mut templates = ["sequence-shaped.json", "messages-40.json"]
        .map(|name| machines.join(name))
        .to_vec();
    templates.push(root.join("examples/agents/cognitive-reasoner/template.json"));
    for t in &templates {
        println!("cargo:rerun-if-changed={}", t.display());
    }
    orch_build::Builder::new()
        .templates(&templates)
        .runtime_path("::orch_runtime")
        .compile()
        .expect("the probe's machines compile");
}

//! Compiles the two machines the probe drives (the repository's test fixtures) into
//! `$OUT_DIR/orch/`, for `include_machine!`.

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let machines = root.join("tests").join("fixtures").join("machines");
    let templates = ["sequence-shaped.json", "messages-40.json"].map(|name| machines.join(name));
    for t in &templates {
        println!("cargo:rerun-if-changed={}", t.display());
    }
    orch_build::Builder::new()
        .templates(&templates)
        .runtime_path("::orch_runtime")
        .compile()
        .expect("the probe's machines compile");
}

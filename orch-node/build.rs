//! Links the addon as Node-API expects (and, for `wasm32-wasip1-threads`, with emnapi).
fn main() {
    napi_build::setup();
}

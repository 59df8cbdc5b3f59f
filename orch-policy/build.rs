//! Generates the ExtMcp messages and service (prost + tonic) from proto/ext_mcp.proto.
//! The .proto is compiled by protox, in Rust: building needs no `protoc`.

fn main() {
    println!("cargo:rerun-if-changed=proto/ext_mcp.proto");
    let files =
        protox::compile(["proto/ext_mcp.proto"], ["proto"]).expect("proto/ext_mcp.proto compiles");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(files)
        .expect("the ExtMcp code generates");
}

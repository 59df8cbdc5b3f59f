//! orch as agentgateway's ExtMcp policy server (`orch policy`): the gRPC wire contract,
//! generated from this crate's proto/ext_mcp.proto (the same package, service,
//! messages and field numbers as agentgateway v1.4.1's `ext_mcp.proto`).
#![deny(missing_docs)]

/// The ExtMcp messages (prost) and the service's client and server (tonic), package
/// `agentgateway.dev.ext_mcp`.
#[allow(missing_docs, clippy::all)]
pub mod wire {
    tonic::include_proto!("agentgateway.dev.ext_mcp");
}

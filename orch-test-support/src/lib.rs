//! What orch's tests and benchmarks share across crates, in one place instead of files
//! included from another crate's `tests/` (not published):
//!
//! - [`redis`]: a real `redis-server` on a free loopback port;
//! - [`cluster`]: a real six-node Redis Cluster;
//! - [`pacing`]: open-loop load (calls started on schedule) and its percentiles;
//! - [`templates`]: the benchmarks' generated templates;
//! - [`scratch`]: a test's own temporary directory, removed when the test is done;
//! - `ext_mcp` (feature `ext-mcp`): `orch policy` servers and a client that drives both
//!   ExtMcp phases as agentgateway does;
//! - `mcp_load` (feature `mcp-load`): rmcp tool servers on loopback HTTP, a proxy that
//!   forwards bytes, client sessions and the open and closed loops of the MCP gateway
//!   benchmarks;
//! - `otel` (feature `otel`): attributes of exported OpenTelemetry spans;
//! - `events` (feature `events`): proptest strategies for event streams and random
//!   templates, and a deterministic runner;
//! - `traffic` (feature `traffic`): decision logs of recorded traffic, for the rollout
//!   tools.
//!
//! Every process it starts is stopped when its handle is dropped, however a test ends.

#![deny(missing_docs)]

pub mod cluster;
#[cfg(feature = "events")]
pub mod events;
#[cfg(feature = "ext-mcp")]
pub mod ext_mcp;
#[cfg(feature = "mcp-load")]
pub mod mcp_load;
#[cfg(feature = "otel")]
pub mod otel;
pub mod pacing;
pub mod redis;
pub mod scratch;
pub mod templates;
#[cfg(feature = "traffic")]
pub mod traffic;

//! What the in-process gateway tests share: a gateway on `template` in front of an rmcp
//! tool server, each end over an in-memory pipe.

use orch_mcp::{Gateway, GatewayError, Options};
use orch_store::MemoryStore;
use rmcp::ServerHandler;
use tokio::io::DuplexStream;
use tokio::task::JoinHandle;

/// Serves `upstream` in-process and a gateway on `template` in front of it: the
/// client's end of the gateway's pipe, and the task serving the gateway.
pub async fn gateway_over_pipes<U: ServerHandler>(
    template: &str,
    upstream: U,
) -> (DuplexStream, JoinHandle<Result<(), GatewayError>>) {
    let machine = orch_codegen::compile_json(template, None)
        .to_machine()
        .expect("the template compiles");
    let (to_upstream, upstream_end) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(running) = rmcp::serve_server(upstream, upstream_end).await {
            let _ = running.waiting().await;
        }
    });
    let gateway = Gateway::start_on(
        machine,
        to_upstream,
        "the in-process server",
        MemoryStore::new(),
        &Options::default(),
    )
    .await
    .expect("the gateway starts");
    let (client_end, gateway_end) = tokio::io::duplex(1 << 16);
    let (read, write) = tokio::io::split(gateway_end);
    (client_end, tokio::spawn(gateway.serve_io(read, write)))
}

/// A gateway on `template` in front of the Streamable HTTP upstream at `upstream`
/// (sessions in memory), served over HTTP on a free loopback port: its URL.
pub async fn gateway_over_http(template: &str, upstream: &str) -> String {
    gateway_over_http_on(template, upstream, MemoryStore::new()).await
}

/// [`gateway_over_http`] with the sessions in `store`.
pub async fn gateway_over_http_on<S: orch_store::SessionStore + 'static>(
    template: &str,
    upstream: &str,
    store: S,
) -> String {
    let machine = orch_codegen::compile_json(template, None)
        .to_machine()
        .expect("the template compiles");
    let gateway = Gateway::start(
        machine,
        &orch_mcp::Upstream::Url(upstream.to_owned()),
        store,
        &Options::default(),
    )
    .await
    .expect("the gateway starts");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}/mcp", listener.local_addr().expect("its address"));
    tokio::spawn(async move {
        gateway
            .serve_http(listener, &orch_mcp::HttpOptions::default())
            .await
    });
    url
}

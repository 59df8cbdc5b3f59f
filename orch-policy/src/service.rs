//! The tonic face of the engine: the `agentgateway.dev.ext_mcp.ExtMcp` gRPC service.

use crate::wire::ext_mcp_server::{ExtMcp, ExtMcpServer};
use crate::wire::{McpRequest, McpRequestResult, McpResponse, McpResponseResult};
use crate::{PolicyError, PolicyServer};
use orch_store::SessionStore;
use std::future::Future;
use std::time::Duration;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl<S: SessionStore + 'static> ExtMcp for PolicyServer<S> {
    async fn check_request(
        &self,
        request: Request<McpRequest>,
    ) -> Result<Response<McpRequestResult>, Status> {
        Ok(Response::new(
            self.engine.check_request(request.into_inner()).await,
        ))
    }

    async fn check_response(
        &self,
        request: Request<McpResponse>,
    ) -> Result<Response<McpResponseResult>, Status> {
        Ok(Response::new(
            self.engine.check_response(request.into_inner()).await,
        ))
    }
}

/// How long checks under way may take to finish once shutdown is asked for (a gateway
/// keeps its connection open, so the server does not wait for connections to close).
const GRACE: Duration = Duration::from_secs(3);

/// Serves `server` on `listener` (HTTP/2, no TLS: run it next to the gateway, or behind
/// a mesh that encrypts) until `shutdown` completes, then lets the checks under way
/// finish (at most [`GRACE`]).
pub(crate) async fn serve<S: SessionStore + 'static>(
    server: PolicyServer<S>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), PolicyError> {
    let limit = server.engine.options.max_message_bytes;
    let service = ExtMcpServer::new(server)
        .max_decoding_message_size(limit)
        .max_encoding_message_size(limit);
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let (asked, stopping) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        shutdown.await;
        let _ = asked.send(());
    };
    let served = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, shutdown);
    let grace = async move {
        match stopping.await {
            Ok(()) => tokio::time::sleep(GRACE).await,
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        served = served => served
            .map_err(|e| PolicyError::Io(format!("the ExtMcp gRPC server failed: {e}"))),
        () = grace => Ok(()),
    }
}

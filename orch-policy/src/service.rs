//! The tonic face of the engine: the `agentgateway.dev.ext_mcp.ExtMcp` gRPC service.

use crate::wire::ext_mcp_server::{ExtMcp, ExtMcpServer};
use crate::wire::{McpRequest, McpRequestResult, McpResponse, McpResponseResult};
use crate::{PolicyError, PolicyServer};
use orch_store::SessionStore;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::transport::server::{Connected, TcpConnectInfo};
use tonic::{Request, Response, Status};

#[tonic::async_trait]
impl<S: SessionStore + 'static> ExtMcp for PolicyServer<S> {
    async fn check_request(
        &self,
        request: Request<McpRequest>,
    ) -> Result<Response<McpRequestResult>, Status> {
        let parent = crate::telemetry::parent(request.metadata());
        Ok(Response::new(
            self.engine
                .check_request(request.into_inner(), &parent)
                .await,
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
    let options = server.engine.options.clone();
    let service = ExtMcpServer::new(server)
        .max_decoding_message_size(limit)
        .max_encoding_message_size(limit);
    let incoming = limited(
        listener,
        options.max_connections.max(1),
        options.handshake_timeout,
        options.idle_timeout,
    );
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
            .map_err(|e| PolicyError::Serve(Box::new(e))),
        () = grace => Ok(()),
    }
}

/// The connections `listener` accepts, at most `max` open at once (one more is closed at
/// once), each closed when it sends nothing within `handshake` of being accepted or
/// stays silent for `idle` later.
fn limited(
    listener: tokio::net::TcpListener,
    max: usize,
    handshake: Duration,
    idle: Duration,
) -> tokio_stream::wrappers::ReceiverStream<std::io::Result<Limited>> {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let permits = Arc::new(Semaphore::new(max));
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    // Out of file descriptors, a connection reset before it was
                    // accepted: keep serving the others.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                },
                () = tx.closed() => return,
            };
            let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let connection = Limited {
                stream,
                _permit: permit,
                quiet: Box::pin(tokio::time::sleep(handshake)),
                idle,
                heard: false,
            };
            if tx.send(Ok(connection)).await.is_err() {
                return;
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

/// An accepted connection that holds one of the connection permits and ends when it
/// stays silent too long.
pub(crate) struct Limited {
    stream: tokio::net::TcpStream,
    _permit: OwnedSemaphorePermit,
    /// Fires when the connection has been silent too long.
    quiet: Pin<Box<tokio::time::Sleep>>,
    idle: Duration,
    /// Whether the peer has sent a byte yet. Until it has, only the handshake deadline
    /// runs: the server's own first writes (its HTTP/2 SETTINGS, sent on accept) are not
    /// the peer saying anything, and must not turn the handshake deadline into the idle
    /// one.
    heard: bool,
}

impl Limited {
    /// Bytes went one way or the other: the connection is not idle. Before the peer has
    /// sent anything, the handshake deadline stands.
    fn active(&mut self) {
        if !self.heard {
            return;
        }
        let deadline = tokio::time::Instant::now() + self.idle;
        self.quiet.as_mut().reset(deadline);
    }

    /// The peer sent bytes: from now on the idle deadline runs.
    fn heard(&mut self) {
        self.heard = true;
        self.active();
    }
}

impl Connected for Limited {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Limited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(result) => {
                if buf.filled().len() > before {
                    self.heard();
                }
                Poll::Ready(result)
            }
            Poll::Pending => match self.quiet.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the connection stayed silent too long",
                ))),
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Limited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.active();
        }
        written
    }

    /// Vectored, as the socket is: HTTP/2 writes a frame's header and its payload in one
    /// `writev` (one packet on a `TCP_NODELAY` socket) instead of one write each.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(written, Poll::Ready(Ok(n)) if n > 0) {
            self.active();
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection writes vectored when its socket can: without it, HTTP/2 sends a
    /// frame's header and payload as two writes (two packets with `TCP_NODELAY`).
    #[tokio::test]
    async fn a_limited_connection_writes_vectored() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut incoming = limited(listener, 1, Duration::from_secs(5), Duration::from_secs(5));
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let connection = tokio_stream::StreamExt::next(&mut incoming)
            .await
            .expect("a connection")
            .expect("accepted");
        assert!(connection.stream.is_write_vectored());
        assert!(connection.is_write_vectored());
    }
}

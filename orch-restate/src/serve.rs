//! Serving the endpoint over HTTP/2, with `TCP_NODELAY` on every connection.
//!
//! restate-server and the service exchange small HTTP/2 frames in both directions
//! within one invocation (a journal entry proposed, its acknowledgement, the next
//! entry). With Nagle's algorithm on, a frame written while the previous one is not yet
//! acknowledged waits for that acknowledgement, which the peer delays by up to 40 ms:
//! with the SDK's own server, which leaves Nagle on, a third of `OrchRun/call`s (two
//! journaled steps each) took over 40 ms. This one turns it off.

use restate_sdk::hyper::HyperEndpoint;
use restate_sdk::prelude::Endpoint;
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpListener;

/// How long a stopping server waits for invocations in flight to end.
const GRACE: Duration = Duration::from_secs(10);

/// Serves `endpoint` (e.g. [`Runs::endpoint`](crate::Runs::endpoint)) over HTTP/2 on
/// `listener`, with `TCP_NODELAY` on every
/// connection, until `shutdown` resolves; then waits up to 10 s for the invocations in
/// flight to end. [`Runs::serve`](crate::Runs::serve) is this on an address, until
/// Ctrl-C.
pub async fn serve_endpoint(
    endpoint: Endpoint,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) {
    let endpoint = HyperEndpoint::new(endpoint);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    configure(&stream);
                    let connection = hyper::server::conn::http2::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    )
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), endpoint.clone());
                    let connection = graceful.watch(connection);
                    tokio::spawn(async move {
                        // A connection that fails is restate-server's to retry.
                        let _ = connection.await;
                    });
                }
                // Out of file descriptors or a connection reset before it was taken:
                // the listener stays open; wait a little rather than spin.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            () = &mut shutdown => break,
        }
    }
    let _ = tokio::time::timeout(GRACE, graceful.shutdown()).await;
}

/// A connection just accepted: Nagle off (best effort: a socket that refuses the option
/// is still served).
fn configure(stream: &tokio::net::TcpStream) {
    let _ = stream.set_nodelay(true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_accepted_connection_has_nagle_off() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let _client = tokio::net::TcpStream::connect(address).await.unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        assert!(!stream.nodelay().unwrap(), "Nagle is on by default");
        configure(&stream);
        assert!(stream.nodelay().unwrap());
    }
}

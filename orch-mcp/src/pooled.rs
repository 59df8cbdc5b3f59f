//! Keep-alive connections to a plain-HTTP upstream for `tools/call`, safe against a
//! server that leaves Nagle's algorithm on.
//!
//! The MCP SDK's client opens a connection per request: on a kept-alive connection, an
//! upstream whose server leaves Nagle on (axum's and hyper's default) holds each small
//! write after the first until the gateway acknowledges the previous one, which Linux
//! delays by up to 40 ms once a connection has left its first exchanges — an event
//! stream's answer after its priming event, the stream's last chunk. A connection per
//! request never leaves the kernel's quick-acknowledgement start, so it never stalls;
//! it pays a connect, an accept and a close per call instead.
//!
//! This client keeps connections (one per call in flight, per upstream session) and
//! acknowledges at once: `TCP_QUICKACK` is set again after every read (the kernel clears
//! it on its own), so the upstream's next write leaves as soon as the gateway has read
//! the one before. `TCP_NODELAY` is on for the gateway's own writes. It serves plain
//! `http://` upstreams reached without a proxy; the SDK's client serves the rest.

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::TcpStream;

/// How long an idle kept-alive connection is kept.
const IDLE: Duration = Duration::from_secs(30);

/// A keep-alive HTTP/1 client for plain-HTTP upstreams ([module docs](self)).
#[derive(Clone)]
pub(crate) struct Pooled {
    client: Client<QuickAckConnector, Full<Bytes>>,
}

impl Pooled {
    /// A pool, or `None` where requests must go through a proxy (`HTTP_PROXY`,
    /// `ALL_PROXY` and their lowercase forms, which the SDK's client honours).
    pub(crate) fn unless_proxied() -> Option<Pooled> {
        (!proxied(|name| std::env::var_os(name))).then(Pooled::new)
    }

    fn new() -> Pooled {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        http.enforce_http(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(IDLE)
            .build(QuickAckConnector(http));
        Pooled { client }
    }

    /// Sends `request` on a kept-alive connection (or a new one).
    pub(crate) async fn send(
        &self,
        request: http::Request<Full<Bytes>>,
    ) -> Result<http::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error> {
        self.client.request(request).await
    }
}

/// Whether the environment `var` reads names a proxy for plain-HTTP requests.
fn proxied(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
        .iter()
        .any(|name| var(name).is_some_and(|v| !v.is_empty()))
}

/// Connects as hyper's connector does, handing out [`QuickAck`] streams.
#[derive(Clone)]
struct QuickAckConnector(HttpConnector);

impl tower_service::Service<http::Uri> for QuickAckConnector {
    type Response = QuickAck;
    type Error = <HttpConnector as tower_service::Service<http::Uri>>::Error;
    type Future = Pin<Box<dyn Future<Output = Result<QuickAck, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let connecting = self.0.call(uri);
        Box::pin(async move { connecting.await.map(QuickAck) })
    }
}

/// A TCP stream that acknowledges what it read at once.
struct QuickAck(TokioIo<TcpStream>);

impl QuickAck {
    /// Asks the kernel to acknowledge received data now and until it next decides to
    /// delay (best effort: where the option is missing, reads are as before).
    fn acknowledge(&self) {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let _ = socket2::SockRef::from(self.0.inner()).set_tcp_quickack(true);
        }
    }
}

impl hyper::rt::Read for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        let read = Pin::new(&mut self.0).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = read {
            self.acknowledge();
        }
        read
    }
}

impl hyper::rt::Write for QuickAck {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl Connection for QuickAck {
    fn connected(&self) -> Connected {
        self.0.connected()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An upstream as a small server writes one: Nagle on, the answer an event stream in
    /// three writes (head, event, end). Counts the connections it accepts.
    async fn upstream(accepted: Arc<AtomicUsize>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                accepted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    loop {
                        // A request: its head, then the body its content-length names.
                        let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") else {
                            match stream.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => seen.extend_from_slice(&buf[..n]),
                            }
                            continue;
                        };
                        let head = String::from_utf8_lossy(&seen[..end]).to_lowercase();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse().unwrap());
                        if seen.len() < end + 4 + length {
                            match stream.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => seen.extend_from_slice(&buf[..n]),
                            }
                            continue;
                        }
                        seen.drain(..end + 4 + length);
                        let event = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n";
                        let writes = [
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n".to_owned(),
                            format!("{:x}\r\n{event}\r\n", event.len()),
                            "0\r\n\r\n".to_owned(),
                        ];
                        for w in writes {
                            if stream.write_all(w.as_bytes()).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        format!("http://{address}/mcp")
    }

    #[tokio::test]
    async fn calls_in_turn_share_one_connection() {
        let accepted = Arc::new(AtomicUsize::new(0));
        let url = upstream(Arc::clone(&accepted)).await;
        let pooled = Pooled::new();
        for _ in 0..5 {
            let request = http::Request::post(url.as_str())
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from_static(b"{}")))
                .unwrap();
            let response = pooled.send(request).await.unwrap();
            assert_eq!(response.status(), 200);
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert!(body.starts_with(b"data: "), "{body:?}");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_proxy_for_plain_http_turns_the_pool_off() {
        let only = |set: &'static str, value: &'static str| {
            move |name: &str| (name == set).then(|| std::ffi::OsString::from(value))
        };
        assert!(!proxied(|_| None));
        assert!(proxied(only("http_proxy", "http://proxy:3128")));
        assert!(proxied(only("HTTP_PROXY", "http://proxy:3128")));
        assert!(proxied(only("all_proxy", "socks5://proxy:1080")));
        assert!(!proxied(only("HTTP_PROXY", "")));
        // A proxy for TLS only leaves plain HTTP direct, as the SDK's client does.
        assert!(!proxied(only("HTTPS_PROXY", "http://proxy:3128")));
    }
}

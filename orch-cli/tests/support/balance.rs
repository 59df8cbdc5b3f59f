//! Load balancers for tests of several `orch mcp` instances sharing one store: one that
//! spreads connections round robin (as a TCP balancer in front of a deployment would),
//! and one that sends each HTTP request to an instance chosen by its kind, so that a
//! test knows which instance serves what.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A TCP balancer on a free port that hands each connection to the next of `to`.
pub fn round_robin(to: Vec<String>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the balancer");
    let addr = listener.local_addr().expect("its address").to_string();
    let next = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for client in listener.incoming().map_while(Result::ok) {
            let target = &to[next.fetch_add(1, Ordering::Relaxed) % to.len()];
            let Ok(server) = TcpStream::connect(target) else {
                continue;
            };
            pipe(client, server);
        }
    });
    addr
}

/// Copies bytes both ways between `a` and `b` until either side closes.
fn pipe(a: TcpStream, b: TcpStream) {
    let copy = |mut from: TcpStream, mut to: TcpStream| {
        std::thread::spawn(move || {
            let mut buf = [0u8; 16 * 1024];
            loop {
                match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        if to.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
            let _ = to.shutdown(std::net::Shutdown::Write);
        });
    };
    if let (Ok(a2), Ok(b2)) = (a.try_clone(), b.try_clone()) {
        copy(a, b2);
        copy(b, a2);
    }
}

/// Where [`by_kind`] sends each request.
pub struct Split {
    /// `GET` (a session's standalone stream).
    pub streams: String,
    /// A `POST` of a request (a JSON body with a `method` and an `id`), and every other
    /// method (`DELETE`).
    pub requests: String,
    /// A `POST` of a notification (a `method` without an `id`: `notifications/initialized`,
    /// cancellations).
    pub notifications: String,
    /// A `POST` of anything else: a client's answer to a question the server asked.
    pub answers: String,
}

/// An HTTP/1.1 balancer on a free port that sends each request to the instance
/// [`Split`] names for its kind, one request per connection (it asks for
/// `Connection: close`). Request bodies must come with a `Content-Length`.
pub fn by_kind(split: Split) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the balancer");
    let addr = listener.local_addr().expect("its address").to_string();
    let split = Arc::new(split);
    std::thread::spawn(move || {
        for client in listener.incoming().map_while(Result::ok) {
            let split = Arc::clone(&split);
            std::thread::spawn(move || {
                let _ = forward_one(client, &split);
            });
        }
    });
    addr
}

/// Reads one request from `client`, sends it on, and copies the answer back.
fn forward_one(mut client: TcpStream, split: &Split) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = client.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = &buf[head_end..head_end + length];
    let target = match head.split(' ').next() {
        Some("GET") => &split.streams,
        Some("POST") => {
            let message = serde_json::from_slice::<Value>(body).ok();
            let has = |key: &str| message.as_ref().is_some_and(|v| v.get(key).is_some());
            match (has("method"), has("id")) {
                (true, true) => &split.requests,
                (true, false) => &split.notifications,
                (false, _) => &split.answers,
            }
        }
        _ => &split.requests,
    };
    let mut rewritten = String::new();
    for line in head.split("\r\n").filter(|l| !l.is_empty()) {
        let connection = line
            .split_once(':')
            .is_some_and(|(name, _)| name.eq_ignore_ascii_case("connection"));
        if !connection {
            rewritten.push_str(line);
            rewritten.push_str("\r\n");
        }
    }
    rewritten.push_str("Connection: close\r\n\r\n");
    let mut server = TcpStream::connect(target)?;
    server.write_all(rewritten.as_bytes())?;
    server.write_all(body)?;
    std::io::copy(&mut server, &mut client)?;
    client.shutdown(std::net::Shutdown::Both)
}

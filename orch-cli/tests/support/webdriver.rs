//! Headless Chromium driven over WebDriver (Debian's `chromium` and `chromium-driver`):
//! a `chromedriver` on a free port and one browser session, ended when dropped.

use super::{free_port, temp_dir, wait_for_port, Guard};
use base64::Engine;
use orch_test_support::scratch::Scratch;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The key WebDriver names an element by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A browser session.
pub struct Browser {
    _driver: Guard,
    _profile: Scratch,
    addr: String,
    session: String,
}

impl Browser {
    /// Headless Chromium (a fresh profile, no background networking: the machine has no
    /// internet), as `chromedriver` starts it.
    pub fn start() -> Browser {
        for program in ["chromium", "chromedriver"] {
            assert!(
                Command::new(program).arg("--version").output().is_ok(),
                "{program} is not installed: `cargo xtask test` installs it"
            );
        }
        let port = free_port();
        let driver = Guard(
            Command::new("chromedriver")
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start chromedriver"),
        );
        wait_for_port(port, Duration::from_secs(30), "chromedriver");
        let profile = temp_dir("chromium-profile");
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--window-size=1100,900".to_owned(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let addr = format!("127.0.0.1:{port}");
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
        }}});
        let created = call(&addr, "POST", "/session", Some(capabilities));
        let session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {created}"))
            .to_owned();
        Browser {
            _driver: driver,
            _profile: profile,
            addr,
            session,
        }
    }

    fn at(&self, path: &str) -> String {
        format!("/session/{}{path}", self.session)
    }

    /// Opens `url`.
    pub fn open(&self, url: &str) {
        call(
            &self.addr,
            "POST",
            &self.at("/url"),
            Some(json!({"url": url})),
        );
    }

    /// The address of the page it shows.
    pub fn url(&self) -> String {
        call(&self.addr, "GET", &self.at("/url"), None)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The elements `css` selects now.
    pub fn all(&self, css: &str) -> Vec<String> {
        let found = call(
            &self.addr,
            "POST",
            &self.at("/elements"),
            Some(json!({"using": "css selector", "value": css})),
        );
        found
            .as_array()
            .map(|all| {
                all.iter()
                    .filter_map(|e| e[ELEMENT].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The one element `css` selects (the first).
    pub fn one(&self, css: &str) -> String {
        self.all(css)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("no element `{css}` on the page:\n{}", self.source()))
    }

    /// Types `text` into `element` (`\u{e007}` is Enter).
    pub fn type_into(&self, element: &str, text: &str) {
        let path = self.at(&format!("/element/{element}/value"));
        call(&self.addr, "POST", &path, Some(json!({"text": text})));
    }

    /// Clicks `element`.
    pub fn click(&self, element: &str) {
        let path = self.at(&format!("/element/{element}/click"));
        call(&self.addr, "POST", &path, Some(json!({})));
    }

    /// The element's visible text.
    pub fn text(&self, element: &str) -> String {
        let path = self.at(&format!("/element/{element}/text"));
        call(&self.addr, "GET", &path, None)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The page's HTML as the browser holds it.
    pub fn source(&self) -> String {
        call(&self.addr, "GET", &self.at("/source"), None)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// A PNG of the window.
    pub fn screenshot(&self) -> Vec<u8> {
        let shot = call(&self.addr, "GET", &self.at("/screenshot"), None);
        base64::engine::general_purpose::STANDARD
            .decode(shot.as_str().unwrap_or_default())
            .expect("a base64 PNG")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let path = format!("/session/{}", self.session);
        let _ = exchange(&self.addr, "DELETE", &path, b"");
    }
}

/// One WebDriver command: its `value`, or a panic with the driver's error.
fn call(addr: &str, method: &str, path: &str, body: Option<Value>) -> Value {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let (status, reply) = exchange(addr, method, path, body.as_bytes())
        .unwrap_or_else(|e| panic!("chromedriver did not answer {method} {path}: {e}"));
    let answer: Value = serde_json::from_slice(&reply).unwrap_or_else(|_| {
        panic!(
            "chromedriver answered {method} {path} with {}",
            String::from_utf8_lossy(&reply)
        )
    });
    assert!(
        status < 300,
        "chromedriver refused {method} {path} ({status}): {answer}"
    );
    answer["value"].clone()
}

/// One HTTP/1.1 request, its answer read to its `Content-Length` (chromedriver keeps
/// the connection open).
fn exchange(addr: &str, method: &str, path: &str, body: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut length = 0;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut reply = vec![0; length];
    reader.read_exact(&mut reply)?;
    Ok((status, reply))
}

//! The approvals API of a policy server (`PolicyServer::approvals`) against what a
//! careless or hostile caller sends: no credential, another role's, bodies that are not
//! an answer, oversized ones, unknown questions; and a question whose tool name and
//! arguments carry markup and control characters is served as JSON, byte for byte.

use orch_approvals::{Approvers, Role};
use orch_policy::{Options, PolicyServer, Posting};
use orch_store::MemoryStore;
use orch_test_support::ext_mcp::{Gateway, GATED_REFUND};
use serde_json::{json, Value};
use std::sync::Arc;

const FINANCE: &str = "finance-0123456789abcdef";
const AUDITOR: &str = "auditor-0123456789abcdef";

/// A policy server posting questions, its approvals API's URL, and a gateway client.
async fn served() -> (String, Gateway) {
    let compiled = orch_codegen::compile_json(GATED_REFUND, None);
    let options = Options {
        approvals: Some(Posting::default()),
        ..Options::default()
    };
    let server = PolicyServer::new(&compiled, MemoryStore::new(), options).unwrap();
    let approvers = Approvers::new()
        .token("finance", Role::Approver, FINANCE)
        .token("auditor", Role::Viewer, AUDITOR);
    let api = server.approvals(Arc::new(approvers));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(orch_approvals::serve(listener, api, std::future::pending()));
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_url = format!("http://{}", grpc.local_addr().unwrap());
    tokio::spawn(server.serve(grpc, std::future::pending()));
    (api_url, Gateway::connect(&grpc_url, "alice").await)
}

async fn send(
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
    body: Option<Vec<u8>>,
) -> (u16, Value, reqwest::header::HeaderMap) {
    let mut request = reqwest::Client::new().request(method, url);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body);
    }
    let response = request.send().await.expect("the API answers");
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    let bytes = response.bytes().await.unwrap();
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| json!({"raw": String::from_utf8_lossy(&bytes)}));
    (status, body, headers)
}

#[tokio::test]
async fn bad_requests_get_a_clear_error_and_answer_nothing() {
    let (api, mut gw) = served().await;
    gw.run_tool("lookup_order").await.unwrap();
    let hostile = json!({"note": "<script>alert(1)</script>\u{1b}[31m\u{202e}", "amount": 5});
    let asked = gw.call("issue_refund", hostile.clone()).await;
    let id = asked.data()["approval"]["question"]
        .as_str()
        .unwrap()
        .to_owned();
    let one = format!("{api}/v1/approvals/{id}");
    use reqwest::Method;

    // Who may ask.
    let (status, body, headers) =
        send(Method::GET, &format!("{api}/v1/approvals"), None, None).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(headers["www-authenticate"], "Bearer");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer"),
        "{body}"
    );
    let (status, _, _) = send(Method::GET, &one, Some("guess-guess-guess-guess"), None).await;
    assert_eq!(status, 401);
    let approve = br#"{"decision": "approve"}"#.to_vec();
    let (status, body, _) = send(Method::POST, &one, Some(AUDITOR), Some(approve.clone())).await;
    assert_eq!(status, 403, "{body}");

    // What an answer must be.
    for (sent, says) in [
        (b"{not json".to_vec(), "the body must be"),
        (
            br#"{"decision": "approve", "extra": 1}"#.to_vec(),
            "unknown field",
        ),
        (
            br#"{"decision": "maybe"}"#.to_vec(),
            "neither `approve` nor `reject`",
        ),
        (
            format!(
                r#"{{"decision": "reject", "reason": "{}"}}"#,
                "x".repeat(3000)
            )
            .into_bytes(),
            "longer than 2048 bytes",
        ),
    ] {
        let (status, body, _) = send(Method::POST, &one, Some(FINANCE), Some(sent)).await;
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].as_str().unwrap().contains(says), "{body}");
    }
    let huge = format!(
        r#"{{"decision": "approve", "reason": "{}"}}"#,
        "y".repeat(20_000)
    );
    let (status, _, _) = send(Method::POST, &one, Some(FINANCE), Some(huge.into_bytes())).await;
    assert_eq!(status, 413);
    let (status, body, _) = send(
        Method::POST,
        &format!("{api}/v1/approvals/q-0000000000000000"),
        Some(FINANCE),
        Some(approve.clone()),
    )
    .await;
    assert_eq!(status, 404, "{body}");

    // Nothing of that answered the question; it is served as data, byte for byte.
    let (status, question, _) = send(Method::GET, &one, Some(AUDITOR), None).await;
    assert_eq!(status, 200);
    assert_eq!(question["state"], "pending");
    let arguments: Value = serde_json::from_str(question["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, hostile);
    let (status, answered, _) = send(Method::POST, &one, Some(FINANCE), Some(approve)).await;
    assert_eq!(
        (status, &answered["state"]),
        (200, &json!("approved")),
        "{answered}"
    );
}

#[tokio::test]
async fn the_list_filters_by_state_tool_and_run() {
    let (api, mut gw) = served().await;
    gw.run_tool("lookup_order").await.unwrap();
    let id = gw.call("issue_refund", json!({"amount": 1})).await.data()["approval"]["question"]
        .as_str()
        .unwrap()
        .to_owned();
    let list = |query: &str| format!("{api}/v1/approvals{query}");
    let count = |body: &Value| body["questions"].as_array().map_or(0, Vec::len);
    use reqwest::Method;
    let (_, all, _) = send(Method::GET, &list(""), Some(AUDITOR), None).await;
    assert_eq!(count(&all), 1, "{all}");
    let (_, other, _) = send(Method::GET, &list("?tool=send_email"), Some(AUDITOR), None).await;
    assert_eq!(count(&other), 0);
    let (_, mine, _) = send(Method::GET, &list("?run=run:alice"), Some(AUDITOR), None).await;
    assert_eq!(count(&mine), 1, "{mine}");
    let answer = br#"{"decision": "reject", "reason": "no"}"#.to_vec();
    send(
        Method::POST,
        &format!("{api}/v1/approvals/{id}"),
        Some(FINANCE),
        Some(answer),
    )
    .await;
    let (_, pending, _) = send(Method::GET, &list(""), Some(AUDITOR), None).await;
    assert_eq!(count(&pending), 0);
    let (_, rejected, _) = send(Method::GET, &list("?state=rejected"), Some(AUDITOR), None).await;
    assert_eq!(count(&rejected), 1, "{rejected}");
    assert_eq!(rejected["questions"][0]["answer"]["reason"], "no");
}

/// A browser's side of the console: its own cookie, no redirects followed.
struct Browser {
    http: reqwest::Client,
    base: String,
    cookie: Option<String>,
}

impl Browser {
    fn new(base: &str) -> Browser {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Browser {
            http,
            base: base.to_owned(),
            cookie: None,
        }
    }

    async fn get(&self, path: &str) -> (u16, String, reqwest::header::HeaderMap) {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(cookie) = &self.cookie {
            request = request.header("cookie", cookie);
        }
        let response = request.send().await.unwrap();
        let (status, headers) = (response.status().as_u16(), response.headers().clone());
        (status, response.text().await.unwrap(), headers)
    }

    /// POSTs a form (`origin`: the `Origin` header a browser sends, if any).
    async fn post(
        &mut self,
        path: &str,
        form: &[(&str, &str)],
        origin: Option<&str>,
    ) -> (u16, String) {
        let body: Vec<String> = form
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    v.replace('%', "%25")
                        .replace('&', "%26")
                        .replace('=', "%3D")
                        .replace(' ', "+")
                )
            })
            .collect();
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.join("&"));
        if let Some(cookie) = &self.cookie {
            request = request.header("cookie", cookie);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        let response = request.send().await.unwrap();
        if let Some(set) = response
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
        {
            let pair = set.split(';').next().unwrap_or_default().to_owned();
            self.cookie = (!pair.ends_with('=')).then_some(pair);
        }
        (response.status().as_u16(), response.text().await.unwrap())
    }
}

/// The value of the first hidden `csrf` field of a page.
fn csrf_of(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token")
        + 19;
    page[at..].split('"').next().unwrap().to_owned()
}

#[tokio::test]
async fn the_console_shows_questions_inert_and_answers_only_its_own_forms() {
    let (api, mut gw) = served().await;
    gw.run_tool("lookup_order").await.unwrap();
    let hostile = json!({"note": "<img src=x onerror=alert(1)>\u{202e}", "amount": 1200.50});
    let asked = gw.call("issue_refund", hostile.clone()).await;
    let id = asked.data()["approval"]["question"]
        .as_str()
        .unwrap()
        .to_owned();
    let origin = api.clone();
    let mut browser = Browser::new(&api);

    // Signed out: the sign-in form, with the console's headers.
    let (status, page, headers) = browser.get("/console").await;
    assert_eq!(status, 200);
    assert!(page.contains("action=\"/console/login\""), "{page}");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(headers["x-frame-options"], "DENY");
    let (status, page) = browser
        .post(
            "/console/login",
            &[("token", "wrong-wrong-wrong")],
            Some(&origin),
        )
        .await;
    assert_eq!(status, 401);
    assert!(page.contains("not one this service takes"), "{page}");

    // A viewer sees the question, inert, and no answer form.
    browser
        .post("/console/login", &[("token", AUDITOR)], Some(&origin))
        .await;
    let (status, page, _) = browser.get("/console").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(&id), "{page}");
    assert!(
        !page.contains("<img"),
        "markup from the model must be inert: {page}"
    );
    assert!(
        page.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "{page}"
    );
    assert!(page.contains("\\u{202e}"), "{page}");
    // (Key order is serde_json's, which a feature another crate turns on changes.)
    assert!(
        page.contains("&quot;amount&quot;:1200.5"),
        "the arguments as sent: {page}"
    );
    assert!(!page.contains("<script"), "{page}");
    assert!(
        !page.contains("value=\"approve\""),
        "a viewer gets no answer form: {page}"
    );

    // An approver's page has the forms; a form without the session's token, or sent
    // from another site, answers nothing.
    let mut approver = Browser::new(&api);
    approver
        .post("/console/login", &[("token", FINANCE)], Some(&origin))
        .await;
    let (_, page, _) = approver.get("/console").await;
    assert!(page.contains("value=\"approve\""), "{page}");
    let csrf = csrf_of(&page);
    let path = format!("/console/approvals/{id}");
    let (status, _) = approver
        .post(
            &path,
            &[("csrf", "forged"), ("decision", "approve")],
            Some(&origin),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = approver
        .post(
            &path,
            &[("csrf", &csrf), ("decision", "approve")],
            Some("http://evil.example"),
        )
        .await;
    assert_eq!(status, 403);
    let mut stranger = Browser::new(&api);
    let (status, _) = stranger
        .post(&path, &[("csrf", &csrf), ("decision", "approve")], None)
        .await;
    assert_eq!(status, 401);
    assert!(!gw.call("issue_refund", hostile.clone()).await.is_admitted());

    // The approver's own form answers, once; the retry runs.
    let (status, _) = approver
        .post(
            &path,
            &[
                ("csrf", &csrf),
                ("decision", "approve"),
                ("reason", "checked & fine"),
            ],
            Some(&origin),
        )
        .await;
    assert_eq!(status, 303);
    // A link cannot put words of its own in the console's note.
    let (_, page, _) = approver.get("/console?note=approve+every+refund").await;
    assert!(!page.contains("approve every refund"), "{page}");
    let (_, page, _) = approver.get("/console").await;
    assert!(
        page.contains("Approved by <code>token:finance</code>: checked &amp; fine"),
        "{page}"
    );
    let (status, page) = approver
        .post(
            &path,
            &[("csrf", &csrf), ("decision", "reject")],
            Some(&origin),
        )
        .await;
    assert_eq!(status, 409, "{page}");
    assert!(gw.call("issue_refund", hostile).await.is_admitted());

    // Signed out, the session is gone.
    approver
        .post("/console/logout", &[("csrf", &csrf)], Some(&origin))
        .await;
    let (_, page, _) = approver.get("/console").await;
    assert!(page.contains("action=\"/console/login\""), "{page}");
}

/// A policy server posting questions and writing a chained decision log, its console
/// showing the log and a report of the template: the console's URL, the grpc URL.
async fn served_with_log(log: &std::path::Path) -> (String, String) {
    use orch_agent::audit::{Auditor, JsonLines};
    use orch_approvals::report::{DecisionLog, Finding, StepBox, TemplateReport};
    let compiled = orch_codegen::compile_json(GATED_REFUND, None);
    let sink = JsonLines::append(log.to_str().unwrap()).unwrap();
    let options = Options {
        approvals: Some(Posting::default()),
        audit: Some(Arc::new(Auditor::new(sink, "test").chained())),
        ..Options::default()
    };
    let server = PolicyServer::new(&compiled, MemoryStore::new(), options).unwrap();
    let approvers = Approvers::new().token("finance", Role::Approver, FINANCE);
    let report = TemplateReport {
        name: "gated-refund".into(),
        file: "gated_refund.json".into(),
        fingerprint: "0123456789abcdef".into(),
        steps: vec![
            StepBox {
                name: "Help".into(),
                default: true,
                ..StepBox::default()
            },
            StepBox {
                name: "Refund".into(),
                entered_when: Some("tool_used lookup_order".into()),
                sequence: vec!["issue_refund".into(), "send_email".into()],
                ..StepBox::default()
            },
        ],
        diagnostics: vec!["warning: <b>bold</b> words".into()],
        findings: vec![Finding {
            kind: "step".into(),
            subject: "Refund".into(),
            answer: "reachable".into(),
            witness: vec![r#"{"tool":"lookup_order"}"#.into()],
            ..Finding::default()
        }],
    };
    let api = server
        .approvals(Arc::new(approvers))
        .with_templates(vec![report])
        .with_decision_log(DecisionLog {
            path: log.to_owned(),
            anchor: orch_agent::audit::Anchor::default(),
            keys: None,
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(orch_approvals::serve(listener, api, std::future::pending()));
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_url = format!("http://{}", grpc.local_addr().unwrap());
    tokio::spawn(server.serve(grpc, std::future::pending()));
    (api_url, grpc_url)
}

#[tokio::test]
async fn the_console_shows_runs_a_run_the_log_and_the_template_inert() {
    let dir = std::env::temp_dir().join(format!("orch-console-pages-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("decisions.jsonl");
    let (api, grpc) = served_with_log(&log).await;
    let mut alice = Gateway::connect(&grpc, "alice").await;
    alice.run_tool("lookup_order").await.unwrap();
    let asked = alice.call("issue_refund", json!({"amount": 10})).await;
    let id = asked.data()["approval"]["question"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut bob = Gateway::connect(&grpc, "bob").await;
    bob.run_tool("lookup_order").await.unwrap();
    // A tool name is the model's: markup in it is refused, logged, and shown inert.
    let hostile = "<img src=x onerror=alert(1)>\u{202e}";
    assert!(!bob.call(hostile, json!({})).await.is_admitted());

    let mut browser = Browser::new(&api);
    let (_, page, _) = browser.get("/console/runs").await;
    assert!(
        page.contains("action=\"/console/login\""),
        "signed out: {page}"
    );
    browser
        .post("/console/login", &[("token", FINANCE)], Some(&api))
        .await;

    // The runs: alice waits (first), bob is ready; the filters keep what they say.
    let (status, page, _) = browser.get("/console/runs").await;
    assert_eq!(status, 200, "{page}");
    let (a, b) = (
        page.find("run:alice").unwrap(),
        page.find("run:bob").unwrap(),
    );
    assert!(a < b, "the waiting run comes first: {page}");
    assert!(page.contains("waiting") && page.contains(&id), "{page}");
    let (_, page, _) = browser.get("/console/runs?state=waiting").await;
    assert!(
        page.contains("run:alice") && !page.contains("run:bob"),
        "{page}"
    );
    let (_, page, _) = browser.get("/console/runs?step=Refund&state=ready").await;
    assert!(
        !page.contains("run:alice") && page.contains("run:bob"),
        "{page}"
    );
    let (_, page, _) = browser.get("/console/runs?step=Help").await;
    assert!(page.contains("<p>0 of 2 runs.</p>"), "{page}");

    // The same runs as JSON, for scripts.
    let runs = format!("{api}/v1/runs");
    let (status, _, _) = send(reqwest::Method::GET, &runs, None, None).await;
    assert_eq!(status, 401);
    let (status, listed, _) = send(reqwest::Method::GET, &runs, Some(FINANCE), None).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["total"], 2, "{listed}");
    assert_eq!(listed["runs"][0]["id"], "run:alice", "{listed}");
    assert_eq!(listed["runs"][0]["state"], "waiting");
    assert_eq!(listed["runs"][0]["question"], id.as_str());
    let ready = format!("{runs}?state=ready");
    let (_, listed, _) = send(reqwest::Method::GET, &ready, Some(FINANCE), None).await;
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(listed["runs"][0]["id"], "run:bob");
    let one = format!("{runs}/run%3Aalice");
    let (_, run, _) = send(reqwest::Method::GET, &one, Some(FINANCE), None).await;
    assert_eq!(run["step"], "Refund", "{run}");
    assert_eq!(run["history"], json!(["lookup_order"]), "{run}");
    assert_eq!(run["question"]["id"], id.as_str(), "{run}");
    let nobody = format!("{runs}/run%3Anobody");
    let (status, _, _) = send(reqwest::Method::GET, &nobody, Some(FINANCE), None).await;
    assert_eq!(status, 404);

    // A run: its step marked in the diagram, what it ran, its question with the forms,
    // its decisions from the log.
    let (status, page, _) = browser.get("/console/runs/run%3Aalice").await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("<li class=\"step current\" aria-current=\"step\"><strong>Refund</strong>"),
        "{page}"
    );
    assert!(
        page.contains("entered when tool_used lookup_order"),
        "{page}"
    );
    assert!(
        page.contains("<li><code>lookup_order</code></li>"),
        "{page}"
    );
    assert!(
        page.contains("value=\"approve\"") && page.contains(&id),
        "{page}"
    );
    assert!(page.contains("needs_approval"), "{page}");
    let (status, _, _) = browser.get("/console/runs/run%3Anobody").await;
    assert_eq!(status, 404);

    // The log: the chain holds; the hostile name is text, its override visible.
    let (status, page, _) = browser.get("/console/log").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("The chain holds"), "{page}");
    assert!(!page.contains("<img"), "{page}");
    assert!(
        page.contains("&lt;img src=x onerror=alert(1)&gt;\\u{202e}"),
        "{page}"
    );
    let (_, page, _) = browser.get("/console/runs/run%3Abob").await;
    assert!(!page.contains("<img") && page.contains("&lt;img"), "{page}");

    // A broken chain is said, with its line.
    let text = std::fs::read_to_string(&log).unwrap();
    std::fs::write(&log, text.replacen("lookup_order", "lookup_orders", 1)).unwrap();
    let (_, page, _) = browser.get("/console/log").await;
    assert!(page.contains("The chain is broken at line"), "{page}");

    // The template: its diagram, its diagnostics (inert), what was verified.
    let (_, page, _) = browser.get("/console/templates").await;
    assert!(
        page.contains("&lt;b&gt;bold&lt;/b&gt;") && !page.contains("<b>"),
        "{page}"
    );
    assert!(
        page.contains("reachable") && page.contains("{&quot;tool&quot;:&quot;lookup_order&quot;}"),
        "{page}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A policy server in observe mode: a gated call runs without a question (nothing is
/// posted), and the run's status (`GET /v1/runs/{id}`) says the mode and shows every
/// tool as allowed.
#[tokio::test]
async fn a_run_in_observe_mode_says_so_and_posts_no_question() {
    let compiled = orch_codegen::compile_json(GATED_REFUND, None);
    let options = Options {
        approvals: Some(Posting::default()),
        mode: orch_agent::Mode::Observe,
        ..Options::default()
    };
    let server = PolicyServer::new(&compiled, MemoryStore::new(), options).unwrap();
    let approvers = Approvers::new().token("auditor", Role::Viewer, AUDITOR);
    let api = server.approvals(Arc::new(approvers));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(orch_approvals::serve(listener, api, std::future::pending()));
    let grpc = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc_url = format!("http://{}", grpc.local_addr().unwrap());
    tokio::spawn(server.serve(grpc, std::future::pending()));
    let mut gw = Gateway::connect(&grpc_url, "alice").await;
    gw.run_tool("lookup_order").await.unwrap();
    gw.run_tool("issue_refund")
        .await
        .expect("gated, observed: it runs");
    let (status, questions, _) = send(
        reqwest::Method::GET,
        &format!("{api_url}/v1/approvals"),
        Some(AUDITOR),
        None,
    )
    .await;
    assert_eq!(status, 200, "{questions}");
    assert_eq!(questions["questions"], json!([]), "{questions}");
    let (status, run, _) = send(
        reqwest::Method::GET,
        &format!("{api_url}/v1/runs/run:alice"),
        Some(AUDITOR),
        None,
    )
    .await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["mode"], "observe", "{run}");
    assert_eq!(
        run["history"],
        json!(["lookup_order", "issue_refund"]),
        "{run}"
    );
    let mut allowed: Vec<String> = serde_json::from_value(run["allowed"].clone()).unwrap();
    allowed.sort();
    let mut tools: Vec<String> = compiled.to_machine().unwrap().tools().to_vec();
    tools.sort();
    assert_eq!(allowed, tools, "{run}");
}

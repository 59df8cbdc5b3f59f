//! The console in a real browser (headless Chromium over WebDriver), in front of a real
//! `orch mcp` whose sessions are in a real `redis-server` and whose upstream is the
//! official Python SDK's server (`tests/mcp/shop_tools.py`, logging every call it runs):
//! an agent's payment waits in the gateway; an approver signs in to the console with the
//! keyboard, finds the waiting call — its arguments carry markup and a right-to-left
//! override, which render inert —, sees its run in step `Shop`, approves it, and the call
//! runs once and the run's page shows it in step `Paid`; a tool name made of markup is
//! text in the decision log's page. The screenshots in docs/ are taken here (`ORCH_SCREENSHOTS=DIR` keeps them).

mod support;

use serde_json::{json, Value};
use std::time::Duration;
use support::http::{modern_request, run_token};
use support::webdriver::Browser;
use support::{eventually, here, log_lines, python, redis, temp_dir, Gateway};

const OPERATOR: &str = "operator-token-for-the-console-test";
const FINANCE: &str = "finance-approver-0123456789";

fn pay(addr: &str, token: &str, id: i64, run: &str) -> Value {
    let params = json!({"name": "pay", "arguments": {"run": run, "amount": 42}});
    let reply = modern_request(addr, Some(token), id, "tools/call", params, &[]);
    reply
        .response(id)
        .unwrap_or_else(|| panic!("no response: {} {}", reply.status, reply.text()))
}

#[test]
#[ignore = "needs Chromium, ChromeDriver, redis-server and the MCP Python SDK: `cargo xtask test` installs them and runs this"]
fn an_approver_approves_a_waiting_call_in_the_browser() {
    let python = python();
    let (_redis, redis_url) = redis();
    let dir = temp_dir("console-browser");
    let log = dir.join("executed.log");
    let tokens = dir.join("approvers");
    let decisions = dir.join("decisions.jsonl");
    std::fs::write(&tokens, format!("finance approver {FINANCE}\n")).unwrap();
    let upstream = support::shop_upstream(&python, &log);
    let upstream: Vec<&str> = upstream.iter().map(String::as_str).collect();
    let (tokens, decisions) = (tokens.to_str().unwrap(), decisions.to_str().unwrap());
    let mut extra = vec!["--redis", &redis_url, "--approvals", "127.0.0.1:0"];
    extra.extend(["--approvers", tokens, "--approval-wait", "120"]);
    extra.extend(["--audit-log", decisions, "--audit-chain"]);
    let gw = Gateway::http(
        &here("gated_shop.json"),
        &extra,
        &[("ORCH_MCP_TOKEN", OPERATOR)],
        &upstream,
    );
    let console = console_of(&gw);

    let token = run_token(&gw.addr, Some(OPERATOR));
    refuse_a_hostile_tool_name(&gw.addr, &token);

    // The agent's payment waits; its `run` argument is the attacker's markup.
    let hostile = "<img src=x onerror=alert(1)><b>bold</b>\u{202e}gnp.exe";
    let (addr, agent) = (gw.addr.clone(), token.clone());
    let waiting = std::thread::spawn(move || pay(&addr, &agent, 1, hostile));

    // The approver signs in with the keyboard alone: the token, then Enter.
    let browser = Browser::start();
    browser.open(&console);
    let field = browser.one("#token");
    browser.type_into(&field, &format!("{FINANCE}\u{e007}"));
    let mut question = String::new();
    eventually(
        Duration::from_secs(30),
        "the waiting question in the console",
        || {
            browser.open(&console);
            match browser.all("section.question.pending").into_iter().next() {
                Some(found) => {
                    question = found;
                    true
                }
                None => false,
            }
        },
    );
    let shown = browser.text(&question);
    assert!(shown.contains("pay") && shown.contains("Shop"), "{shown}");
    assert!(
        shown.contains("mcp-client:raw-http-test 1"),
        "who asked: {shown}"
    );
    // The markup is text, not elements; the override is shown, not applied.
    assert!(
        browser.all("section.question img").is_empty(),
        "{}",
        browser.source()
    );
    assert!(
        browser.all("section.question b").is_empty(),
        "{}",
        browser.source()
    );
    let arguments = browser.text(&browser.one("section.question pre.arguments"));
    assert!(
        arguments.contains("<img src=x onerror=alert(1)>"),
        "{arguments}"
    );
    assert!(arguments.contains("\\u{202e}"), "{arguments}");
    assert!(
        log_lines(&log).iter().all(|l| l["tool"] != "pay"),
        "paid before the approval"
    );
    screenshot(&browser, "console-question.png");

    // The runs page lists the run as waiting; its page marks step `Shop`.
    browser.open(&format!("{console}/runs"));
    let row = browser.one("tr.run");
    assert!(
        browser.text(&row).contains("waiting"),
        "{}",
        browser.source()
    );
    screenshot(&browser, "console-runs.png");
    browser.click(&browser.one("tr.run a"));
    let run_page = browser.url();
    let current = browser.text(&browser.one("ol.diagram li.current"));
    assert!(current.contains("Shop"), "{current}");
    screenshot(&browser, "console-run.png");
    browser.open(&console);

    // Approve, with a reason.
    let reason = browser.one("section.question input[name=reason]");
    browser.type_into(&reason, "order 42 checked");
    browser.click(&browser.one("section.question button[value=approve]"));
    let answer = waiting.join().expect("the waiting call");
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let paid: Vec<_> = log_lines(&log)
        .into_iter()
        .filter(|l| l["tool"] == "pay")
        .collect();
    assert_eq!(paid.len(), 1, "{paid:?}");
    let page = browser.source();
    assert!(
        page.contains("approved q-"),
        "the note says what was done: {page}"
    );
    assert!(page.contains("order 42 checked"), "{page}");
    screenshot(&browser, "console-answered.png");

    // The run's page sees it move: step `Paid` marked, `pay` in what it ran.
    browser.open(&run_page);
    let current = browser.text(&browser.one("ol.diagram li.current"));
    assert!(current.contains("Paid"), "{current}");
    let ran = browser.text(&browser.one("ol.timeline"));
    assert!(ran.contains("pay"), "{ran}");

    log_and_template_pages(&browser, &console);

    // The run moved on: in step `Paid`, `pay` is no longer allowed.
    let again = pay(&gw.addr, &token, 2, "r1");
    assert_eq!(
        again["result"]["_meta"]["orch/refusal"]["reason"], "not_allowed",
        "{again}"
    );
    assert_eq!(
        again["result"]["_meta"]["orch/refusal"]["step"], "Paid",
        "{again}"
    );
}

/// A tool name is the model's too: one made of markup is refused (and logged).
fn refuse_a_hostile_tool_name(addr: &str, token: &str) {
    let params = json!({"name": "<img src=x onerror=alert(1)><b>x</b>", "arguments": {}});
    let refused = modern_request(addr, Some(token), 9, "tools/call", params, &[]);
    let refused = refused.response(9).expect("a response");
    assert_eq!(refused["result"]["isError"], true, "{refused}");
}

/// The console's address, once the gateway printed it.
fn console_of(gw: &Gateway) -> String {
    let mut console = String::new();
    eventually(
        Duration::from_secs(30),
        "the console's address",
        || match gw
            .stdout()
            .lines()
            .find_map(|l| l.strip_prefix("approvals listening on "))
        {
            Some(addr) => {
                console = format!("http://{addr}/console");
                true
            }
            None => false,
        },
    );
    console
}

/// The decision log's page (the chain holds, a tool name made of markup is text) and
/// the template's (what `orch verify` found).
fn log_and_template_pages(browser: &Browser, console: &str) {
    // The decision log: the chain holds, the hostile name is text.
    browser.open(&format!("{console}/log"));
    let verdict = browser.text(&browser.one("#verdict"));
    assert!(verdict.contains("The chain holds"), "{verdict}");
    assert!(browser.all("main img").is_empty() && browser.all("main b").is_empty());
    let shown = browser.text(&browser.one("main table"));
    assert!(
        shown.contains("<img src=x onerror=alert(1)><b>x</b>"),
        "{shown}"
    );
    screenshot(browser, "console-log.png");
    browser.open(&format!("{console}/templates"));
    assert!(
        browser.text(&browser.one("main")).contains("reachable"),
        "{}",
        browser.source()
    );
    screenshot(browser, "console-template.png");
}

/// Keeps a screenshot in `ORCH_SCREENSHOTS`, when set (docs/ takes them from there).
fn screenshot(browser: &Browser, name: &str) {
    let png = browser.screenshot();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    if let Some(dir) = std::env::var_os("ORCH_SCREENSHOTS") {
        std::fs::write(std::path::Path::new(&dir).join(name), png).expect("write the screenshot");
    }
}

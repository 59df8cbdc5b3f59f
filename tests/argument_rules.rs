//! Rules on arguments (semantics §16), on a machine compiled by build.rs and on the same
//! template loaded at run time: a broken rule refuses the call (with the rule's name,
//! the value and why), a conditional `approve` gates only the calls it names, step
//! rules apply only in their step, arguments are judged as written, and both session
//! types say the same.

use orch::approval::{Call, CallDigest};
use orch::{DynMachine, Refusal};

orch::include_machine!("payments");
use payments::{Session, Step, Tool};

fn call(tool: &str, args: &'static str) -> Call<'static> {
    Call::new(CallDigest::of_text(tool, args), args)
}

fn dyn_machine() -> DynMachine {
    let src = include_str!("fixtures/machines/payments.json");
    orch_codegen::compile_json(src, None)
        .to_machine()
        .expect("the fixture compiles")
}

/// The rule that refused, and the words for why.
fn broken(s: &Session, tool: Tool, c: &Call<'_>) -> Option<(String, String)> {
    match s.check_call(tool, c) {
        Err(Refusal::BrokenRule { broken, .. }) => Some((
            s.rule_name(broken.rule).to_owned(),
            s.explain_broken(&broken, c.arguments),
        )),
        _ => None,
    }
}

const GOOD: &str = r#"{"recipient": "DE89370400440532013000", "amount": 25.5}"#;

#[test]
fn a_call_that_breaks_a_rule_is_refused_with_the_rule_the_value_and_why() {
    let s = Session::new();
    assert!(s
        .check_call(Tool::SendMoney, &call("send_money", GOOD))
        .is_ok());
    let attacker = call(
        "send_money",
        r#"{"recipient": "attacker@evil.example", "amount": 10}"#,
    );
    let (rule, why) = broken(&s, Tool::SendMoney, &attacker).expect("refused");
    assert_eq!(rule, "iban");
    assert_eq!(
        why,
        r#"`/recipient` is "attacker@evil.example": it must be a string matching the regex `^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$`"#
    );
    // A missing value breaks the rule too.
    let (rule, why) = broken(&s, Tool::SendMoney, &call("send_money", r#"{"amount": 1}"#)).unwrap();
    assert_eq!((rule.as_str(), why.as_str()), ("iban", "`/recipient` is missing: it must be a string matching the regex `^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$`"));
    // Rules are checked in template order: the first broken one is named.
    let (rule, why) = broken(
        &s,
        Tool::SendMoney,
        &call(
            "send_money",
            r#"{"recipient": "DE89370400440532013000", "amount": -5}"#,
        ),
    )
    .unwrap();
    assert_eq!(rule, "positive");
    assert_eq!(
        why,
        "`/amount` is -5: it must be a number from 0.01 to 100000"
    );
    // Every rule refuses, approved or not: a human cannot approve past a rule.
    let mut s = Session::new();
    s.approve(attacker.digest);
    assert!(matches!(
        s.admit_call(Tool::SendMoney, &attacker),
        Err(Refusal::BrokenRule { .. })
    ));
    assert!(
        s.approval().is_some(),
        "a refused call consumes no approval"
    );
}

#[test]
fn a_conditional_approve_gates_only_the_calls_it_names() {
    let mut s = Session::new();
    let small = call("send_money", GOOD);
    let large = call(
        "send_money",
        r#"{"recipient": "DE89370400440532013000", "amount": 500}"#,
    );
    assert!(s.check_call(Tool::SendMoney, &small).is_ok());
    assert!(s
        .check_call(Tool::SendMoney, &large)
        .unwrap_err()
        .needs_approval());
    // The approval of the large call lets exactly it run, once.
    s.approve(large.digest);
    assert!(s.admit_call(Tool::SendMoney, &large).is_ok());
    assert!(s
        .admit_call(Tool::SendMoney, &large)
        .unwrap_err()
        .needs_approval());
    // `allowed()` offers the tool: whether a call needs a human depends on the call.
    assert!(s.allowed().contains(Tool::SendMoney));
    // Numbers are judged as the decimals written, never through a float.
    for (args, gated) in [
        (
            r#"{"recipient": "DE89370400440532013000", "amount": 499.99999999999999999}"#,
            false,
        ),
        (
            r#"{"recipient": "DE89370400440532013000", "amount": 5e2}"#,
            true,
        ),
        (
            r#"{"recipient": "DE89370400440532013000", "amount": 500.000}"#,
            true,
        ),
    ] {
        let c = call("send_money", args);
        let judged = s.check_call(Tool::SendMoney, &c);
        assert_eq!(judged.is_err(), gated, "{args}: {judged:?}");
    }
}

#[test]
fn step_rules_apply_only_while_their_step_is_active() {
    let mut s = Session::new();
    let usd = call(
        "send_money",
        r#"{"recipient": "DE89370400440532013000", "amount": 5, "currency": "USD"}"#,
    );
    assert!(s.check_call(Tool::SendMoney, &usd).is_ok());
    s.record(Tool::GetContacts);
    assert_eq!(s.step(), Some(Step::Paying));
    let (rule, why) = broken(&s, Tool::SendMoney, &usd).unwrap();
    assert_eq!(rule, "eur-only");
    assert_eq!(why, r#"`/currency` is "USD": it must be one of "EUR""#);
    match s.check_call(Tool::SendMoney, &usd) {
        Err(Refusal::BrokenRule { step, .. }) => assert_eq!(step, Some(Step::Paying)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn hosts_globs_arrays_and_combinations() {
    let s = Session::new();
    let ok =
        |tool: Tool, name: &str, args: &'static str| s.check_call(tool, &call(name, args)).is_ok();
    assert!(ok(
        Tool::GetWebpage,
        "get_webpage",
        r#"{"url": "https://www.bank.example/rates"}"#
    ));
    assert!(ok(
        Tool::GetWebpage,
        "get_webpage",
        r#"{"url": "https://bank.example"}"#
    ));
    for bad in [
        r#"{"url": "https://evil.example/?q=bank.example"}"#,
        r#"{"url": "https://bank.example@evil.example/"}"#,
        r#"{"url": "https://bank.example.evil.example/"}"#,
        r#"{"url": "https://evil.example\\@bank.example/"}"#,
        r#"{"url": "bank.example"}"#,
    ] {
        assert!(!ok(Tool::GetWebpage, "get_webpage", bad), "{bad}");
    }
    assert!(ok(
        Tool::Invite,
        "invite",
        r#"{"participants": [{"email": "ana@corp.example"}, {"email": "bo@corp.example"}]}"#
    ));
    let outsider = call(
        "invite",
        r#"{"participants": [{"email": "ana@corp.example"}, {"email": "eve@evil.example"}]}"#,
    );
    let (rule, why) = broken(&s, Tool::Invite, &outsider).unwrap();
    assert_eq!(rule, "colleagues");
    assert_eq!(
        why,
        r#"`/participants/1/email` is "eve@evil.example": it must be a string matching `*@corp.example`"#
    );
    let none = call("invite", r#"{"participants": []}"#);
    assert_eq!(
        broken(&s, Tool::Invite, &none).unwrap().1,
        "`/participants` is []: it must have a length from 1 to 20"
    );
    // `any`: a long note passes when it is urgent; the words name the whole `any`.
    let long = "x".repeat(300);
    let text: &'static str = Box::leak(format!(r#"{{"text": "{long}"}}"#).into_boxed_str());
    assert_eq!(
        broken(&s, Tool::Note, &call("note", text)).unwrap().1,
        "either `/text` must have a length of at most 200 or `/urgent` must be true does not hold"
    );
    let urgent: &'static str =
        Box::leak(format!(r#"{{"text": "{long}", "urgent": true}}"#).into_boxed_str());
    assert!(ok(Tool::Note, "note", urgent));
    // Escaped strings are compared decoded.
    assert!(ok(
        Tool::Invite,
        "invite",
        r#"{"participants": [{"email": "ana@corp\u002eexample"}]}"#
    ));
}

/// `addressesIn` reads a recipient field as a list of plain addresses, every one of which
/// must match; `hostnameIn` reads a host written alone as the host `https://` before it
/// would reach. Both are false for anything they cannot read strictly.
#[test]
fn address_lists_and_hosts_without_a_scheme() {
    let s = Session::new();
    let ok =
        |tool: Tool, name: &str, args: &'static str| s.check_call(tool, &call(name, args)).is_ok();
    for good in [
        r#"{"to": "ana@corp.example"}"#,
        r#"{"to": "Ana@CORP.example, auditor@partner.example; bo@corp.example"}"#,
    ] {
        assert!(ok(Tool::SendEmail, "send_email", good), "{good}");
    }
    for bad in [
        // One string that ends well, with an outsider first: what `glob` would accept.
        r#"{"to": "eve@evil.example, boss@corp.example"}"#,
        r#"{"to": "Boss <boss@corp.example>"}"#,
        r#"{"to": "\"eve@evil.example\"@corp.example"}"#,
        r#"{"to": "boss@corp.example (cc eve@evil.example)"}"#,
        r#"{"to": "boss@corp.example.evil.example"}"#,
        r#"{"to": "boss@sub.corp.example"}"#,
        r#"{"to": ""}"#,
        r#"{"to": ["boss@corp.example"]}"#,
        r#"{}"#,
    ] {
        assert!(!ok(Tool::SendEmail, "send_email", bad), "{bad}");
    }
    let (rule, why) = broken(
        &s,
        Tool::SendEmail,
        &call(
            "send_email",
            r#"{"to": "eve@evil.example, boss@corp.example"}"#,
        ),
    )
    .unwrap();
    assert_eq!(rule, "corp-mail");
    assert_eq!(
        why,
        r#"`/to` is "eve@evil.example, boss@corp.example": it must be a list of plain e-mail addresses, each one of *@corp.example, auditor@partner.example"#
    );
    for good in [
        r#"{"host": "bank.example"}"#,
        r#"{"host": "www.BANK.example."}"#,
        r#"{"host": "bank.example:8443/rates?x=1"}"#,
        r#"{"host": "https://www.bank.example/rates"}"#,
        r#"{"host": "evil.example@bank.example"}"#,
    ] {
        assert!(ok(Tool::OpenSite, "open_site", good), "{good}");
    }
    for bad in [
        r#"{"host": "bank.example@evil.example"}"#,
        r#"{"host": "bank.example.evil.example"}"#,
        r#"{"host": "bank.example\\@evil.example"}"#,
        r#"{"host": "evil.example/bank.example"}"#,
        r#"{"host": "bank.example:443@evil.example"}"#,
        r#"{"host": "https:evil.example"}"#,
        r#"{"host": "bank .example"}"#,
        r#"{"host": ""}"#,
    ] {
        assert!(!ok(Tool::OpenSite, "open_site", bad), "{bad}");
    }
    // What a text carries: every link and every address inside it.
    for good in [
        r#"{"body": "No links, no addresses: @ana will call."}"#,
        r#"{"body": "See https://wiki.corp.example/a?b (or www.corp.example), ask Ana@corp.example."}"#,
    ] {
        assert!(ok(Tool::Reply, "reply", good), "{good}");
    }
    for bad in [
        r#"{"body": "Update your details at evil.example/login today."}"#,
        r#"{"body": "See https://wiki.corp.example/a and [this](https://evil.example/x)"}"#,
        r#"{"body": "https://corp.example\"@evil.example/"}"#,
        r#"{"body": "Visit WWW.EVIL.example"}"#,
        r#"{"body": "Write to eve@evil.example for the invoice."}"#,
        r#"{"body": "https://bаnk.corp.example/"}"#,
        r#"{"body": 42}"#,
    ] {
        assert!(!ok(Tool::Reply, "reply", bad), "{bad}");
    }
    let (rule, why) = broken(
        &s,
        Tool::Reply,
        &call("reply", r#"{"body": "Log in at evil.example/login"}"#),
    )
    .unwrap();
    assert_eq!(rule, "our-links");
    assert_eq!(
        why,
        r#"`/body` is "Log in at evil.example/login": it must be text whose every link goes to a host that is one of corp.example, *.corp.example"#
    );
    // The run-time session judges the same.
    let machine = dyn_machine();
    let d = machine.session();
    for (tool, args) in [
        (
            "send_email",
            r#"{"to": "eve@evil.example, boss@corp.example"}"#,
        ),
        ("send_email", r#"{"to": "ana@corp.example"}"#),
        ("open_site", r#"{"host": "bank.example@evil.example"}"#),
        ("open_site", r#"{"host": "www.bank.example"}"#),
        ("reply", r#"{"body": "Log in at evil.example/login"}"#),
        ("reply", r#"{"body": "ask ana@corp.example"}"#),
    ] {
        let typed = Tool::from_name(tool).expect("a declared tool");
        assert_eq!(
            d.check_call(tool, &call(tool, args)).is_ok(),
            s.check_call(typed, &call(tool, args)).is_ok(),
            "{tool} {args}"
        );
    }
}

#[test]
fn arguments_a_rule_cannot_read_break_it() {
    let s = Session::new();
    for (args, why) in [
        ("not json", "the arguments are not JSON (at byte 0)"),
        (
            r#"{"recipient": "DE89370400440532013000", "amount": 1, "amount": 900}"#,
            "the arguments write a key twice (at byte 53)",
        ),
    ] {
        let c = call("send_money", args);
        let (rule, text) = broken(&s, Tool::SendMoney, &c).unwrap();
        assert_eq!((rule.as_str(), text.as_str()), ("iban", why), "{args}");
    }
    // A tool no rule names is judged without reading its arguments.
    assert!(s
        .check_call(Tool::GetContacts, &call("get_contacts", "not json"))
        .is_ok());
}

#[test]
fn typed_and_run_time_sessions_judge_alike() {
    let machine = dyn_machine();
    assert_eq!(machine.fingerprint(), payments::FINGERPRINT);
    let mut d = machine.session();
    let mut s = Session::new();
    let calls: [(&str, Tool, &'static str); 6] = [
        ("send_money", Tool::SendMoney, GOOD),
        (
            "send_money",
            Tool::SendMoney,
            r#"{"recipient": "x", "amount": 1}"#,
        ),
        (
            "send_money",
            Tool::SendMoney,
            r#"{"recipient": "DE89370400440532013000", "amount": 1e3}"#,
        ),
        (
            "get_webpage",
            Tool::GetWebpage,
            r#"{"url": "http://evil.example"}"#,
        ),
        (
            "invite",
            Tool::Invite,
            r#"{"participants": [{"email": 3}]}"#,
        ),
        ("note", Tool::Note, "{"),
    ];
    for round in 0..2 {
        for (name, tool, args) in calls {
            let c = call(name, args);
            let typed = s.check_call(tool, &c).map_err(|e| e.to_string());
            let run_time = d.check_call(name, &c).map_err(|e| e.to_string());
            assert_eq!(typed, run_time, "{name} {args}");
            if let (
                Err(Refusal::BrokenRule { broken: b1, .. }),
                Err(Refusal::BrokenRule { broken: b2, .. }),
            ) = (s.check_call(tool, &c), d.check_call(name, &c))
            {
                assert_eq!(b1, b2);
                assert_eq!(s.explain_broken(&b1, args), d.explain_broken(&b2, args));
            }
        }
        if round == 0 {
            s.record(Tool::GetContacts);
            d.record("get_contacts");
        }
    }
}

const CONTACTS: &str = r#"{"contacts": [
  {"name": "Ana", "iban": "DE89370400440532013000"},
  {"name": "Bo", "iban": "FR1420041010050500013M02606"},
  {"name": "Cy"}
]}"#;

#[test]
fn values_from_earlier_results_are_remembered_and_survive_a_snapshot() {
    let mut s = Session::new();
    let ana = call(
        "pay_contact",
        r#"{"iban": "DE89370400440532013000", "amount": 5}"#,
    );
    let eve = call(
        "pay_contact",
        r#"{"iban": "GB33BUKB20201555555555", "amount": 5}"#,
    );
    // Nothing returned yet: no recipient is known.
    let (rule, why) = broken(&s, Tool::PayContact, &ana).unwrap();
    assert_eq!(rule, "known-recipient");
    assert_eq!(
        why,
        r#"`/iban` is "DE89370400440532013000": it must be one of the values earlier results of `get_contacts` held at `/contacts/*/iban`"#
    );
    s.record_result(Tool::GetContacts, CONTACTS);
    assert!(s.check_call(Tool::PayContact, &ana).is_ok());
    assert!(broken(&s, Tool::PayContact, &eve).is_some());
    // An argument written differently (an escape) is the same value.
    let escaped = call(
        "pay_contact",
        r#"{"iban": "FR1420041010050500013M0260\u0036"}"#,
    );
    assert!(s.check_call(Tool::PayContact, &escaped).is_ok());
    // Both encodings of a snapshot carry what was remembered — keys, never the text.
    let snap = s.snapshot();
    assert_eq!(snap.memory.len(), 2);
    assert!(!snap.to_json().contains("DE8937"));
    for restored in [
        orch::Snapshot::from_json(&snap.to_json()).unwrap(),
        orch::Snapshot::from_bytes(&snap.to_bytes()).unwrap(),
    ] {
        assert_eq!(restored, snap);
        let (back, report) = Session::restore(&restored).unwrap();
        assert!(report.is_exact(), "{report:?}");
        assert!(back.check_call(Tool::PayContact, &ana).is_ok());
        assert!(back.check_call(Tool::PayContact, &eve).is_err());
        // And the run-time session reads the typed one's snapshot alike.
        let machine = dyn_machine();
        let (d, _) = orch::DynSession::restore(&machine, &restored).unwrap();
        assert!(d.check_call("pay_contact", &ana).is_ok());
        assert!(d.check_call("pay_contact", &eve).is_err());
        // Written straight from the state, the remembered values are the same bytes.
        assert_eq!(d.snapshot_bytes(), d.snapshot().to_bytes());
        assert_eq!(d.snapshot_bytes(), snap.to_bytes());
    }
    // A reset forgets: a new session knows nothing.
    s.reset();
    assert!(s.check_call(Tool::PayContact, &ana).is_err());
}

#[test]
fn memory_is_bounded_and_keeps_the_newest_values() {
    let mut s = Session::new();
    let first = r#"{"contacts": [{"iban": "AA00FIRST000000000"}]}"#;
    s.record_result(Tool::GetContacts, first);
    let many: Vec<String> = (0..orch::args::MEMORY_VALUES)
        .map(|i| format!(r#"{{"iban": "BB{i:02}X"}}"#))
        .collect();
    let result = format!(r#"{{"contacts": [{}]}}"#, many.join(","));
    s.record_result(Tool::GetContacts, &result);
    let c = |iban: &str| {
        let args: &'static str = Box::leak(format!(r#"{{"iban": "{iban}"}}"#).into_boxed_str());
        call("pay_contact", args)
    };
    assert!(
        s.check_call(Tool::PayContact, &c("AA00FIRST000000000"))
            .is_err(),
        "the oldest made room"
    );
    assert!(s.check_call(Tool::PayContact, &c("BB00X")).is_ok());
    assert!(s
        .check_call(
            Tool::PayContact,
            &c(&format!("BB{:02}X", orch::args::MEMORY_VALUES - 1))
        )
        .is_ok());
    assert_eq!(s.snapshot().memory.len(), orch::args::MEMORY_VALUES);
    // A result that is not JSON, or of a tool no rule reads, adds nothing.
    let before = s.snapshot().memory;
    s.record_result(Tool::GetContacts, "not json");
    s.record_result(Tool::Note, r#"{"contacts": [{"iban": "CC"}]}"#);
    assert_eq!(s.snapshot().memory, before);
}

#[test]
fn a_snapshot_with_a_bad_memory_is_an_error_not_a_session() {
    let mut s = Session::new();
    s.record_result(Tool::GetContacts, CONTACTS);
    let mut json: serde_json::Value = serde_json::from_str(&s.snapshot().to_json()).unwrap();
    json["memory"][0] = serde_json::json!("not hex");
    let bad = orch::Snapshot::from_json(&json.to_string()).unwrap();
    let err = Session::restore(&bad).unwrap_err();
    assert!(err.to_string().contains("remembered value"), "{err}");
    // A binary snapshot cut inside its memory section fails its checksum or its length.
    let bytes = s.snapshot().to_bytes();
    for cut in [bytes.len() - 5, bytes.len() - 12] {
        assert!(orch::Snapshot::from_bytes(&bytes[..cut]).is_err());
    }
}

//! `orchestration.lostResults` (semantics §15): what a call whose result never came
//! means, per tool — parsed from JSON and the DSL alike, checked like every tool list,
//! resolved for declared and foreign tools, and kept out of the fingerprint.

use orch::LostRule;

const SHOP: &str = r#"{
  "agentId": "shop",
  "tools": ["search", "cart", "pay", "log_event"],
  "orchestration": {
    "defaultStep": "Buy",
    "steps": [{"name": "Buy", "availableTools": {"allowed": ["*"]}}],
    "lostResults": {"retry": ["*"], "ran": ["log_*"], "hold": ["pay"]}
  }
}"#;

fn machine(src: &str) -> orch::DynMachine {
    let compiled = orch_codegen::compile_json(src, None);
    let errors: Vec<_> = compiled
        .diagnostics
        .iter()
        .map(|d| d.message.clone())
        .collect();
    compiled
        .to_machine()
        .unwrap_or_else(|| panic!("{errors:?}"))
}

#[test]
fn the_safest_list_that_names_a_tool_wins() {
    let m = machine(SHOP);
    assert_eq!(m.lost_rule("search"), LostRule::Retry);
    assert_eq!(m.lost_rule("cart"), LostRule::Retry);
    // `*` says retry, `pay` says hold: hold.
    assert_eq!(m.lost_rule("pay"), LostRule::Hold);
    // `*` says retry, `log_*` says ran: ran.
    assert_eq!(m.lost_rule("log_event"), LostRule::Ran);
    // Foreign tools are judged by the patterns.
    assert_eq!(m.lost_rule("log_other"), LostRule::Ran);
    assert_eq!(m.lost_rule("fetch"), LostRule::Retry);
}

#[test]
fn a_tool_in_no_list_is_held() {
    let m = machine(
        r#"{"agentId": "s", "tools": ["search", "pay"],
            "orchestration": {"steps": [], "lostResults": {"retry": ["search"]}}}"#,
    );
    assert_eq!(m.lost_rule("search"), LostRule::Retry);
    assert_eq!(m.lost_rule("pay"), LostRule::Hold);
    assert_eq!(m.lost_rule("unknown"), LostRule::Hold);
    let plain = machine(r#"{"agentId": "s", "tools": ["search"], "orchestration": {"steps": []}}"#);
    assert_eq!(plain.lost_rule("search"), LostRule::Hold);
    assert_eq!(LostRule::Hold.as_str(), "hold");
}

#[test]
fn the_rules_leave_the_fingerprint_alone() {
    let with = machine(SHOP);
    let without = SHOP.replace(
        r#""lostResults": {"retry": ["*"], "ran": ["log_*"], "hold": ["pay"]}"#,
        r#""lostResults": null"#,
    );
    assert_ne!(without, SHOP);
    assert_eq!(with.fingerprint(), machine(&without).fingerprint());
}

/// Asserts that compiling a template whose `lostResults` is `lost` reports `code` with
/// a message that mentions `mentions`.
fn reports(lost: &str, code: &str, mentions: &str) {
    let src = format!(
        r#"{{"agentId": "s", "tools": ["pay"], "orchestration": {{"steps": [], "lostResults": {lost}}}}}"#
    );
    let found: Vec<String> = orch_codegen::compile_json(&src, None)
        .diagnostics
        .iter()
        .map(|d| format!("{}: {}", d.code.as_str(), d.message))
        .collect();
    assert!(
        found
            .iter()
            .any(|c| c.starts_with(code) && c.contains(mentions)),
        "{lost}: {found:?}"
    );
}

#[test]
fn a_misspelt_list_an_unknown_tool_and_a_wrong_type_are_errors() {
    reports(r#"{"retyr": ["pay"]}"#, "E021", "retyr");
    reports(r#"{"ran": ["pya"]}"#, "E015", "pya");
    reports(r#"["pay"]"#, "E002", "");
}

mod dsl {
    orch::orchestration! {
        pub machine "shop" {
            tools: [search, cart, pay, log_event],
            lost retry: ["*"];
            lost ran: ["log_*"];
            lost hold: [pay];
            default step Buy {
                allow: ["*"];
            }
        }
    }
}

#[test]
fn the_dsl_says_the_same() {
    let json = machine(SHOP);
    assert_eq!(dsl::shop::FINGERPRINT, json.fingerprint());
    let tables = &dsl::shop::TABLES;
    for (i, tool) in json.tools().iter().enumerate() {
        assert_eq!(
            tables.lost_rule(Some(i), tool),
            json.lost_rule(tool),
            "{tool}"
        );
    }
    assert_eq!(tables.lost_rule(None, "log_x"), LostRule::Ran);
}

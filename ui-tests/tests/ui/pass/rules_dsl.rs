// The rules-on-arguments example of docs/macro-and-build.md compiles, and judges calls.
orch::orchestration! {
    pub machine Payments {
        tools: [get_contacts, send_money, get_webpage];
        approve "large-payment": send_money when "/amount" range(min = 1000);
        rule "bank-pages-only": get_webpage
            require "/url" host_in("mybank.example", "*.mybank.example");
        property "large-payments-approved": send_money approved when "/amount" range(min = 1000);
        default step Assist {
            allow: ["*"];
            rule "known-recipient": send_money
                require "/recipient" in_result(get_contacts, "/contacts/*/iban");
        }
    }
}

fn main() {
    use orch::approval::{Call, CallDigest};
    use payments::{Session, Tool};
    let args = r#"{"url": "https://evil.example/"}"#;
    let call = Call::new(CallDigest::of_text("get_webpage", args), args);
    assert!(matches!(
        Session::new().check_call(Tool::GetWebpage, &call),
        Err(orch::Refusal::BrokenRule { .. })
    ));
}

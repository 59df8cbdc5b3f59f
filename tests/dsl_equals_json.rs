//! The DSL machine and the JSON machine of the same workflow are the same machine:
//! identical tables (fingerprint) and identical traces over many random event streams.

mod common;
use common::Event;
use proptest::prop_assert_eq;

use orch::{Outcome, ToolEnum};

mod json {
    orch::include_machine!("conformance");
}

mod dsl {
    orch::orchestration! {
        /// tests/fixtures/machines/conformance.json, written in the DSL.
        pub machine "conformance" {
            tools: [search, think, reflect, critique, debate, compare, summarize,
                    web_fetch, cognitive_map, cognitive_load, danger],
            description: "Every condition type, groups, patterns, deny and resets: the project's conformance machine.";
            default step Idle;
            step Research {
                when message_contains("Research");
                sequence: [search, think, reflect];
                allow: [search, think, reflect];
            }
            step Evaluation {
                when message_regex("(?i)critique|evaluate");
                sequence: [critique, (debate | compare), reflect];
                allow: [critique, debate, compare, reflect, search];
                reset_sequence_on: [message_regex];
            }
            step Summary {
                when tool_used(summarize);
                allow: ["*cognitive*", summarize];
                deny: [cognitive_load];
            }
            step Fresh {
                when message_contains("fresh");
                when not_recently_used(search, window = 2);
                allow: ["*"];
                deny: [danger, "web_*"];
            }
            step Restart {
                when message_contains("again");
                sequence: [think, reflect];
                allow: [think, reflect];
                reset_sequence_on: [user_message];
            }
            step Fetch {
                when message_contains("fetch");
                sequence: [web_fetch, summarize];
                allow: [web_fetch, summarize];
            }
        }
    }
}

#[test]
fn same_tables() {
    assert_eq!(
        dsl::conformance::FINGERPRINT,
        json::conformance::FINGERPRINT
    );
    assert_eq!(
        dsl::conformance::DESCRIPTION,
        json::conformance::DESCRIPTION
    );
}

fn outcome<T: ToolEnum>(o: Outcome<T>) -> String {
    match o {
        Outcome::OutOfSequence { expected } => format!("out_of_sequence {expected}"),
        Outcome::Advanced { index } => format!("advanced {index}"),
        o => o.as_str().into(),
    }
}

#[test]
fn same_traces_for_random_events() {
    use dsl::conformance as d;
    use json::conformance as j;
    let messages = common::MESSAGES;
    common::check(300, common::events(150), |events| {
        let (mut a, mut b) = (d::Session::new(), j::Session::new());
        for (n, event) in events.iter().enumerate() {
            match event {
                Event::Message(i) => {
                    let m = messages[i.index(messages.len())];
                    a.on_user_message(m);
                    b.on_user_message(m);
                }
                Event::Reset => {
                    a.reset();
                    b.reset();
                }
                Event::Available(mask) => {
                    a.set_available(
                        d::Tool::ALL
                            .into_iter()
                            .filter(|t| Event::keeps(mask, t.index())),
                    );
                    b.set_available(
                        j::Tool::ALL
                            .into_iter()
                            .filter(|t| Event::keeps(mask, t.index())),
                    );
                }
                Event::Usage(p, c) => {
                    a.record_usage(*p, *c);
                    b.record_usage(*p, *c);
                }
                Event::Tool(_) | Event::Foreign => {
                    let (ra, rb) = match event {
                        Event::Tool(i) => {
                            let i = i.index(d::Tool::ALL.len());
                            let (ta, tb) = (d::Tool::ALL[i], j::Tool::ALL[i]);
                            prop_assert_eq!(ta.name(), tb.name());
                            prop_assert_eq!(
                                a.check(ta).map_err(|e| e.to_string()),
                                b.check(tb).map_err(|e| e.to_string())
                            );
                            (a.record(ta), b.record(tb))
                        }
                        _ => (a.record_name("foreign"), b.record_name("foreign")),
                    };
                    prop_assert_eq!(outcome(ra), outcome(rb), "event {}", n);
                }
            }
            prop_assert_eq!(
                a.step().map(|s| s.name()),
                b.step().map(|s| s.name()),
                "event {}",
                n
            );
            prop_assert_eq!(a.sequence_index(), b.sequence_index());
            prop_assert_eq!(
                a.allowed().names().collect::<Vec<_>>(),
                b.allowed().names().collect::<Vec<_>>()
            );
        }
        Ok(())
    });
}

mod approvals_json {
    orch::include_machine!("approvals");
}

mod approvals_dsl {
    orch::orchestration! {
        /// tests/fixtures/machines/approvals.json, written in the DSL.
        pub machine "approvals" {
            tools: [browse, add_to_cart, confirm, pay, refund],
            description: "A shop whose payments and refunds need a human's approval of each call.";
            approve: [refund];
            property "pay-after-confirm": pay after confirm;
            property "pay-approved": pay approved;
            property "refund-approved": refund approved;
            property "no-deletes": "delete_*" never;
            default step Browse {
                allow: [browse, add_to_cart];
            }
            step Checkout {
                when tool_used(add_to_cart);
                sequence: [confirm, pay];
                allow: [confirm, pay, refund];
                approve: [pay];
            }
        }
    }
}

/// Gates compile to the same tables from both front ends, and answer alike.
#[test]
fn same_gates() {
    assert_eq!(
        approvals_json::approvals::FINGERPRINT,
        approvals_dsl::approvals::FINGERPRINT
    );
    use approvals_dsl::approvals::{Session, Step, Tool};
    let mut s = Session::new();
    assert_eq!(
        s.check(Tool::Refund).unwrap_err().to_string(),
        "not allowed in step `Browse`"
    );
    s.record(Tool::AddToCart);
    assert_eq!(s.step(), Some(Step::Checkout));
    s.record(Tool::Confirm);
    let gated = s.check(Tool::Pay).unwrap_err();
    assert!(gated.needs_approval());
    assert_eq!(gated.step(), Some(Step::Checkout));
    assert_eq!(
        gated.to_string(),
        "needs a human's approval of this call in step `Checkout`"
    );
    assert!(s.allowed().contains(Tool::Pay), "a gated tool is offered");
    assert_eq!(s.record(Tool::Pay), Outcome::Completed);
    // The orchestration's gate holds in every step.
    assert!(s.check(Tool::Refund).unwrap_err().needs_approval());
    assert!(s.check(Tool::Confirm).is_ok());
}

mod json_payments {
    orch::include_machine!("payments");
}

mod dsl_payments {
    orch::orchestration! {
        /// tests/fixtures/machines/payments.json, written in the DSL: rules on
        /// arguments, conditional approval and step rules (semantics §16).
        pub machine "payments" {
            tools: [get_contacts, send_money, get_webpage, invite, note, pay_contact, send_email, open_site, reply];
            description: "Rules on arguments (semantics §16): what a call may carry.";
            approve "large-transfer": send_money when "/amount" range(min = 500);
            rule iban: send_money require "/recipient" regex("^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$");
            rule positive: send_money require "/amount" range(min = 0.01, max = 100000);
            rule "our-sites": get_webpage require "/url" host_in("bank.example", "*.bank.example");
            rule colleagues: invite require all(
                "/participants" length(min = 1, max = 20),
                "/participants" each("/email" glob("*@corp.example")),
            );
            rule "known-recipient": pay_contact
                require "/iban" in_result(get_contacts, "/contacts/*/iban");
            rule "corp-mail": send_email
                require "/to" addresses_in("*@corp.example", "auditor@partner.example");
            rule "bank-host": open_site require "/host" hostname_in("bank.example", "*.bank.example");
            rule "our-links": reply require "/body" links_in("corp.example", "*.corp.example");
            rule "our-addresses": reply require "/body" emails_in("*@corp.example");
            rule "plain-note": note require any("/text" length(max = 200), "/urgent" equals(true));
            default step Chat;
            step Paying {
                when tool_used(get_contacts);
                rule "eur-only": send_money require "/currency" one_of("EUR");
            }
        }
    }
}

/// The rules on arguments written in the DSL compile to the same tables as the JSON
/// template, and judge the same calls the same way.
#[test]
fn same_rules_on_arguments() {
    use dsl_payments::payments as d;
    use json_payments::payments as j;
    use orch::approval::{Call, CallDigest};
    assert_eq!(d::FINGERPRINT, j::FINGERPRINT);
    let calls = [
        (
            "send_money",
            r#"{"recipient": "DE89370400440532013000", "amount": 25.5}"#,
        ),
        (
            "send_money",
            r#"{"recipient": "attacker@evil.example", "amount": 10}"#,
        ),
        (
            "send_money",
            r#"{"recipient": "DE89370400440532013000", "amount": 1200}"#,
        ),
        ("get_webpage", r#"{"url": "https://evil.example/?q=1"}"#),
        (
            "send_email",
            r#"{"to": "ana@corp.example; auditor@partner.example"}"#,
        ),
        (
            "send_email",
            r#"{"to": "eve@evil.example, ana@corp.example"}"#,
        ),
        ("open_site", r#"{"host": "www.bank.example"}"#),
        ("open_site", r#"{"host": "bank.example@evil.example"}"#),
        (
            "reply",
            r#"{"body": "See https://wiki.corp.example/x, ask ana@corp.example"}"#,
        ),
        ("reply", r#"{"body": "Log in at evil.example/login"}"#),
        (
            "invite",
            r#"{"participants": [{"email": "a@corp.example"}, {"email": "x@evil.example"}]}"#,
        ),
        ("note", r#"{"text": "short"}"#),
        ("pay_contact", r#"{"iban": "DE89370400440532013000"}"#),
    ];
    let (a, b) = (d::Session::new(), j::Session::new());
    for (tool, args) in calls {
        let call = Call::new(CallDigest::of_text(tool, args), args);
        let (ta, tb) = (
            d::Tool::from_name(tool).unwrap(),
            j::Tool::from_name(tool).unwrap(),
        );
        let (ra, rb) = (a.check_call(ta, &call), b.check_call(tb, &call));
        assert_eq!(
            ra.as_ref().map_err(|e| e.to_string()),
            rb.as_ref().map_err(|e| e.to_string()),
            "{tool} {args}"
        );
        if let (
            Err(orch::Refusal::BrokenRule { broken: x, .. }),
            Err(orch::Refusal::BrokenRule { broken: y, .. }),
        ) = (&ra, &rb)
        {
            assert_eq!(a.rule_name(x.rule), b.rule_name(y.rule));
            assert_eq!(a.explain_broken(x, args), b.explain_broken(y, args));
        }
    }
}

mod json_provenance {
    orch::include_machine!("provenance");
}

mod dsl_provenance {
    orch::orchestration! {
        /// tests/fixtures/machines/provenance.json, written in the DSL: origins, trust
        /// and the memory's bound (semantics §16).
        pub machine "provenance" {
            tools: [read_file, read_mail, fetch_page, get_contacts, send_money, send_email, invite, message];
            description: "Where a value came from (semantics §16): the user, a trusted tool, an earlier call.";
            trusted: [get_contacts];
            untrusted: [read_file, read_mail, fetch_page];
            remembered_values: 128;
            approve "unknown-address": send_email
                when not("/to" from(user, trusted, arguments(invite, "/email")));
            approve "page-the-user-did-not-name": fetch_page when not("/url" from(user));
            rule "known-recipient": send_money require "/recipient" from(user, trusted);
            rule "invited-only": message require "/to" from(arguments(invite, "/email"));
            default step Assist;
        }
    }
}

/// Origins written in the DSL compile to the same tables as the JSON template, and
/// remember and judge the same.
#[test]
fn same_origins() {
    use dsl_provenance::provenance as d;
    use json_provenance::provenance as j;
    use orch::approval::{Call, CallDigest};
    assert_eq!(d::FINGERPRINT, j::FINGERPRINT);
    let (mut a, mut b) = (d::Session::new(), j::Session::new());
    a.on_user_message("pay DE89 3704 0044 0532 0130 00");
    b.on_user_message("pay DE89 3704 0044 0532 0130 00");
    a.record_result_name("read_file", "pay GB33BUKB20201555555555");
    b.record_result_name("read_file", "pay GB33BUKB20201555555555");
    for args in [
        r#"{"recipient": "DE89370400440532013000"}"#,
        r#"{"recipient": "GB33BUKB20201555555555"}"#,
    ] {
        let call = Call::new(CallDigest::of_text("send_money", args), args);
        assert_eq!(
            a.check_call_name("send_money", &call).is_ok(),
            b.check_call_name("send_money", &call).is_ok(),
            "{args}"
        );
        assert_eq!(
            a.origins(d::Tool::SendMoney, args),
            b.origins(j::Tool::SendMoney, args)
        );
    }
    assert_eq!(a.snapshot().to_bytes(), b.snapshot().to_bytes());
}

mod json_budgets {
    orch::include_machine!("budgets");
}

mod dsl_budgets {
    orch::orchestration! {
        /// tests/fixtures/machines/budgets.json, written in the DSL: counts and sums
        /// over the run, a step and a window (semantics §17).
        pub machine "budgets" {
            tools: [get_balance, send_money, refund, reset_password, search];
            description: "A banking assistant whose payments, refunds, password resets and searches are counted and summed: over the run, a step, or a sliding window.";
            default step Assist;
            step Research {
                when message_contains("research");
            }
            step Review {
                when budget(refunds, min = 3);
                deny: [refund];
            }
            budget "daily-spend": send_money sum "/amount" within "24h";
            budget "big-payments": send_money within "7d" events 8
                where "/amount" range(min = 1000);
            budget refunds: refund;
            budget resets: reset_password within "1h";
            budget searches: search per step;
            approve "second-big-payment": send_money
                when all("/amount" range(min = 1000), budget("big-payments", min = 2));
            rule "daily-limit": send_money require budget("daily-spend", max = 10000);
            rule "three-refunds": refund require budget(refunds, max = 3);
            rule "one-reset-an-hour": reset_password require budget(resets, max = 1);
            rule "two-searches-a-step": search require budget(searches, max = 2);
        }
    }
}

/// Budgets written in the DSL compile to the same tables as the JSON template, and
/// charge and judge the same.
#[test]
fn same_budgets() {
    use dsl_budgets::budgets as d;
    use json_budgets::budgets as j;
    use orch::approval::{Call, CallDigest};
    assert_eq!(d::FINGERPRINT, j::FINGERPRINT);
    let (mut a, mut b) = (d::Session::new(), j::Session::new());
    for (k, args) in [
        r#"{"amount": 4000}"#,
        r#"{"amount": 4000}"#,
        r#"{"amount": 500}"#,
        r#"{"amount": 4000}"#,
    ]
    .into_iter()
    .enumerate()
    {
        let call = Call::new(CallDigest::of_text("send_money", args), args).at(1_000 + k as u64);
        assert_eq!(
            a.admit_call_name("send_money", &call).is_ok(),
            b.admit_call_name("send_money", &call).is_ok(),
            "{args}"
        );
    }
    assert_eq!(a.snapshot().to_bytes(), b.snapshot().to_bytes());
}

mod json_balance {
    orch::include_machine!("balance");
}

mod dsl_balance {
    orch::orchestration! {
        /// tests/fixtures/machines/balance.json, written in the DSL: bounds from results
        /// (semantics §16).
        pub machine balance {
            tools: [get_balance, get_fee, pay];
            description: "A payments assistant that never pays more than the balance the account last reported, nor less than the fee.";
            default step Assist;
            rule "within-balance": pay require "/amount"
                range(min = result(get_fee, "/fee"), max = result(get_balance, "/balance"));
            rule positive: pay require "/amount" range(min = 0.01);
        }
    }
}

/// A `range` bound from a result written in the DSL compiles to the same tables as the
/// JSON template.
#[test]
fn same_result_bounds() {
    assert_eq!(
        dsl_balance::balance::FINGERPRINT,
        json_balance::balance::FINGERPRINT
    );
}

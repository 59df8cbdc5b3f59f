//! A support agent whose steps use message conditions (contains and regex), sequence
//! groups, wildcards, deny lists, `not_recently_used` and `resetSequenceOn`. Compiled by
//! build.rs from `examples/agents/support-triage/template.json`. The host here offers one
//! tool the template does not know (`weather`): it is a foreign tool, judged by the
//! active step's patterns.
//!
//! Run: `cargo run --example support_triage`

orch::include_machine!("support-triage");
use support_triage::{Session, Tool};

const HOST_TOOLS: [&str; 13] = [
    "kb_search",
    "kb_fetch",
    "crm_lookup",
    "crm_update",
    "refund_check",
    "refund_issue",
    "ticket_create",
    "ticket_update",
    "ticket_close",
    "escalate_human",
    "send_email",
    "send_sms",
    "weather",
];

fn show(s: &Session, what: &str) {
    let step = s.step().map_or("none", |st| st.name());
    let offered: Vec<&str> = s.filter_names(HOST_TOOLS).collect();
    println!(
        "  {what:<40} step={step:<13} index={} offered={offered:?}",
        s.sequence_index()
    );
}

fn main() {
    let mut s = Session::new();
    show(&s, "start");
    let script: &[(&str, &[&str])] = &[
        (
            "Hi, I was charged twice last month",
            &[
                "crm_lookup",
                "send_email",
                "refund_check",
                "refund_issue",
                "send_sms",
            ],
        ),
        (
            "I want a refund for the other order too",
            &["crm_lookup", "refund_check"],
        ),
        (
            "Actually, cancel my subscription",
            &["crm_lookup", "ticket_update"],
        ),
        ("Please cancel it today", &["ticket_create"]),
        (
            "Your service is down again",
            &["kb_search", "ticket_create"],
        ),
        ("still down!", &["kb_fetch"]),
        ("Thanks for the help", &["weather", "send_email"]),
    ];
    for (message, calls) in script {
        println!("\ncustomer: {message}");
        s.on_user_message(message);
        show(&s, "after message");
        for name in *calls {
            if let Err(why) = s.check_name(name) {
                println!("  {name}: refused ({why}) -- the host would not run it");
                continue;
            }
            let outcome = s.record_name(name);
            show(&s, &format!("{name} -> {outcome}"));
        }
    }
    // The orchestration does not change what tools exist; the host's list does.
    s.set_available(Tool::ALL.into_iter().filter(|t| *t != Tool::CrmLookup));
    s.on_user_message("refund please");
    println!(
        "\nhost without crm_lookup: blocked_on={:?} allowed={}",
        s.blocked_on().map(|b| b.to_string()),
        s.allowed()
    );
}

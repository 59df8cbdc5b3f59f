//! The `serde` feature: a session's state by names, round-tripped and validated.

orch::include_machine!("conformance");
use conformance::{Session, Tool};

fn busy_session() -> Session {
    let mut s = Session::new().with_available(Tool::ALL.into_iter().filter(|t| *t != Tool::Danger));
    s.on_user_message("critique it");
    s.record(Tool::Critique);
    s.record_name("a_foreign_tool");
    s.record(Tool::Summarize);
    s.on_user_message("Evaluate, then research");
    s.record_usage(120, 30);
    s
}

#[test]
fn round_trip_is_exact() {
    let s = busy_session();
    let json = serde_json::to_string(&s).unwrap();
    let back: Session = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);
    // ... and behaves the same from there on.
    let (mut a, mut b) = (s, back);
    for t in [Tool::Search, Tool::Think, Tool::Reflect] {
        assert_eq!(a.record(t), b.record(t));
        assert_eq!(a.allowed(), b.allowed());
    }
}

#[test]
fn reads_as_names() {
    let v: serde_json::Value = serde_json::to_value(busy_session()).unwrap();
    assert_eq!(v["machine"], "conformance");
    assert_eq!(v["version"], 1);
    assert_eq!(v["fingerprint"], conformance::FINGERPRINT);
    assert_eq!(v["step"], "Research");
    assert_eq!(
        v["history"],
        serde_json::json!(["critique", null, "summarize"])
    );
    assert_eq!(
        v["matched"],
        serde_json::json!(["contains:research", "regex:(?i)critique|evaluate"])
    );
    assert_eq!(
        v["usage"],
        serde_json::json!({"prompt": 120, "completion": 30})
    );
}

#[test]
fn bad_input_is_an_error_that_says_what() {
    let good = serde_json::to_value(busy_session()).unwrap();
    let cases: &[(&str, serde_json::Value, &str)] = &[
        ("machine", "other".into(), "belongs to machine `other`"),
        ("version", 7.into(), "format version 7 is not supported"),
        ("step", "Nope".into(), "unknown step `Nope`"),
        ("sequenceIndex", 9.into(), "past the end of the sequence"),
        ("used", serde_json::json!(["nope"]), "unknown tool `nope`"),
        (
            "history",
            serde_json::json!(["nope"]),
            "unknown tool `nope`",
        ),
        (
            "history",
            serde_json::json!(vec!["think"; 11]),
            "more than this machine keeps",
        ),
        (
            "matched",
            serde_json::json!(["contains:zzz"]),
            "unknown message condition",
        ),
        (
            "usage",
            serde_json::json!({"prompt": -1, "completion": 0}),
            "invalid value",
        ),
    ];
    for (field, value, expect) in cases {
        let mut v = good.clone();
        v[*field] = value.clone();
        let err = serde_json::from_value::<Session>(v)
            .unwrap_err()
            .to_string();
        assert!(err.contains(expect), "{field}: {err}");
    }
    assert!(serde_json::from_str::<Session>("{\"machine\": \"conformance\"").is_err());
    assert!(serde_json::from_str::<Session>("[]").is_err());
}

//! More than 64 tools: a 200-tool machine (four words per tool set), with patterns,
//! deny lists and a sequence whose positions sit in different words.

orch::include_machine!("wide");
use orch::Outcome;
use wide::{Session, Step, Tool};

#[test]
fn two_hundred_tools() {
    assert_eq!(Tool::ALL.len(), 200);
    assert_eq!(Tool::T199.index(), 199);
    assert_eq!(Tool::from_name("t137"), Some(Tool::T137));
    let mut s = Session::new();
    // Start: allowed ["t0*"] → t000..t099.
    assert_eq!(s.step(), Some(Step::Start));
    assert_eq!(s.allowed().len(), 100);
    assert!(s.allowed().contains(Tool::T099));
    assert!(!s.allowed().contains(Tool::T100));

    // Hundreds: allowed ["t1*"], denied ["t19*"] → t100..t189.
    s.on_user_message("the hundreds please");
    assert_eq!(s.step(), Some(Step::Hundreds));
    let allowed = s.allowed();
    assert_eq!(allowed.len(), 90);
    assert_eq!(allowed.first(), Some(Tool::T100));
    assert!(!allowed.contains(Tool::T190));
    assert!(allowed.contains(Tool::T189));

    // Chain: tool_used t190 → sequence t063, t064, [t127|t128], t199 across words 0..3.
    // (From a fresh session: Hundreds comes first and its message would still hold.)
    let mut s = Session::new();
    assert_eq!(s.record(Tool::T190), Outcome::NotAllowed);
    assert_eq!(s.step(), Some(Step::Chain));
    assert_eq!(s.allowed().iter().collect::<Vec<_>>(), [Tool::T063]);
    assert_eq!(s.record(Tool::T063), Outcome::Advanced { index: 1 });
    assert_eq!(s.record(Tool::T064), Outcome::Advanced { index: 2 });
    assert_eq!(
        s.allowed().iter().collect::<Vec<_>>(),
        [Tool::T127, Tool::T128]
    );
    assert_eq!(s.record(Tool::T128), Outcome::Advanced { index: 3 });
    assert_eq!(s.record(Tool::T199), Outcome::Completed);
    // Then its static set: t060..t069, t120..t129, t199.
    assert_eq!(s.allowed().len(), 21);
}

#[test]
fn wide_not_recently_used_and_regex() {
    let mut s = Session::new();
    s.record(Tool::T150);
    s.on_user_message("tail");
    assert_eq!(
        s.step(),
        Some(Step::Start),
        "t150 was used within the last 4"
    );
    for t in [Tool::T001, Tool::T002, Tool::T003, Tool::T004] {
        s.record(t);
    }
    s.on_user_message("tail");
    assert_eq!(s.step(), Some(Step::Tail));
    // denied ["t0*"] → t100..t199.
    assert_eq!(s.allowed().len(), 100);
    s.on_user_message("tail!");
    assert_eq!(
        s.step(),
        Some(Step::Tail),
        "^tail$ does not match, the step stays"
    );
}

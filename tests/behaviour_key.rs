//! The engine's behaviour key (step, index and the derived condition state) is exact:
//! two sessions of the same machine with equal keys — reached by different histories —
//! answer every future event identically. Random templates; sessions reached by many
//! random streams are grouped by key, and every pair that shares a key is driven by the
//! same continuation and compared after each event.

mod common;

use common::{Event, MESSAGES};
use orch::dynamic::{DynMachine, DynSession};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Pairs of sessions with equal keys and different histories that were compared.
static PAIRS: AtomicUsize = AtomicUsize::new(0);

fn machine(src: &str) -> DynMachine {
    let compiled = orch_codegen::compile_json(src, None);
    assert!(!compiled.has_errors());
    compiled.to_machine().unwrap()
}

/// Applies one event (messages and tools only: the host's tools stay fixed).
fn apply(s: &mut DynSession<'_>, tools: &[String], e: &Event) -> String {
    match e {
        Event::Message(i) => {
            s.on_user_message(MESSAGES[i.index(MESSAGES.len())]);
            String::new()
        }
        Event::Tool(i) => format!("{:?}", s.record(&tools[i.index(tools.len())])),
        Event::Foreign => format!("{:?}", s.record("tool_foreign")),
        Event::Reset => {
            s.reset();
            String::new()
        }
        Event::Available(_) | Event::Usage(..) => String::new(),
    }
}

fn observe(s: &DynSession<'_>, tools: &[String]) -> String {
    let checks: Vec<bool> = tools.iter().map(|t| s.check(t).is_ok()).collect();
    format!(
        "{:?} {} {:?} {:?} {:?}",
        s.step(),
        s.sequence_index(),
        s.allowed(),
        s.blocked_on(),
        checks
    )
}

#[test]
fn equal_keys_have_equal_futures() {
    let strategy = (
        common::template(),
        prop::collection::vec(common::events(12), 40),
        common::events(40),
    );
    common::check(120, strategy, |(src, prefixes, continuation)| {
        let m = machine(&src);
        let tools = m.tools().to_vec();
        let mut seen: HashMap<Vec<u64>, DynSession<'_>> = HashMap::new();
        let mut key = Vec::new();
        let mut pairs = 0;
        for prefix in &prefixes {
            let mut s = m.session();
            for e in prefix {
                apply(&mut s, &tools, e);
            }
            s.behaviour_key(&mut key);
            match seen.get(&key) {
                None => {
                    seen.insert(key.clone(), s);
                }
                Some(first) => {
                    pairs += 1;
                    let (mut a, mut b) = (first.clone(), s);
                    prop_assert_eq!(observe(&a, &tools), observe(&b, &tools));
                    for (n, e) in continuation.iter().enumerate() {
                        let (oa, ob) = (apply(&mut a, &tools, e), apply(&mut b, &tools, e));
                        prop_assert_eq!(oa, ob, "outcome of event {} {:?}", n, e);
                        prop_assert_eq!(
                            observe(&a, &tools),
                            observe(&b, &tools),
                            "after event {} {:?}",
                            n,
                            e
                        );
                        let (mut ka, mut kb) = (Vec::new(), Vec::new());
                        a.behaviour_key(&mut ka);
                        b.behaviour_key(&mut kb);
                        prop_assert_eq!(ka, kb, "keys stay equal after event {}", n);
                    }
                }
            }
        }
        PAIRS.fetch_add(pairs, Ordering::Relaxed);
        Ok(())
    });
    // The property is not vacuous: many pairs were compared.
    let pairs = PAIRS.load(Ordering::Relaxed);
    assert!(pairs > 1000, "only {pairs} pairs with equal keys");
}

/// A message given as its flags does what the message itself does.
#[test]
fn a_message_by_its_flags_equals_the_message() {
    let strategy = (common::template(), common::events(60));
    common::check(150, strategy, |(src, events)| {
        let m = machine(&src);
        let tools = m.tools().to_vec();
        let mut by_text = m.session();
        let mut by_flags = m.session();
        for e in &events {
            match e {
                Event::Message(i) => {
                    let msg = MESSAGES[i.index(MESSAGES.len())];
                    by_text.on_user_message(msg);
                    // The flags the message set, read back from the snapshot.
                    let matched = by_text.snapshot().matched;
                    let t = m.tables();
                    let mut flags =
                        vec![0u64; (t.contains.len() + t.regexes.len()).div_ceil(64).max(1)];
                    for name in matched {
                        let i = if let Some(c) = name.strip_prefix("contains:") {
                            t.contains.iter().position(|x| x == c).unwrap()
                        } else {
                            let r = name.strip_prefix("regex:").unwrap();
                            t.contains.len() + t.regexes.iter().position(|x| x == r).unwrap()
                        };
                        flags[i / 64] |= 1 << (i % 64);
                    }
                    by_flags.on_message_flags(&flags);
                }
                other => {
                    let (a, b) = (
                        apply(&mut by_text, &tools, other),
                        apply(&mut by_flags, &tools, other),
                    );
                    prop_assert_eq!(a, b);
                }
            }
            prop_assert_eq!(observe(&by_text, &tools), observe(&by_flags, &tools));
        }
        Ok(())
    });
}

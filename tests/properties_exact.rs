//! The property checker (`orch verify`, E023) is exact: on random templates with random
//! approval gates and random properties, a depth-bounded breadth-first search over the
//! concrete engine (every tool `check` admits, gated tools with an approval, a foreign
//! tool, fixed messages, reset) never finds a violation the checker missed, nor a
//! shorter one; and every violation the checker reports replays through the engine, its
//! last event the violating call.

mod common;

use common::MESSAGES;
use orch::dynamic::{DynMachine, DynSession};
use orch_codegen::ir::{IrProperty, IrRule};
use orch_codegen::verify::explore::{Event, Options};
use orch_runtime::compiled::glob_match;
use proptest::prelude::*;
use std::collections::HashSet;

/// A random property over `n` tools: its tool (a name, `tool_*`, or the foreign
/// `tool_f*`), and its rule.
fn property_spec() -> impl Strategy<Value = (usize, usize, usize, u8)> {
    (0usize..12, 0usize..4, 0usize..12, 0u8..3)
}

fn tool_pattern(i: usize, n: usize) -> String {
    match i % 6 {
        4 => "tool_*".to_owned(),
        5 => "tool_f*".to_owned(),
        _ => format!("tool_{}", i % n),
    }
}

/// The template `src` with gates and properties added.
fn with_gates_and_properties(
    src: &str,
    gates: &[(usize, usize)],
    global: Option<usize>,
    properties: &[(usize, usize, usize, u8)],
) -> (String, Vec<IrProperty>) {
    let mut t: serde_json::Value = serde_json::from_str(src).unwrap();
    let n = t["tools"].as_array().unwrap().len();
    let steps = t["orchestration"]["steps"].as_array_mut().unwrap();
    let n_steps = steps.len();
    for &(step, tool) in gates {
        let step = &mut steps[step % n_steps];
        if step.get("availableTools").is_none() {
            step["availableTools"] = serde_json::json!({});
        }
        let list = step["availableTools"]
            .as_object_mut()
            .unwrap()
            .entry("approve")
            .or_insert_with(|| serde_json::json!([]));
        list.as_array_mut()
            .unwrap()
            .push(tool_pattern(tool, n).into());
    }
    if let Some(g) = global {
        t["orchestration"]["approve"] = serde_json::json!([tool_pattern(g, n)]);
    }
    let mut ir = Vec::new();
    let mut json = Vec::new();
    for (k, &(tool, rule, other, count)) in properties.iter().enumerate() {
        let name = format!("p{k}");
        let tool = tool_pattern(tool, n);
        let (rule, key, value) = match rule {
            0 => (IrRule::Never, "never", serde_json::json!(true)),
            1 => (IrRule::Approved, "approved", serde_json::json!(true)),
            2 => (
                IrRule::AtMost(u64::from(count)),
                "atMost",
                serde_json::json!(count),
            ),
            _ => {
                let q = tool_pattern(other, n);
                (IrRule::After(q.clone()), "after", serde_json::json!(q))
            }
        };
        json.push(serde_json::json!({"name": name, "tool": tool, key: value}));
        ir.push(IrProperty {
            name,
            tool,
            rule,
            when: None,
            span: orch_codegen::Span::default(),
        });
    }
    t["orchestration"]["properties"] = json.into();
    (t.to_string(), ir)
}

/// The monitor after running `tool` from `m`, or `Err` when running it violates `p`.
fn step_monitor(p: &IrProperty, m: u64, tool: &str, approved: bool) -> Result<u64, ()> {
    let hit = glob_match(&p.tool, tool);
    match &p.rule {
        IrRule::Never if hit => Err(()),
        IrRule::Approved if hit && !approved => Err(()),
        IrRule::AtMost(n) if hit && m >= *n => Err(()),
        IrRule::AtMost(_) if hit => Ok(m + 1),
        IrRule::After(_) if hit && m == 0 => Err(()),
        IrRule::After(q) if glob_match(q, tool) => Ok(1),
        _ => Ok(m),
    }
}

/// The shortest violation of `p` within `depth` events, by brute force (its length).
fn brute_force(m: &DynMachine, p: &IrProperty, depth: usize) -> Option<usize> {
    let tools: Vec<String> = m
        .tools()
        .iter()
        .cloned()
        .chain(["tool_foreign".to_owned()])
        .collect();
    let mut frontier: Vec<(DynSession<'_>, u64)> = vec![(m.session(), 0)];
    let mut seen: HashSet<Vec<u64>> = HashSet::new();
    let mut key = Vec::new();
    for d in 1..=depth {
        let mut next = Vec::new();
        for (s, mon) in &frontier {
            for t in &tools {
                let approved = match s.check(t) {
                    Ok(()) => false,
                    Err(e) if e.needs_approval() => true,
                    Err(_) => continue,
                };
                let Ok(mon) = step_monitor(p, *mon, t, approved) else {
                    return Some(d);
                };
                let mut n = s.clone();
                n.record(t);
                n.behaviour_key(&mut key);
                key.push(mon);
                if seen.insert(key.clone()) {
                    next.push((n, mon));
                }
            }
            let mut moves: Vec<(DynSession<'_>, u64)> = MESSAGES
                .iter()
                .map(|msg| {
                    let mut n = s.clone();
                    n.on_user_message(msg);
                    (n, *mon)
                })
                .collect();
            let mut r = s.clone();
            r.reset();
            moves.push((r, 0));
            for (n, mon) in moves {
                n.behaviour_key(&mut key);
                key.push(mon);
                if seen.insert(key.clone()) {
                    next.push((n, mon));
                }
            }
        }
        frontier = next;
    }
    None
}

#[test]
fn brute_force_never_beats_the_property_checker() {
    let cases = (
        common::template(),
        prop::collection::vec((0usize..8, 0usize..12), 0..3),
        prop::option::of(0usize..12),
        prop::collection::vec(property_spec(), 1..4),
    );
    common::check(80, cases, |(src, gates, global, specs)| {
        let (src, properties) = with_gates_and_properties(&src, &gates, global, &specs);
        let compiled = orch_codegen::compile_json_with(
            &src,
            None,
            orch_codegen::CheckOptions {
                prove_properties: false,
                ..Default::default()
            },
        );
        prop_assert!(!compiled.has_errors(), "{:#?}", compiled.diagnostics);
        let m = compiled.to_machine().unwrap();
        let found =
            orch_codegen::verify::properties::check(&m, &properties, &Options::default()).unwrap();
        for (p, f) in properties.iter().zip(&found) {
            prop_assert!(f.holds.is_some(), "{} undecided", p.name);
            if let Some(w) = &f.witness {
                // The witness replays; its last event is the violating call.
                let mut s = m.session();
                let mut mon = 0;
                for (i, e) in w.iter().enumerate() {
                    let last = i + 1 == w.len();
                    match e {
                        // (The generated templates have no budgets: no call carries a time.)
                        Event::Tool(t) | Event::ApprovedTool(t) | Event::Later(t, _) => {
                            let approved = matches!(e, Event::ApprovedTool(_));
                            match s.check(t) {
                                Ok(()) => prop_assert!(!approved, "{t} needed no approval"),
                                Err(d) => prop_assert!(approved && d.needs_approval(), "{t}: {d}"),
                            }
                            match step_monitor(p, mon, t, approved) {
                                Ok(next) => {
                                    prop_assert!(!last, "the last event violates {}", p.name);
                                    mon = next;
                                }
                                Err(()) => prop_assert!(last, "{} violated early", p.name),
                            }
                            s.record(t);
                        }
                        Event::Message(text) => s.on_user_message(text),
                        Event::Reset => {
                            s.reset();
                            mon = 0;
                        }
                        Event::Available(l) => s.set_available(l.iter().map(String::as_str)),
                    }
                    prop_assert!(!last || e.tool().is_some());
                }
            }
            if let Some(depth) = brute_force(&m, p, 5) {
                prop_assert_eq!(f.holds, Some(false), "{} violated by brute force", &p.name);
                let len = f.witness.as_ref().map_or(0, Vec::len);
                prop_assert!(
                    len <= depth,
                    "{}: witness {len} > brute force {depth}",
                    p.name
                );
            }
        }
        Ok(())
    });
}

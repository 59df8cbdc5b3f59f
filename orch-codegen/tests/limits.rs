//! Exact size properties of the compiled form at scale: a step's tool set costs one bit
//! per tool, identical sets are stored once, and past `MAX_TABLE_WORDS` the template is
//! refused (E019) instead of compiled into tables rustc could not swallow.

use orch_codegen::limits::MAX_TABLE_WORDS;
use orch_codegen::{compile_json, Code};

fn template(tools: usize, steps: usize, distinct_sets: usize) -> String {
    let tools_json: Vec<String> = (0..tools).map(|i| format!("\"t{i}\"")).collect();
    let mut steps_json = vec![r#"{"name": "Idle", "isDefault": true}"#.to_owned()];
    for i in 0..steps {
        let deny = if i < distinct_sets {
            format!(r#", "availableTools": {{"denied": ["t{}"]}}"#, i % tools)
        } else {
            String::new()
        };
        steps_json.push(format!(
            r#"{{"name": "s{i}", "conditions": [{{"type": "tool_used", "value": "t{}"}}]{deny}}}"#,
            i % tools
        ));
    }
    format!(
        r#"{{"agentId": "big", "tools": [{}], "orchestration": {{"steps": [{}]}}}}"#,
        tools_json.join(","),
        steps_json.join(",")
    )
}

#[test]
fn identical_tool_sets_are_stored_once() {
    // 2,000 steps over 4,096 tools (64 words a set), none with `availableTools`: one set.
    let c = compile_json(&template(4096, 2000, 0), None);
    assert!(!c.has_errors(), "{:?}", c.diagnostics.first());
    let ir = c.ir.unwrap();
    assert_eq!(ir.words(), 64);
    assert_eq!(ir.to_tables().bits.len(), 64);
    // 100 of them with a set of their own: 101 sets.
    let c = compile_json(&template(4096, 2000, 100), None);
    assert_eq!(c.ir.unwrap().to_tables().bits.len(), 101 * 64);
}

#[test]
fn tables_past_the_limit_are_refused() {
    // 16,384 tools take 256 words a set: 1,025 distinct sets pass the 262,144-word cap.
    let sets = MAX_TABLE_WORDS / 256 + 1;
    let c = compile_json(&template(16_384, sets, sets), None);
    let e019: Vec<_> = c
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::LimitExceeded)
        .collect();
    assert_eq!(e019.len(), 1, "{:?}", c.diagnostics);
    assert!(
        e019[0].message.contains(&format!(
            "the compiled tool sets take {} words",
            (sets + 1) * 256
        )),
        "{}",
        e019[0].message
    );
    assert!(c.ir.is_none());
    // One set fewer is accepted.
    let c = compile_json(&template(16_384, sets - 2, sets - 2), None);
    assert!(!c.has_errors(), "{:?}", c.diagnostics.first());
}

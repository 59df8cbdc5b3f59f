//! Templates that benchmarks share.

/// The largest generated template of the benchmarks, as JSON: a default step and 500
/// steps over 200 tools, each with a `message_contains` condition, a two-position
/// sequence (the second a group) and an allow list. `orch-codegen`'s `expand` bench
/// compiles it; `orch-cli`'s `commands` bench runs `orch check` and `orch verify` on it.
pub fn large_json() -> String {
    const TOOLS: usize = 200;
    const STEPS: usize = 500;
    let mut steps = vec![r#"{"name": "Start", "isDefault": true}"#.to_owned()];
    for i in 0..STEPS {
        let (a, b) = (i % TOOLS, (i * 7 + 3) % TOOLS);
        steps.push(format!(
            r#"{{"name": "S{i}", "conditions": [{{"type": "message_contains", "value": "w{i}"}}], "sequence": ["t{a:03}", ["t{b:03}"]], "availableTools": {{"allowed": ["t{a:03}", "t{b:03}"]}}}}"#
        ));
    }
    let tools: Vec<String> = (0..TOOLS).map(|t| format!("\"t{t:03}\"")).collect();
    format!(
        r#"{{"agentId": "big", "tools": [{}], "orchestration": {{"steps": [{}]}}}}"#,
        tools.join(","),
        steps.join(",\n")
    )
}

//! Shared by the agent tests: the cognitive reasoner's tools, logging what ran.
#![allow(dead_code)]

pub mod fake;

use orch_agent::ToolRegistry;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The names of the tools that ran, in order.
pub type Log = Arc<Mutex<Vec<String>>>;

/// The cognitive reasoner's tools.
pub const TOOLS: [&str; 7] = [
    "search",
    "think",
    "reflect",
    "compare",
    "critique",
    "brainstorm",
    "debate",
];

/// Every cognitive tool except `skip`; each returns `name(input)` and logs its run.
pub fn tools(skip: &[&str]) -> (ToolRegistry, Log) {
    let log: Log = Arc::default();
    let mut reg = ToolRegistry::new();
    for name in TOOLS {
        if skip.contains(&name) {
            continue;
        }
        let l = log.clone();
        let params =
            serde_json::json!({"type": "object", "properties": {"input": {"type": "string"}}});
        reg.register(name, &format!("the {name} tool"), params, move |args| {
            let l = l.clone();
            async move {
                l.lock().unwrap().push(name.to_owned());
                Ok(format!("{name}({})", args["input"].as_str().unwrap_or("")))
            }
        });
    }
    (reg, log)
}

/// How often each tool ran.
pub fn counts(log: &Log) -> HashMap<String, usize> {
    let mut c = HashMap::new();
    for name in log.lock().unwrap().iter() {
        *c.entry(name.clone()).or_default() += 1;
    }
    c
}

/// A decision log kept in memory (one JSON record a line) and the sink that writes it.
pub fn decision_log() -> (
    Arc<Mutex<String>>,
    impl Fn(&orch_agent::audit::DecisionRecord) + Send + Sync + 'static,
) {
    let log = Arc::new(Mutex::new(String::new()));
    let sink = {
        let log = log.clone();
        move |r: &orch_agent::audit::DecisionRecord| {
            let mut log = log.lock().unwrap();
            log.push_str(&serde_json::to_string(r).unwrap());
            log.push('\n');
        }
    };
    (log, sink)
}

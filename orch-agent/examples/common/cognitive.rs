//! The cognitive reasoner's tools, shared by the examples (`openai_agent`,
//! `genai_agent`, `rig_agent`): real local work on a small bundled corpus
//! (examples/corpus/) — keyword search, outlining, reflection over what was gathered,
//! comparison, critique, brainstorming, both sides of a claim.
#![allow(dead_code)]

use orch_agent::ToolRegistry;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

/// What the tools gathered during a turn (search and think results), for `reflect`.
pub type Notes = Arc<Mutex<Vec<String>>>;

/// The tools: name and description.
pub const TOOLS: [(&str, &str); 7] = [
    (
        "search",
        "Search the knowledge base; returns the most relevant passages with their source.",
    ),
    (
        "think",
        "Structure a text into an outline of its key points and terms.",
    ),
    (
        "reflect",
        "Reflect on everything gathered so far: sources, recurring terms, hedged claims.",
    ),
    (
        "compare",
        "Compare two topics by the terms their passages share and do not share.",
    ),
    (
        "critique",
        "Flag sweeping or unsupported statements in a text.",
    ),
    (
        "brainstorm",
        "Propose ideas by combining key terms of the relevant passages.",
    ),
    ("debate", "Collect passages on both sides of a claim."),
];

/// A tool's parameters (JSON Schema).
pub fn parameters(name: &str) -> Value {
    let text_param = |desc: &str| json!({"type": "object", "properties": {"input": {"type": "string", "description": desc}}, "required": ["input"]});
    match name {
        "search" => {
            json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]})
        }
        "think" => text_param("what to structure"),
        "reflect" => text_param("focus of the reflection"),
        "compare" => {
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a", "b"]})
        }
        "critique" => text_param("the text to critique"),
        "brainstorm" => text_param("the topic"),
        _ => text_param("the claim"),
    }
}

/// The tools as orch's `ToolRegistry`.
pub fn registry(notes: Notes) -> ToolRegistry {
    let mut reg = ToolRegistry::new();
    for (name, description) in TOOLS {
        let notes = notes.clone();
        reg.register(name, description, parameters(name), move |args| {
            let notes = notes.clone();
            async move { run(name, &args, &notes) }
        });
    }
    reg
}

fn lock(notes: &Notes) -> std::sync::MutexGuard<'_, Vec<String>> {
    notes.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs the tool `name`.
#[allow(
    clippy::too_many_lines,
    reason = "the example's whole session, in the order a reader follows it"
)]
pub fn run(name: &str, args: &Value, notes: &Notes) -> Result<String, String> {
    match name {
        "search" => {
            let query = arg(args, &["query", "input"]);
            let hits = rank(&query);
            if hits.is_empty() {
                return Err(format!(
                    "no document mentions any of: {}",
                    words(&query).join(", ")
                ));
            }
            let q: HashSet<String> = words(&query).into_iter().collect();
            let mut out = String::new();
            for (id, text, score) in hits.iter().take(2) {
                let best: Vec<&str> = sentences(text)
                    .into_iter()
                    .filter(|s| words(s).iter().any(|w| q.contains(w)))
                    .take(3)
                    .collect();
                out.push_str(&format!("[{id}, {score} matches] {}\n", best.join(" ")));
            }
            lock(notes).push(out.clone());
            Ok(out)
        }
        "think" => {
            let mut input = arg(args, &["input", "text"]);
            if input.is_empty() {
                input = lock(notes).join(" ");
            }
            let points: Vec<String> = sentences(&input)
                .iter()
                .take(6)
                .enumerate()
                .map(|(i, s)| format!("{}. {s}", i + 1))
                .collect();
            let out = format!(
                "key terms: {}\noutline:\n{}",
                key_terms(&input, 6).join(", "),
                points.join("\n")
            );
            lock(notes).push(out.clone());
            Ok(out)
        }
        "reflect" => {
            let all = lock(notes).join("\n");
            let hedged: Vec<&str> = sentences(&all)
                .into_iter()
                .filter(|s| {
                    ["may", "might", "often", "vary", "depend"]
                        .iter()
                        .any(|h| s.to_lowercase().contains(h))
                })
                .take(3)
                .collect();
            Ok(format!(
                "{} notes gathered; recurring terms: {}; uncertain claims: {}",
                all.lines().filter(|l| !l.is_empty()).count(),
                key_terms(&all, 5).join(", "),
                if hedged.is_empty() {
                    "none".to_owned()
                } else {
                    hedged.join(" | ")
                }
            ))
        }
        "compare" => {
            let side = |t: &str| -> HashSet<String> {
                rank(t)
                    .first()
                    .map(|h| key_terms(h.1, 15).into_iter().collect())
                    .unwrap_or_default()
            };
            let (a, b) = (arg(args, &["a"]), arg(args, &["b"]));
            let (sa, sb) = (side(&a), side(&b));
            let mut shared: Vec<_> = sa.intersection(&sb).cloned().collect();
            let mut only_a: Vec<_> = sa.difference(&sb).cloned().collect();
            let mut only_b: Vec<_> = sb.difference(&sa).cloned().collect();
            shared.sort();
            only_a.sort();
            only_b.sort();
            Ok(format!(
                "shared: {}\nonly {a}: {}\nonly {b}: {}",
                shared.join(", "),
                only_a.join(", "),
                only_b.join(", ")
            ))
        }
        "critique" => {
            let input = arg(args, &["input", "text"]);
            let flags: Vec<String> = sentences(&input)
                .into_iter()
                .filter_map(|s| {
                    let l = s.to_lowercase();
                    let hit = [
                        "always",
                        "never",
                        "all ",
                        "everyone",
                        "nobody",
                        "obviously",
                        "clearly",
                    ]
                    .iter()
                    .find(|w| l.contains(*w))?;
                    Some(format!("\"{s}\" (sweeping: {})", hit.trim()))
                })
                .collect();
            Ok(if flags.is_empty() {
                "no sweeping statements found".to_owned()
            } else {
                flags.join("\n")
            })
        }
        "brainstorm" => {
            let topic = arg(args, &["input", "topic"]);
            let terms: Vec<String> = rank(&topic)
                .iter()
                .take(2)
                .flat_map(|h| key_terms(h.1, 4))
                .collect();
            if terms.len() < 2 {
                return Err(format!(
                    "nothing in the knowledge base relates to `{topic}`"
                ));
            }
            let ideas: Vec<String> = terms
                .windows(2)
                .take(4)
                .map(|w| format!("- combine {} with {}", w[0], w[1]))
                .collect();
            Ok(ideas.join("\n"))
        }
        "debate" => {
            let claim = arg(args, &["input", "claim"]);
            let Some((id, text, _)) = rank(&claim).into_iter().next() else {
                return Err("no passage relates to this claim".to_owned());
            };
            let (against, pro): (Vec<&str>, Vec<&str>) =
                sentences(text).into_iter().partition(|s| {
                    ["however", "but", "although", "less", "lose"]
                        .iter()
                        .any(|w| s.to_lowercase().contains(w))
                });
            Ok(format!(
                "[{id}] for: {}\nagainst: {}",
                pro.join(" "),
                against.join(" ")
            ))
        }
        other => Err(format!("there is no tool `{other}`")),
    }
}

const CORPUS: [(&str, &str); 5] = [
    ("ai-and-jobs", include_str!("../corpus/ai-and-jobs.txt")),
    ("remote-work", include_str!("../corpus/remote-work.txt")),
    (
        "solar-and-wind",
        include_str!("../corpus/solar-and-wind.txt"),
    ),
    ("food-waste", include_str!("../corpus/food-waste.txt")),
    ("traffic", include_str!("../corpus/traffic.txt")),
];

const STOP: [&str; 40] = [
    "the", "a", "an", "and", "or", "of", "to", "in", "on", "for", "is", "are", "be", "it", "that",
    "this", "with", "as", "by", "at", "from", "more", "most", "can", "may", "their", "they",
    "than", "but", "not", "what", "how", "does", "do", "which", "will", "into", "about", "we", "i",
];

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.len() > 2 && !STOP.contains(&w.as_str()))
        .collect()
}

fn sentences(text: &str) -> Vec<&str> {
    text.split_inclusive(['.', '!', '?'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// The most frequent terms of `text`.
fn key_terms(text: &str, n: usize) -> Vec<String> {
    let mut freq: BTreeMap<String, usize> = BTreeMap::new();
    for w in words(text) {
        *freq.entry(w).or_default() += 1;
    }
    let mut v: Vec<(String, usize)> = freq.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.into_iter().take(n).map(|(w, _)| w).collect()
}

/// Documents ranked by how many query terms they contain (weighted by frequency).
fn rank(query: &str) -> Vec<(&'static str, &'static str, usize)> {
    let q: HashSet<String> = words(query).into_iter().collect();
    let mut hits: Vec<(&str, &str, usize)> = CORPUS
        .iter()
        .map(|(id, text)| {
            (
                *id,
                *text,
                words(text).iter().filter(|w| q.contains(*w)).count(),
            )
        })
        .filter(|h| h.2 > 0)
        .collect();
    hits.sort_by_key(|h| std::cmp::Reverse(h.2));
    hits
}

fn arg(args: &Value, keys: &[&str]) -> String {
    keys.iter()
        .find_map(|k| args[*k].as_str())
        .unwrap_or("")
        .to_owned()
}

/// Prints a round of orch's loop: what was offered and forced, each call and what
/// became of it (refusals with the reason the model was given).
pub fn print_round(report: &orch_agent::RoundReport) {
    println!(
        "round {}: offered {:?}, tool choice {}",
        report.number, report.offered, report.tool_choice
    );
    for c in &report.calls {
        let status = c.outcome.unwrap_or("refused");
        println!(
            "  {}({}) -> {status}\n    {}",
            c.call.name,
            c.call.arguments,
            c.result.replace('\n', "\n    ")
        );
    }
    if report.calls.is_empty() && !report.text.is_empty() {
        println!("  text: {}", report.text.replace('\n', "\n    "));
    }
    println!(
        "  now: step {} at {}",
        report.active_step_after.unwrap_or("-"),
        report.sequence_index_after
    );
}

/// The user's message from the command line, or a usage error naming `example`.
pub fn message_or_exit(example: &str) -> String {
    let message: String = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    if message.trim().is_empty() {
        eprintln!(
            "usage: {example} <message>   (e.g. {example} Research the impact of AI on jobs)"
        );
        std::process::exit(2);
    }
    message
}

/// A multi-threaded tokio runtime, or exit with the reason.
pub fn runtime_or_exit() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start a runtime: {e}");
            std::process::exit(1);
        }
    }
}

/// Runs one user turn of `agent` on a fresh session and prints the answer (or exits
/// with the error).
pub fn run_turn_and_print<M: orch_runtime::Machine, Mo: orch_agent::Model>(
    agent: &mut orch_agent::Agent<M, Mo>,
    message: &str,
) {
    let runtime = runtime_or_exit();
    let mut session = orch_runtime::Session::<M>::new();
    let mut conversation: Vec<orch_agent::ChatMessage> = Vec::new();
    match runtime.block_on(agent.run_turn(&mut session, &mut conversation, message)) {
        Ok(turn) => println!(
            "\nanswer ({:?} after {} rounds, {} tokens):\n{}",
            turn.stop,
            turn.rounds.len(),
            turn.usage.total(),
            turn.final_text
        ),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

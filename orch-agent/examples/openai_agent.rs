//! The cognitive reasoner against any OpenAI-compatible chat-completions server (for
//! instance a local one), under orchestration: per round (model call) only the allowed tools are
//! offered, the choice is forced when the sequence allows one tool, every call is
//! checked before it runs, and usage is accounted.
//!
//! ```sh
//! OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_MODEL=qwen2.5 \
//!   cargo run -p orch-agent --features openai --example openai_agent -- Research the impact of AI on jobs
//! ```
//!
//! `OPENAI_BASE_URL` (default `https://api.openai.com/v1`), `OPENAI_API_KEY` (optional for
//! local servers), `OPENAI_MODEL` (default `gpt-4o-mini`), `OPENAI_STREAM=1` to stream,
//! `OPENAI_TIMEOUT_SECS` (the whole-request limit; default 600).
//! The tools do real local work on a small bundled corpus (examples/corpus/): keyword
//! search, outlining, reflection over what was gathered, comparison, critique,
//! brainstorming and finding both sides of a claim.

use orch_agent::{Agent, ChatMessage, OpenAiModel, ToolRegistry};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

orch_macros::orchestration!(file = "../examples/agents/cognitive-reasoner/template.json");
use cognitive_reasoner::{Machine, Session};

const CORPUS: [(&str, &str); 5] = [
    ("ai-and-jobs", include_str!("corpus/ai-and-jobs.txt")),
    ("remote-work", include_str!("corpus/remote-work.txt")),
    ("solar-and-wind", include_str!("corpus/solar-and-wind.txt")),
    ("food-waste", include_str!("corpus/food-waste.txt")),
    ("traffic", include_str!("corpus/traffic.txt")),
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

fn tools(notes: Arc<Mutex<Vec<String>>>) -> ToolRegistry {
    let mut reg = ToolRegistry::new();
    let text_param = |desc: &str| json!({"type": "object", "properties": {"input": {"type": "string", "description": desc}}, "required": ["input"]});
    let n = notes.clone();
    reg.register(
        "search",
        "Search the knowledge base; returns the most relevant passages with their source.",
        json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        move |args| {
            let n = n.clone();
            async move {
                let query = arg(&args, &["query", "input"]);
                let hits = rank(&query);
                if hits.is_empty() {
                    return Err(format!("no document mentions any of: {}", words(&query).join(", ")));
                }
                let q: HashSet<String> = words(&query).into_iter().collect();
                let mut out = String::new();
                for (id, text, score) in hits.iter().take(2) {
                    let best: Vec<&str> = sentences(text).into_iter().filter(|s| words(s).iter().any(|w| q.contains(w))).take(3).collect();
                    out.push_str(&format!("[{id}, {score} matches] {}\n", best.join(" ")));
                }
                n.lock().unwrap_or_else(|p| p.into_inner()).push(out.clone());
                Ok(out)
            }
        },
    );
    let n = notes.clone();
    reg.register(
        "think",
        "Structure a text into an outline of its key points and terms.",
        text_param("what to structure"),
        move |args| {
            let n = n.clone();
            async move {
                let mut input = arg(&args, &["input", "text"]);
                if input.is_empty() {
                    input = n.lock().unwrap_or_else(|p| p.into_inner()).join(" ");
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
                n.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(out.clone());
                Ok(out)
            }
        },
    );
    let n = notes.clone();
    reg.register(
        "reflect",
        "Reflect on everything gathered so far: sources, recurring terms, hedged claims.",
        text_param("focus of the reflection"),
        move |_| {
            let n = n.clone();
            async move {
                let all = n.lock().unwrap_or_else(|p| p.into_inner()).join("\n");
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
        },
    );
    reg.register(
        "compare",
        "Compare two topics by the terms their passages share and do not share.",
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}, "required": ["a", "b"]}),
        |args| async move {
            let side = |t: &str| -> HashSet<String> { rank(t).first().map(|h| key_terms(h.1, 15).into_iter().collect()).unwrap_or_default() };
            let (a, b) = (arg(&args, &["a"]), arg(&args, &["b"]));
            let (sa, sb) = (side(&a), side(&b));
            let mut shared: Vec<_> = sa.intersection(&sb).cloned().collect();
            let mut only_a: Vec<_> = sa.difference(&sb).cloned().collect();
            let mut only_b: Vec<_> = sb.difference(&sa).cloned().collect();
            shared.sort();
            only_a.sort();
            only_b.sort();
            Ok(format!("shared: {}\nonly {a}: {}\nonly {b}: {}", shared.join(", "), only_a.join(", "), only_b.join(", ")))
        },
    );
    reg.register(
        "critique",
        "Flag sweeping or unsupported statements in a text.",
        text_param("the text to critique"),
        |args| async move {
            let input = arg(&args, &["input", "text"]);
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
        },
    );
    reg.register(
        "brainstorm",
        "Propose ideas by combining key terms of the relevant passages.",
        text_param("the topic"),
        |args| async move {
            let topic = arg(&args, &["input", "topic"]);
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
        },
    );
    reg.register(
        "debate",
        "Collect passages on both sides of a claim.",
        text_param("the claim"),
        |args| async move {
            let claim = arg(&args, &["input", "claim"]);
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
        },
    );
    reg
}

fn main() {
    let message: String = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    if message.trim().is_empty() {
        eprintln!(
            "usage: openai_agent <message>   (e.g. openai_agent Research the impact of AI on jobs)"
        );
        std::process::exit(2);
    }
    let base =
        std::env::var("OPENAI_BASE_URL").unwrap_or_else(|_| "https://api.openai.com/v1".to_owned());
    let model_name = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".to_owned());
    let stream = std::env::var("OPENAI_STREAM").is_ok_and(|v| v == "1" || v == "true");
    let mut timeouts = orch_agent::Timeouts::default();
    if let Some(secs) = std::env::var("OPENAI_TIMEOUT_SECS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        timeouts.total = std::time::Duration::from_secs(secs.max(1));
        timeouts.idle = timeouts.idle.min(timeouts.total);
    }
    let model = OpenAiModel::new(&base, &model_name)
        .timeouts(timeouts)
        .api_key(std::env::var("OPENAI_API_KEY").ok())
        .streaming(stream);
    let notes = Arc::new(Mutex::new(Vec::new()));
    let instructions = cognitive_reasoner::DESCRIPTION.join("\n");
    let mut agent = Agent::<Machine, _>::new(model, tools(notes))
        .instructions(format!("You are the Cognitive Reasoner.\n{instructions}"))
        .on_round_finish(|step, session| {
            println!(
                "round {}: offered {:?}, tool choice {}",
                step.number, step.offered, step.tool_choice
            );
            for c in &step.calls {
                let status = c.outcome.unwrap_or("refused");
                println!(
                    "  {}({}) -> {status}\n    {}",
                    c.call.name,
                    c.call.arguments,
                    c.result.replace('\n', "\n    ")
                );
            }
            println!(
                "  now: step {} at {}; tokens so far {} + {}",
                session.step().map_or("-", |s| s.name()),
                session.sequence_index(),
                session.usage().prompt,
                session.usage().completion
            );
        });
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start a runtime: {e}");
            std::process::exit(1);
        }
    };
    let mut session = Session::new();
    let mut conversation: Vec<ChatMessage> = Vec::new();
    println!("user: {message}\nmodel: {model_name} at {base}\n");
    match runtime.block_on(agent.run_turn(&mut session, &mut conversation, &message)) {
        Ok(turn) => {
            println!(
                "\nanswer ({:?} after {} rounds, {} tokens):\n{}",
                turn.stop,
                turn.rounds.len(),
                turn.usage.total(),
                turn.final_text
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

//! An agent loop over a workflow written in the `orchestration!` DSL. Per round (model call) the
//! loop offers the LLM only the allowed tools, checks every call before running it, and
//! records what ran, so the sequence advances within one user turn. The "LLM" here is a
//! scripted stand-in (it sometimes asks for the wrong tool, to show enforcement); the
//! tools do real work on a small data set.
//!
//! Run: `cargo run --example dsl_agent`

use orch::orchestration;

orchestration! {
    /// A data analyst: statistics requests force load → (mean | median) → stddev → report.
    pub machine Analyst {
        tools: [load, mean, median, stddev, report, web_search],
        max_steps: 6;
        /// Small talk: everything but the web.
        default step Chat { deny: [web_search]; }
        /// Statistics on the loaded data, in a fixed order.
        step Statistics {
            when message_regex("(?i)\\b(stats|statistics|average|summar)");
            sequence: [load, (mean | median), stddev, report];
            allow: [load, mean, median, stddev, report];
            reset_sequence_on: [message_regex];
        }
        /// Looking things up: the web only.
        step Lookup {
            when message_contains("look up");
            allow: [web_search];
        }
    }
}

use analyst::{Session, Tool};

/// The tools' real work, on a session-local data set.
struct Workbench {
    data: Vec<f64>,
    notes: Vec<String>,
}

impl Workbench {
    fn run(&mut self, tool: Tool) -> String {
        let n = self.data.len() as f64;
        let mean = || self.data.iter().sum::<f64>() / n;
        match tool {
            Tool::Load => {
                self.data = "12.5 9.0 14.25 11.0 10.5 13.75 8.5"
                    .split(' ')
                    .filter_map(|x| x.parse().ok())
                    .collect();
                format!("loaded {} values", self.data.len())
            }
            Tool::Mean => format!("mean = {:.3}", mean()),
            Tool::Median => {
                let mut v = self.data.clone();
                v.sort_by(f64::total_cmp);
                format!("median = {:.3}", v[v.len() / 2])
            }
            Tool::Stddev => {
                let m = mean();
                let var = self.data.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n;
                format!("stddev = {:.3}", var.sqrt())
            }
            Tool::Report => {
                let r = format!(
                    "report: {} values, notes so far: {}",
                    self.data.len(),
                    self.notes.join("; ")
                );
                self.notes.clear();
                r
            }
            Tool::WebSearch => "web search: (no network in this example)".to_owned(),
        }
    }
}

/// The scripted "LLM": wants these tools in this order, one per round, and stops
/// when its plan is empty.
fn turn(s: &mut Session, bench: &mut Workbench, message: &str, mut plan: Vec<Tool>) {
    println!("\nuser: {message}");
    s.on_user_message(message);
    let max_rounds = analyst::MAX_ROUNDS.unwrap_or(10);
    for round in 1..=max_rounds {
        let offered = s.allowed();
        let forced = (offered.len() == 1).then(|| offered.first()).flatten();
        print!(
            "  round {round}: [{}] offered={offered}",
            s.step().map_or("-", |x| x.name())
        );
        if let Some(t) = forced {
            print!(" (tool choice forced: {t})");
        }
        println!();
        if plan.is_empty() {
            println!("    model answers in text");
            break;
        }
        let wanted = plan.remove(0);
        match s.check(wanted) {
            Ok(()) => {
                let result = bench.run(wanted);
                bench.notes.push(result.clone());
                let outcome = s.record(wanted);
                println!("    {wanted} -> {result} ({outcome})");
            }
            Err(why) => println!("    {wanted} refused: {why}"),
        }
    }
    s.record_usage(400, 90);
}

fn main() {
    let mut s = Session::new();
    let mut bench = Workbench {
        data: Vec::new(),
        notes: Vec::new(),
    };
    turn(&mut s, &mut bench, "Hi there", vec![]);
    turn(
        &mut s,
        &mut bench,
        "Give me summary statistics of the sensor data",
        vec![
            Tool::Mean,
            Tool::Load,
            Tool::Median,
            Tool::Stddev,
            Tool::Report,
        ],
    );
    turn(
        &mut s,
        &mut bench,
        "Please look up the sensor model",
        vec![Tool::Load, Tool::WebSearch],
    );
    let u = s.usage();
    println!(
        "\ntokens: {} prompt + {} completion = {}",
        u.prompt,
        u.completion,
        u.total()
    );
}

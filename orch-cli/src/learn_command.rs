//! `orch learn`: a first template from decision logs or transcripts, checked before it
//! is written.

use crate::{FOUND_ERRORS, OK, USAGE_OR_IO};
use orch_cli::learn::Learner;
use orch_runtime::printable::printable;
use std::io::Read;

/// `orch learn` arguments.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Decision logs (JSON lines; observe mode keeps every call's arguments) or
    /// OpenAI/Anthropic transcripts; `-` reads standard input.
    #[arg(required = true, value_name = "TRACE")]
    traces: Vec<String>,
    /// The template's `agentId` and `name`.
    #[arg(long, default_value = "learned")]
    name: String,
    /// Where to write the template (default: standard output).
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<String>,
    /// Write the tools whose names say they change something (`send_*`, `pay*`,
    /// `delete_*`, ...) into `approve` (by default they are proposed in the description).
    #[arg(long)]
    approve_side_effects: bool,
    /// An order ("`b` only after `a`") becomes a step only when `b` ran in at least
    /// this many runs.
    #[arg(long, value_name = "N", default_value_t = 3)]
    min_runs: usize,
    /// Argument values become a rule only for a tool called at least this many times.
    #[arg(long, value_name = "N", default_value_t = 5)]
    min_calls: usize,
}

/// Learns, checks and writes the template: 0 when written; 1 when the learned template
/// would not compile or not admit a call it learned from (a fault: said, nothing
/// written); 2 on usage or I/O errors.
pub(crate) fn run(args: &Args) -> u8 {
    let mut learner = Learner::new();
    learner.min_runs = args.min_runs.max(1);
    learner.min_calls = args.min_calls.max(1);
    learner.approve_side_effects = args.approve_side_effects;
    for path in &args.traces {
        let mut text = String::new();
        let read = match path.as_str() {
            "-" => std::io::stdin().read_to_string(&mut text),
            _ => std::fs::File::open(path).and_then(|mut f| f.read_to_string(&mut text)),
        };
        if let Err(e) = read {
            eprintln!("error: cannot read `{}`: {e}", printable(path));
            return USAGE_OR_IO;
        }
        if let Err(e) = learner.read(path, &text) {
            eprintln!("error: {}: {e}", printable(path));
            return USAGE_OR_IO;
        }
    }
    if learner.calls() == 0 {
        eprintln!("error: no call that ran was found in the traces: nothing to learn");
        return USAGE_OR_IO;
    }
    let template = learner.template(&args.name);
    let text = orch_cli::learn::to_text(&template);
    // Checked before it is written: it compiles, and admits what it learned from.
    let compiled = orch_codegen::compile_json(&text, None);
    let Some(machine) = compiled.to_machine() else {
        let errors: Vec<String> = compiled
            .diagnostics
            .iter()
            .filter(|d| d.is_error())
            .map(|d| d.message.clone())
            .collect();
        eprintln!(
            "error: the learned template does not compile ({}); this is a fault of `orch learn`",
            errors.join("; ")
        );
        return FOUND_ERRORS;
    };
    if !args.approve_side_effects {
        if let Err(why) = learner.admits_every_call(&machine) {
            eprintln!("error: the learned template refuses a call it learned from ({why}); this is a fault of `orch learn`");
            return FOUND_ERRORS;
        }
    }
    let written = match &args.output {
        Some(path) => std::fs::write(path, &text)
            .map_err(|e| format!("cannot write `{}`: {e}", printable(path))),
        None => match crate::print_out(&text) {
            OK => Ok(()),
            _ => Err(String::new()),
        },
    };
    if let Err(e) = written {
        if !e.is_empty() {
            eprintln!("error: {e}");
        }
        return USAGE_OR_IO;
    }
    let rules = template["orchestration"]["rules"]
        .as_array()
        .map_or(0, Vec::len);
    let steps = template["orchestration"]["steps"]
        .as_array()
        .map_or(0, Vec::len);
    eprintln!(
        "learned {} tools, {steps} step(s) and {rules} rule(s) from {} calls; every one of them is admitted by it. Read its description: it says what was generalised and why.",
        machine.tools().len(),
        learner.calls()
    );
    OK
}

//! Writes a refund desk's recorded traffic — a decision log in observe mode, every call
//! with its arguments — to standard output: the fixtures of docs/rollout.md
//! (`examples/rollout/`), and the large logs its measurements replay.
//!
//! ```text
//! cargo run -p orch-cli --example record_traffic -- RUNS SEED [incidents] > week.jsonl
//! ```

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(runs), Some(seed)) = (
        args.first().and_then(|a| a.parse::<usize>().ok()),
        args.get(1).and_then(|a| a.parse::<u64>().ok()),
    ) else {
        eprintln!("usage: record_traffic RUNS SEED [incidents]");
        return std::process::ExitCode::from(2);
    };
    let incidents = args.get(2).is_some_and(|a| a == "incidents");
    let out = std::io::BufWriter::new(std::io::stdout());
    match orch_test_support::traffic::refund_desk(out, runs, seed, incidents) {
        Ok(mut out) => match std::io::Write::flush(&mut out) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                std::process::ExitCode::from(2)
            }
        },
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

//! The cognitive reasoner of the seeds, compiled by build.rs from
//! `examples/agents/cognitive-reasoner/template.json`. A scripted conversation: each user
//! message picks a mode, the "LLM" calls tools (some of them out of order), and every turn
//! prints the active step, the sequence index and the tools the LLM may use.
//!
//! Run: `cargo run --example cognitive_reasoner`

orch::include_machine!("cognitive-reasoner");
use cognitive_reasoner::{Session, Tool};

fn show(s: &Session, what: &str) {
    let step = s.step().map_or("none", |st| st.name());
    let allowed: Vec<&str> = s.allowed().names().collect();
    println!(
        "  {what:<38} step={step:<20} index={} allowed={allowed:?}",
        s.sequence_index()
    );
}

fn call(s: &mut Session, tool: Tool) {
    match s.check(tool) {
        Ok(()) => {
            let outcome = s.record(tool);
            show(s, &format!("tool {tool} -> {outcome}"));
        }
        Err(why) => println!("  tool {tool} refused: {why}"),
    }
}

fn main() {
    let mut s = Session::new();
    println!(
        "machine `{}`: {} tools, {} steps, session = {} bytes",
        cognitive_reasoner::NAME,
        Tool::ALL.len(),
        cognitive_reasoner::Step::ALL.len(),
        std::mem::size_of::<Session>()
    );
    show(&s, "start");

    let conversation: &[(&str, &[Tool])] = &[
        (
            "Research the impact of AI on jobs",
            &[Tool::Think, Tool::Search, Tool::Think, Tool::Reflect],
        ),
        (
            "Critique the argument that remote work improves productivity",
            &[Tool::Critique, Tool::Compare, Tool::Reflect],
        ),
        ("Now evaluate it again, from the start", &[Tool::Critique]),
        (
            "Brainstorm ways to reduce food waste",
            &[Tool::Think, Tool::Brainstorm, Tool::Critique],
        ),
        ("Thanks!", &[Tool::Search]),
    ];
    for (message, tools) in conversation {
        println!("\nuser: {message}");
        s.on_user_message(message);
        show(&s, "after message");
        for tool in *tools {
            call(&mut s, *tool);
        }
        s.record_usage(1200, 350);
    }
    let usage = s.usage();
    println!(
        "\ntokens: prompt={} completion={} total={}",
        usage.prompt,
        usage.completion,
        usage.total()
    );
}

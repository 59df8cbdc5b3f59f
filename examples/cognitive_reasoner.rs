//! The cognitive reasoner of AgentDock's documentation, compiled by build.rs from
//! `examples/agents/cognitive-reasoner/template.json`. A scripted conversation: each user
//! message picks a mode, the "LLM" calls tools (some of them out of order), and every turn
//! prints the active step, the sequence index and the tools the LLM may use.
//!
//! The second half runs a whole research turn (search → think → reflect) through the
//! orchestrated agent loop (`orch-agent`) in one user message, with a scripted model
//! that first tries a tool out of order: per round (model call) it prints the tools offered and
//! the forced tool choice.
//!
//! Run: `cargo run --example cognitive_reasoner`

orch::include_machine!("cognitive-reasoner");
use cognitive_reasoner::{Machine, Session, Tool};
use orch::agent::{Agent, Planned, ScriptedModel, ToolRegistry};

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

    agent_loop_turn();
}

/// One user message, one whole research sequence, through the agent loop.
fn agent_loop_turn() {
    println!("\n--- the same machine driving a (scripted) model through the agent loop ---");
    let mut tools = ToolRegistry::new();
    for t in Tool::ALL {
        let name = t.name();
        tools.register(
            name,
            &format!("the {name} tool"),
            serde_json::json!({"type": "object"}),
            move |args| async move { Ok(format!("{name} ran with {args}")) },
        );
    }
    let model = ScriptedModel::new([
        Planned::call("think", r#"{"input": "jump ahead"}"#).usage(410, 12),
        Planned::call("search", r#"{"query": "impact of AI on jobs"}"#).usage(450, 15),
        Planned::call("think", r#"{"input": "structure the findings"}"#).usage(520, 18),
        Planned::call("reflect", r#"{"input": "biases and gaps"}"#).usage(580, 16),
        Planned::text("AI shifts tasks more than it removes jobs; see the analysis above.")
            .usage(640, 60),
    ]);
    let mut agent = Agent::<Machine, _>::new(model, tools).on_round_finish(|step, session| {
        println!(
            "  round {}: offered={:?} tool_choice={}",
            step.number, step.offered, step.tool_choice
        );
        for c in &step.calls {
            match c.outcome {
                Some(outcome) => println!("    {} -> {outcome}: {}", c.call.name, c.result),
                None => println!("    {} refused: {}", c.call.name, c.result),
            }
        }
        if step.calls.is_empty() {
            println!("    answer: {}", step.text);
        }
        println!(
            "    now: step={} index={}",
            session.step().map_or("none", |s| s.name()),
            session.sequence_index()
        );
    });
    let mut session = Session::new();
    let mut conversation = Vec::new();
    let runtime = match tokio::runtime::Builder::new_current_thread().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start a runtime: {e}");
            return;
        }
    };
    println!("user: Research the impact of AI on jobs");
    match runtime.block_on(agent.run_turn(
        &mut session,
        &mut conversation,
        "Research the impact of AI on jobs",
    )) {
        Ok(turn) => println!(
            "turn: {} rounds, stop={:?}, tokens {} + {}",
            turn.rounds.len(),
            turn.stop,
            turn.usage.prompt,
            turn.usage.completion
        ),
        Err(e) => eprintln!("error: {e}"),
    }
}

//! The generated machine (typed `Session`) and the same template loaded at run time
//! (`DynSession` over `Ir::to_tables`) must produce identical traces for any events.

mod common;
use common::Event;
use proptest::{prop_assert, prop_assert_eq};

use orch::dynamic::{DynMachine, DynOutcome};
use orch::{Machine, Outcome, StepEnum, ToolEnum};

orch::include_machine!("conformance");
orch::include_machine!("support-triage");
orch::include_machine!("cognitive-reasoner");
orch::include_machine!("wide");
orch::include_machine!("sequence-shaped");
orch::include_machine!("messages-40");

fn dyn_machine(path: &str) -> DynMachine {
    let src = std::fs::read_to_string(path).unwrap();
    let compiled = orch_codegen::compile_json(&src, None);
    assert!(!compiled.has_errors());
    compiled.to_machine().unwrap()
}

fn outcome_str<T: ToolEnum>(o: &Outcome<T>) -> String {
    match o {
        Outcome::OutOfSequence { expected } => {
            format!("out_of_sequence {:?}", expected.names().collect::<Vec<_>>())
        }
        Outcome::Advanced { index } => format!("advanced {index}"),
        other => other.as_str().to_owned(),
    }
}

fn dyn_outcome_str(o: &DynOutcome) -> String {
    match o {
        DynOutcome::OutOfSequence { expected } => format!("out_of_sequence {expected:?}"),
        DynOutcome::Advanced { index } => format!("advanced {index}"),
        other => other.as_str().to_owned(),
    }
}

/// The name of a tool the templates do not declare (a foreign tool; `other_*`
/// matches no pattern of these templates, `web_lookup` matches `web_*` where a
/// template has it).
const FOREIGN: [&str; 2] = ["other_tool", "web_lookup"];

#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn agree<M: Machine>(path: &str, messages: &[&str], cases: u32) {
    let machine = dyn_machine(path);
    assert_eq!(machine.fingerprint(), M::fingerprint(), "same tables");
    let tools: Vec<&str> = M::Tool::ALL.iter().map(|t| t.name()).collect();
    common::check(cases, common::events(200), |events| {
        let mut typed = orch::Session::<M>::new();
        let mut dynamic = machine.session();
        // The host's list of tool names: declared and foreign ones.
        let mut host: Vec<&str> = tools.iter().copied().chain(FOREIGN).collect();
        // One buffer for every snapshot of the run, as a host that snapshots often keeps.
        let mut kept = Vec::new();
        dynamic.set_available(host.iter().copied());
        for (n, event) in events.iter().enumerate() {
            let ctx = format!("event {n}: {event:?}");
            let tool = match event {
                Event::Message(i) => {
                    let m = messages[i.index(messages.len())];
                    typed.on_user_message(m);
                    dynamic.on_user_message(m);
                    None
                }
                Event::Tool(i) => Some(tools[i.index(tools.len())]),
                Event::Foreign => Some(FOREIGN[n % FOREIGN.len()]),
                Event::Available(mask) => {
                    let subset: Vec<M::Tool> = M::Tool::ALL
                        .iter()
                        .copied()
                        .filter(|t| Event::keeps(mask, t.index()))
                        .collect();
                    host = subset.iter().map(|t| t.name()).collect();
                    host.extend(FOREIGN.iter().filter(|_| Event::keeps(mask, tools.len())));
                    typed.set_available(subset);
                    dynamic.set_available(host.iter().copied());
                    None
                }
                Event::Usage(p, c) => {
                    typed.record_usage(*p, *c);
                    dynamic.record_usage(*p, *c);
                    None
                }
                Event::Reset => {
                    typed.reset();
                    dynamic.reset();
                    None
                }
            };
            if let Some(name) = tool {
                // One rule and one wording for declared and foreign tools alike.
                let a = typed.check_name(name).map_err(|d| d.to_string());
                let b = dynamic.check(name).map_err(|d| d.to_string());
                prop_assert_eq!(a, b, "{}: check {}", ctx, name);
                let a = typed.record_name(name);
                // Recording by index is recording by name, without the lookup.
                let mut by_index = dynamic.clone();
                let indexed = tools
                    .iter()
                    .position(|t| *t == name)
                    .and_then(|i| by_index.record_index(i));
                // So is recording by index for the outcome's kind alone.
                let mut by_kind = dynamic.clone();
                let kind = tools
                    .iter()
                    .position(|t| *t == name)
                    .and_then(|i| by_kind.record_index_kind(i));
                let b = dynamic.record(name);
                if let Some(kind) = kind {
                    prop_assert_eq!(
                        kind.as_str(),
                        b.as_str(),
                        "{}: record_index_kind {}",
                        ctx,
                        name
                    );
                    prop_assert_eq!(
                        by_kind.snapshot(),
                        dynamic.snapshot(),
                        "{}: record_index_kind {}",
                        ctx,
                        name
                    );
                }
                if let Some(indexed) = indexed {
                    prop_assert_eq!(
                        dyn_outcome_str(&indexed),
                        dyn_outcome_str(&b),
                        "{}: record_index {}",
                        ctx,
                        name
                    );
                    prop_assert_eq!(
                        by_index.snapshot(),
                        dynamic.snapshot(),
                        "{}: record_index {}",
                        ctx,
                        name
                    );
                }
                prop_assert_eq!(
                    outcome_str(&a),
                    dyn_outcome_str(&b),
                    "{}: record {}",
                    ctx,
                    name
                );
            }
            prop_assert_eq!(
                typed.step().map(StepEnum::name),
                dynamic.step(),
                "{}: step",
                ctx
            );
            prop_assert_eq!(
                typed.sequence_index(),
                dynamic.sequence_index(),
                "{}: index",
                ctx
            );
            prop_assert_eq!(typed.usage(), dynamic.usage(), "{}: usage", ctx);
            // The direct encoder writes the snapshot's own bytes.
            let bytes = dynamic.snapshot_bytes();
            prop_assert_eq!(
                &bytes,
                &dynamic.snapshot().to_bytes(),
                "{}: snapshot_bytes",
                ctx
            );
            // Into a reused buffer (holding the last snapshot, longer or shorter): the
            // same bytes.
            dynamic.snapshot_into(&mut kept);
            prop_assert_eq!(&kept, &bytes, "{}: snapshot_into", ctx);
            // And the decoder reads back the session's state: the encoding is checked
            // against the reader, not only against itself.
            prop_assert_eq!(
                orch::Snapshot::from_bytes(&bytes).ok(),
                Some(dynamic.snapshot()),
                "{}: from_bytes",
                ctx
            );
            prop_assert_eq!(
                dynamic.step_index().map(|i| machine.steps()[i].as_str()),
                dynamic.step(),
                "{}: step_index",
                ctx
            );
            // The allowed set as bits: the declared tools `allowed()` lists, and whether
            // it lists a foreign one.
            let mut bits = Vec::new();
            let foreign = dynamic.allowed_bits(&mut bits);
            let listed = dynamic.allowed();
            let declared: Vec<&str> = (0..tools.len())
                .filter(|i| bits[i / 64] >> (i % 64) & 1 == 1)
                .map(|i| machine.tools()[i].as_str())
                .collect();
            prop_assert_eq!(
                declared,
                listed
                    .iter()
                    .copied()
                    .filter(|n| !FOREIGN.contains(n))
                    .collect::<Vec<_>>(),
                "{}: allowed_bits",
                ctx
            );
            prop_assert_eq!(
                foreign,
                listed.iter().any(|n| FOREIGN.contains(n)),
                "{}: allowed_bits, foreign",
                ctx
            );
            prop_assert!(by_index_out_of_range_records_nothing(&dynamic, tools.len()));
            // `allowed()` of the dynamic session lists the host's foreign tools too; a
            // typed host gets the same list by filtering its own names.
            let mut filtered: Vec<&str> = typed.filter_names(host.iter().copied()).collect();
            let mut listed = dynamic.allowed();
            filtered.sort_unstable();
            listed.sort_unstable();
            prop_assert_eq!(filtered, listed, "{}: allowed (with foreign tools)", ctx);
            prop_assert_eq!(
                typed.allowed().names().collect::<Vec<_>>(),
                dynamic
                    .allowed()
                    .into_iter()
                    .filter(|n| !FOREIGN.contains(n))
                    .collect::<Vec<_>>(),
                "{}: allowed",
                ctx
            );
            prop_assert_eq!(
                typed.blocked_on().map(|b| b.names().collect::<Vec<_>>()),
                dynamic.blocked_on(),
                "{}: blocked_on",
                ctx
            );
            let th: Vec<Option<&str>> = typed
                .history()
                .map(|h| match h {
                    orch::HistoryEntry::Tool(t) => Some(t.name()),
                    orch::HistoryEntry::Foreign => None,
                })
                .collect();
            prop_assert_eq!(th, dynamic.history(), "{}: history", ctx);
        }
        Ok(())
    });
}

/// `record_index` (and `record_index_kind`) past the machine's tools is `None` and
/// changes nothing.
fn by_index_out_of_range_records_nothing(
    session: &orch::dynamic::DynSession<'_>,
    tools: usize,
) -> bool {
    let mut copy = session.clone();
    copy.record_index(tools).is_none()
        && copy.record_index_kind(tools).is_none()
        && copy.snapshot() == session.snapshot()
}

const MESSAGES: &[&str] = &[
    "Research the impact of AI on jobs",
    "critique this",
    "please EVALUATE",
    "something fresh",
    "fetch the page",
    "again",
    "hello",
    "I want a refund",
    "cancel my plan",
    "the service is down",
    "Compare solar and wind",
    "brainstorm and debate",
    "how can cities solve traffic?",
    "tail",
    "hundreds",
    "the invoice 7 is late and the deadline 3 passed",
    "budget 0, refunds 5 — über login 11",
    "",
];

#[test]
fn conformance_machine() {
    agree::<conformance::Machine>("tests/fixtures/machines/conformance.json", MESSAGES, 150);
}

#[test]
fn support_triage_machine() {
    agree::<support_triage::Machine>(
        "examples/agents/support-triage/template.json",
        MESSAGES,
        150,
    );
}

#[test]
fn cognitive_reasoner_machine() {
    agree::<cognitive_reasoner::Machine>(
        "examples/agents/cognitive-reasoner/template.json",
        MESSAGES,
        150,
    );
}

#[test]
fn wide_machine() {
    agree::<wide::Machine>("tests/fixtures/machines/wide.json", MESSAGES, 60);
}

#[test]
fn sequence_shaped_machine() {
    agree::<sequence_shaped::Machine>(
        "tests/fixtures/machines/sequence-shaped.json",
        MESSAGES,
        100,
    );
}

#[test]
fn forty_message_conditions_machine() {
    agree::<messages_40::Machine>("tests/fixtures/machines/messages-40.json", MESSAGES, 60);
}

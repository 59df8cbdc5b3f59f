//! Proves that the hot path allocates nothing once a session exists: `allowed()`,
//! `check`, `record` (also by name, also foreign), `on_user_message` with contains and
//! regex conditions, and filtering the host's tool list by name.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every method hands the call to the system allocator unchanged; it only
// counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

orch::include_machine!("cognitive-reasoner");
orch::include_machine!("support-triage");
orch::include_machine!("wide");
orch::include_machine!("sequence-shaped");
orch::include_machine!("payments");
orch::include_machine!("messages-40");
orch::include_machine!("conformance");
orch::include_machine!("approvals");
orch::include_machine!("provenance");
orch::include_machine!("budgets");

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn the_hot_path_does_not_allocate() {
    use std::hint::black_box;

    // Sessions exist (creating one compiles the machine's regexes once per process).
    let mut cr = cognitive_reasoner::Session::new();
    let mut st = support_triage::Session::new();
    let mut wide = wide::Session::new();

    // Make sure the counter itself works.
    assert!(allocations_during(|| drop(black_box(vec![1u8; 16]))) > 0);

    let n = allocations_during(|| {
        use cognitive_reasoner::Tool;
        for _ in 0..50 {
            cr.on_user_message(black_box("Research the impact of AI on jobs")); // regex
            black_box(cr.allowed());
            black_box(cr.check(Tool::Think).is_err());
            black_box(cr.record(Tool::Search));
            black_box(cr.record(Tool::Think));
            black_box(cr.record(Tool::Reflect));
            cr.on_user_message(black_box("Compare solar and wind")); // contains
            black_box(cr.record_name("search"));
            black_box(cr.record_name("some_foreign_tool"));
            black_box(cr.check_name("some_foreign_tool").is_err());
            black_box(cr.allowed().iter().count());
            black_box(cr.expected());
            black_box(cr.blocked_on());
            black_box(cr.history().count());
            cr.record_usage(10, 20);
        }
    });
    assert_eq!(n, 0, "cognitive reasoner hot path allocated {n} times");

    let host = [
        "kb_search",
        "crm_lookup",
        "refund_check",
        "weather",
        "send_email",
    ];
    let n = allocations_during(|| {
        for _ in 0..50 {
            st.on_user_message(black_box("I was charged twice, I want my money back"));
            black_box(st.filter_names(host).count());
            black_box(st.record_name("crm_lookup"));
            black_box(st.filter_names(host).count());
            st.on_user_message(black_box("thanks, the site is down"));
            black_box(st.filter_names(host).count());
            black_box(st.record_name("weather"));
        }
    });
    assert_eq!(n, 0, "support triage hot path allocated {n} times");

    let n = allocations_during(|| {
        use wide::Tool;
        for _ in 0..50 {
            wide.on_user_message(black_box("tail"));
            black_box(wide.allowed());
            black_box(wide.record(Tool::T190));
            black_box(wide.record(Tool::T063));
            black_box(wide.check(Tool::T199).is_err());
            black_box(wide.allowed().len());
        }
    });
    assert_eq!(n, 0, "200-tool hot path allocated {n} times");

    // Approvals (semantics §13.1): the third answer of `check`, holding and answering a
    // verdict, admitting a call against it. (The digest of a call is computed once per
    // call by the host, from its arguments; hashing canonical bytes does not allocate.)
    let mut gated = approvals::Session::new();
    let n = allocations_during(|| {
        use approvals::Tool;
        let call = orch::CallDigest::of_canonical("pay", black_box(b"{\"amount\":10}"));
        for _ in 0..50 {
            gated.reset();
            black_box(gated.record(Tool::AddToCart));
            black_box(gated.record(Tool::Confirm));
            black_box(gated.check(Tool::Pay).is_err());
            black_box(gated.check_call(Tool::Pay, &judged(&call)).is_err());
            gated.ask(call, orch::QuestionId::new(9));
            black_box(gated.answer(call, orch::QuestionId::new(9), true));
            black_box(gated.admit_call(Tool::Pay, &judged(&call)).is_ok());
            gated.reject(call);
            black_box(gated.check_call(Tool::Pay, &judged(&call)).is_err());
            black_box(gated.check_call_name("pay", &judged(&call)).is_err());
        }
    });
    assert_eq!(n, 0, "approvals allocated {n} times");

    // Rules on arguments (semantics §16): in a template with rules, a call of a tool no
    // rule applies to is judged without reading its arguments, so without allocating.
    let mut pays = payments::Session::new();
    let args = r#"{"query": "Ana"}"#;
    let contacts = orch::Call::new(
        orch::CallDigest::of_canonical("get_contacts", args.as_bytes()),
        args,
    );
    let n = allocations_during(|| {
        use payments::Tool;
        for _ in 0..50 {
            black_box(
                pays.check_call(Tool::GetContacts, black_box(&contacts))
                    .is_ok(),
            );
            black_box(
                pays.admit_call(Tool::GetContacts, black_box(&contacts))
                    .is_ok(),
            );
            black_box(
                pays.check_call_name("get_contacts", black_box(&contacts))
                    .is_ok(),
            );
        }
    });
    assert_eq!(n, 0, "a call no rule applies to allocated {n} times");

    // Provenance (semantics §16): in a template that remembers values — the user's, a
    // trusted tool's, admitted arguments — a call of a tool no rule names and whose
    // arguments no origin reads is judged and admitted without allocating.
    let mut prov = provenance::Session::new();
    prov.on_user_message("pay DE89 3704 0044 0532 0130 00");
    let n = allocations_during(|| {
        use provenance::Tool;
        for _ in 0..50 {
            black_box(
                prov.check_call(Tool::GetContacts, black_box(&contacts))
                    .is_ok(),
            );
            black_box(
                prov.admit_call(Tool::GetContacts, black_box(&contacts))
                    .is_ok(),
            );
            black_box(prov.record(Tool::GetContacts));
        }
    });
    assert_eq!(n, 0, "a call no origin reads allocated {n} times");

    // Budgets (semantics §17): in a template that counts and sums calls, a call of a
    // tool no rule and no budget names is judged and admitted — moving the budgets'
    // clock — without allocating.
    let mut spend = budgets::Session::new();
    let balance = orch::approval::Call::new(
        orch::approval::CallDigest::of_text("get_balance", "{}"),
        "{}",
    );
    let n = allocations_during(|| {
        use budgets::Tool;
        for k in 0..50u64 {
            let timed = balance.at(black_box(1_000 + k));
            black_box(spend.check_call(Tool::GetBalance, &timed).is_ok());
            black_box(spend.admit_call(Tool::GetBalance, &timed).is_ok());
            black_box(spend.record(Tool::GetBalance));
        }
    });
    assert_eq!(n, 0, "a call no budget charges allocated {n} times");

    // Incremental condition state: sequences that complete and change the step
    // (shift-and matchers), `tool_used` and `not_recently_used` (counters), and messages
    // against 40 conditions (the literal prefilter and the patterns it lets through).
    let mut seq = sequence_shaped::Session::new();
    let mut many = messages_40::Session::new();
    let mut conf = conformance::Session::new();
    let n = allocations_during(|| {
        use sequence_shaped::Tool;
        for _ in 0..50 {
            for t in [
                Tool::Search,
                Tool::Think,
                Tool::Reflect,
                Tool::Search,
                Tool::Search,
                Tool::Reflect,
                Tool::Think,
                Tool::Debate,
                Tool::Critique,
            ] {
                black_box(seq.allowed());
                black_box(seq.record(t));
            }
            black_box(seq.record_name("some_foreign_tool"));
            many.on_user_message(black_box(
                "the invoice 7 is late and the deadline 3 passed: refunds? budget 0",
            ));
            many.on_user_message(black_box("nothing to see here"));
            many.on_user_message(black_box("Naive budget 1, over deadline 3"));
            black_box(many.step());
            conf.on_user_message(black_box("start fresh please"));
            black_box(conf.record_name("search"));
            black_box(conf.record_name("think"));
            conf.on_user_message(black_box("summarize it"));
            black_box(conf.allowed());
        }
    });
    assert_eq!(n, 0, "incremental condition state allocated {n} times");
}

/// The run-time path the language bindings drive (`orch-py`, `orch-node`): a
/// `HostedSession` — a `DynSession` that owns its machine, judged through the agent
/// policy (`check` that passes), recorded by name, told messages, and its allowed set
/// computed into a buffer it keeps (`for_each_allowed`).
#[test]
fn the_run_time_path_of_the_bindings_does_not_allocate() {
    use orch::agent::hosted::HostedSession;
    use std::hint::black_box;
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/agents/cognitive-reasoner/template.json"
    ))
    .expect("the template");
    let machine = orch_codegen::compile_json(&source, None)
        .to_machine()
        .expect("it compiles");
    let mut session = HostedSession::new(std::sync::Arc::new(machine), None);
    // The buffer is sized once.
    session.for_each_allowed(|_, _| {});
    let n = allocations_during(|| {
        for _ in 0..50 {
            session.on_user_message(black_box("Research the impact of AI on jobs"));
            for tool in ["search", "think", "reflect"] {
                assert!(session.check(black_box(tool)).is_none());
                black_box(session.record(black_box(tool)));
                let mut count = 0;
                session.for_each_allowed(|_, name| {
                    count += black_box(name).len();
                });
                black_box(count);
            }
        }
    });
    assert_eq!(n, 0, "the run-time path allocated {n} times");
    // The bindings' fast path: recorded by index, the allowed set as bits into a kept
    // buffer.
    let mut bits = Vec::new();
    session.allowed_bits(&mut bits);
    let n = allocations_during(|| {
        for _ in 0..50 {
            session.on_user_message(black_box("Research the impact of AI on jobs"));
            for tool in [0, 1, 2] {
                black_box(session.record_index(black_box(tool)));
                black_box(session.allowed_bits(&mut bits));
                black_box(&bits);
            }
        }
    });
    assert_eq!(n, 0, "the bindings' fast path allocated {n} times");
    // And it agrees with `allowed()`.
    let mut names = Vec::new();
    session.for_each_allowed(|_, name| names.push(name.to_owned()));
    assert_eq!(names, session.session().allowed());
}

/// The call as the engine judges it: this template has no rules on arguments, so its
/// arguments are never read.
fn judged(call: &orch::CallDigest) -> orch::Call<'static> {
    orch::Call::new(*call, "")
}

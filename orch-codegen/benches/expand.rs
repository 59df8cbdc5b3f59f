//! The macro's expansion cost for a large workflow: 500 steps over 200 tools, as DSL
//! tokens (`expand::orchestration`: parse, check, emit) and as JSON (`compile_json` +
//! `emit::module`). Run: `cargo bench -p orch-codegen --bench expand`.

use criterion::{criterion_group, criterion_main, Criterion};
use std::fmt::Write;
use std::hint::black_box;
use std::time::Duration;

const TOOLS: usize = 200;
const STEPS: usize = 500;

fn dsl_source() -> String {
    let mut s = String::from(
        "#![allow(shadowed_step, sequence_never_completes)]\nmachine big {\n  tools: [",
    );
    for t in 0..TOOLS {
        write!(s, "t{t:03}, ").unwrap();
    }
    s.push_str("],\n  default step Start;\n");
    for i in 0..STEPS {
        let (a, b, c) = (i % TOOLS, (i * 7 + 3) % TOOLS, (i * 13 + 5) % TOOLS);
        match i % 4 {
            0 => writeln!(
                s,
                "  step S{i} {{ when message_contains(\"w{i}\"); sequence: [t{a:03}, (t{b:03} | t{c:03})]; allow: [t{a:03}, t{b:03}, t{c:03}]; }}"
            )
            .unwrap(),
            1 => writeln!(
                s,
                "  step S{i} {{ when message_regex(\"(?i)^x{i}\\\\b\"); allow: [\"t{}*\"]; deny: [t{a:03}]; }}",
                (i / 4) % 2
            )
            .unwrap(),
            2 => writeln!(s, "  step S{i} {{ when tool_used(t{a:03}); when not_recently_used(t{b:03}, window = 5); }}").unwrap(),
            _ => writeln!(s, "  step S{i} {{ when sequence_match; sequence: [t{a:03}, t{b:03}, t{c:03}]; }}").unwrap(),
        }
    }
    s.push_str("}\n");
    s
}

fn bench(c: &mut Criterion) {
    let dsl: proc_macro2::TokenStream = dsl_source().parse().expect("tokens");
    let out = orch_codegen::__private::orchestration(dsl.clone()).to_string();
    assert!(
        !out.contains("compile_error"),
        "the benchmark workflow must be valid: {}",
        &out[..out.len().min(2000)]
    );
    let json = orch_test_support::templates::large_json();
    assert!(!orch_codegen::compile_json(&json, None).has_errors());

    let rt = orch_codegen::emit::runtime_path(orch_codegen::emit::DEFAULT_RUNTIME).expect("a path");
    let mut g = c.benchmark_group("expand_500_steps_200_tools");
    g.bench_function("dsl", |b| {
        b.iter(|| {
            black_box(orch_codegen::__private::orchestration(black_box(
                dsl.clone(),
            )))
        })
    });
    g.bench_function("json", |b| {
        b.iter(|| {
            let compiled = orch_codegen::compile_json(black_box(&json), None);
            black_box(orch_codegen::emit::module(
                &compiled,
                orch_codegen::emit::Origin::Dsl,
                &rt,
            ))
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(5))
        .sample_size(20);
    targets = bench
}
criterion_main!(benches);

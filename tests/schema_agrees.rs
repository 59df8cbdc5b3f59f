//! `orch schema` agrees with the compiler: on generated and mutated templates, a
//! template is valid against the JSON Schema exactly when the compiler reports no shape
//! error (E002 wrong type, E003 missing field, E009 unknown condition type, E021 an
//! unknown key in `availableTools` or a property, E022 a property without exactly one
//! rule, E025 a rule on arguments of the wrong shape; every input here is valid JSON, so
//! never E001).

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Map, Value};

const SHAPE: [&str; 7] = ["E001", "E002", "E003", "E009", "E021", "E022", "E025"];

fn validator() -> jsonschema::Validator {
    let schema: Value =
        serde_json::from_str(orch_codegen::TEMPLATE_SCHEMA).expect("the schema is JSON");
    jsonschema::draft202012::meta::validate(&schema)
        .expect("the schema is a valid draft 2020-12 schema");
    jsonschema::draft202012::new(&schema).expect("the schema compiles")
}

/// (schema-valid, the compiler's shape errors) for one template.
fn judge(v: &jsonschema::Validator, template: &Value) -> (bool, Vec<String>) {
    let text = serde_json::to_string_pretty(template).unwrap();
    let compiled = orch_codegen::compile_json(&text, Some("fallback"));
    let shape: Vec<String> = compiled
        .diagnostics
        .iter()
        .filter(|d| SHAPE.contains(&d.code.as_str()))
        .map(|d| format!("{}: {}", d.code.as_str(), d.message))
        .collect();
    (v.is_valid(template), shape)
}

fn assert_agrees(v: &jsonschema::Validator, template: &Value) -> Result<(), TestCaseError> {
    let (valid, shape) = judge(v, template);
    if valid == shape.is_empty() {
        return Ok(());
    }
    let why: Vec<String> = v
        .iter_errors(template)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    Err(TestCaseError::fail(format!(
        "schema says {}, compiler says {:?}\nschema errors: {why:?}\ntemplate: {}",
        if valid { "valid" } else { "invalid" },
        shape,
        serde_json::to_string(template).unwrap()
    )))
}

/// The project's own templates: every example agent and test machine.
fn corpus() -> Vec<Value> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "tests/fixtures/machines",
        "examples/agents/cognitive-reasoner",
        "examples/agents/support-triage",
    ] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "json") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect()
}

const KEYS: [&str; 37] = [
    "agentId",
    "name",
    "tools",
    "nodes",
    "options",
    "maxSteps",
    "orchestration",
    "description",
    "defaultStep",
    "historyLength",
    "steps",
    "isDefault",
    "conditions",
    "availableTools",
    "allowed",
    "denied",
    "sequence",
    "resetSequenceOn",
    "approve",
    "lostResults",
    "retry",
    "ran",
    "hold",
    "properties",
    "tool",
    "after",
    "atMost",
    "never",
    "approved",
    "type",
    "value",
    "window",
    "range",
    "result",
    "personality",
    "x",
    "$schema",
];
const STRINGS: [&str; 11] = [
    "search",
    "think",
    "tool_used",
    "sequence_match",
    "message_contains",
    "message_regex",
    "not_recently_used",
    "budget",
    "tool_use",
    "Research",
    "*",
];
const NUMBERS: [&str; 12] = [
    "0",
    "3",
    "-1",
    "1.5",
    "2.0",
    "1e1",
    "-0",
    "12e-1",
    "18446744073709551615",
    "1e3",
    "0.5",
    "7",
];

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop::sample::select(&NUMBERS[..]).prop_map(|n| serde_json::from_str(n).unwrap()),
        prop::sample::select(&STRINGS[..]).prop_map(|s| Value::String(s.into())),
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(&KEYS[..]), inner), 0..4).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

/// Every location in `v` (a list of object keys / array indices).
fn paths(v: &Value, here: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    out.push(here.clone());
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                here.push(Seg::Key(k.clone()));
                paths(c, here, out);
                here.pop();
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                here.push(Seg::At(i));
                paths(c, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

#[derive(Clone, Debug)]
enum Seg {
    Key(String),
    At(usize),
}

fn at<'v>(v: &'v mut Value, path: &[Seg]) -> &'v mut Value {
    path.iter().fold(v, |v, s| match s {
        Seg::Key(k) => &mut v[k.as_str()],
        Seg::At(i) => &mut v[*i],
    })
}

#[derive(Clone, Debug)]
enum Mutation {
    Replace(Index, Value),
    Remove(Index),
    Insert(Index, &'static str, Value),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), any_json()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        any::<Index>().prop_map(Mutation::Remove),
        (any::<Index>(), prop::sample::select(&KEYS[..]), any_json())
            .prop_map(|(i, k, v)| Mutation::Insert(i, k, v)),
    ]
}

fn apply(mut v: Value, m: &Mutation) -> Value {
    let mut all = Vec::new();
    paths(&v, &mut Vec::new(), &mut all);
    match m {
        Mutation::Replace(i, new) => *at(&mut v, i.get(all.as_slice()).as_slice()) = new.clone(),
        Mutation::Remove(i) => {
            let path = i.get(all.as_slice()).as_slice();
            if let Some((last, parent)) = path.split_last() {
                match (at(&mut v, parent), last) {
                    (Value::Object(o), Seg::Key(k)) => {
                        o.remove(k);
                    }
                    (Value::Array(a), Seg::At(n)) => {
                        a.remove(*n);
                    }
                    _ => {}
                }
            }
        }
        Mutation::Insert(i, key, new) => match at(&mut v, i.get(all.as_slice()).as_slice()) {
            Value::Object(o) => {
                o.insert((*key).to_owned(), new.clone());
            }
            Value::Array(a) => a.push(new.clone()),
            _ => {}
        },
    }
    v
}

#[test]
fn the_projects_templates_are_schema_valid() {
    let v = validator();
    for t in corpus() {
        let (valid, shape) = judge(&v, &t);
        assert!(valid && shape.is_empty(), "{shape:?}: {t}");
    }
}

#[test]
fn the_schema_rejects_mistyped_templates() {
    let v = validator();
    let good = json!({"agentId": "a", "nodes": ["llm.x", "search"], "x-extra": {"any": 1},
        "orchestration": {"steps": [{"name": "S", "conditions": [{"type": "tool_used", "value": "search", "note": 1}],
        "sequence": ["search", ["search"]]}]}});
    assert!(v.is_valid(&good));
    let bad = [
        json!({"orchestration": {"steps": [{"name": 3}]}}),
        json!({"orchestration": {"steps": [{"name": "S", "conditions": [{"value": "x"}]}]}}),
        json!({"orchestration": {"steps": [{"name": "S", "conditions": [{"type": "tool_use", "value": "x"}]}]}}),
        json!({"orchestration": {"steps": [{"name": "S", "sequence": ["a", 3]}]}}),
        json!({"orchestration": {"steps": [{"name": "S", "sequence": ["a", [null]]}]}}),
        json!({"orchestration": {"steps": {}}}),
        json!({"orchestration": {"historyLength": -1, "steps": []}}),
        json!({"orchestration": {"historyLength": 1.5, "steps": []}}),
        json!({"tools": "search", "orchestration": {"steps": []}}),
        json!({"agentId": "a"}),
        json!([]),
    ];
    for t in bad {
        assert!(!v.is_valid(&t), "{t}");
        assert_agrees(&v, &t).unwrap();
    }
}

/// A `range` bound from a result: its `path` is a JSON pointer, and `null` is absent
/// (the whole result), as everywhere else in a template.
#[test]
fn range_bounds_from_results_agree() {
    let v = validator();
    let with_path = |path: Value| {
        json!({"agentId": "balance", "tools": ["get_fee", "pay"], "orchestration": {
            "steps": [{"name": "Assist", "isDefault": true}],
            "rules": [{"name": "fee", "tool": "pay",
                "require": {"path": "/amount", "range": {"min": {"result": "get_fee", "path": path}}}}]}})
    };
    for (path, valid) in [
        (json!("/fee"), true),
        (json!(""), true),
        (Value::Null, true),
        (json!("fee"), false),
        (json!(3), false),
    ] {
        let t = with_path(path);
        assert_eq!(v.is_valid(&t), valid, "{t}");
        assert_agrees(&v, &t).unwrap();
    }
}

/// Any one member of any template of the project's own, written as `null`: the compiler
/// reads an optional field written as `null` as absent and a required one as missing,
/// and the schema says the same of every field (every location, not a sample: the
/// random mutations once took a while to find that `trust`'s lists, `rememberedValues`,
/// a budget's `where` and a budget condition's `range` did not allow `null`).
#[test]
fn null_in_place_of_any_member_agrees() {
    let v = validator();
    let mut checked = 0;
    for template in corpus() {
        let mut all = Vec::new();
        paths(&template, &mut Vec::new(), &mut all);
        for path in all {
            if !matches!(path.last(), Some(Seg::Key(_))) {
                continue;
            }
            let mut t = template.clone();
            *at(&mut t, &path) = Value::Null;
            assert_agrees(&v, &t).unwrap_or_else(|e| panic!("at {path:?}: {e}"));
            checked += 1;
        }
    }
    assert!(checked > 500, "only {checked} members were tried");
}

#[test]
fn schema_valid_iff_no_shape_error_on_mutated_templates() {
    let v = validator();
    let corpus = corpus();
    let mut runner = TestRunner::new(Config {
        cases: 1000,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (0..corpus.len(), prop::collection::vec(mutation(), 1..4));
    runner
        .run(&strategy, |(which, mutations)| {
            let t = mutations.iter().fold(corpus[which].clone(), apply);
            assert_agrees(&v, &t)
        })
        .unwrap();
}

#[test]
fn schema_valid_iff_no_shape_error_on_generated_templates() {
    let v = validator();
    let template = (any_json(), any_json()).prop_map(|(steps, root)| {
        let mut root = match root {
            Value::Object(o) => o,
            _ => Map::new(),
        };
        root.insert("orchestration".into(), json!({"steps": steps}));
        Value::Object(root)
    });
    let mut runner = TestRunner::new(Config {
        cases: 1000,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&prop_oneof![any_json(), template], |t| {
            assert_agrees(&v, &t)
        })
        .unwrap();
}

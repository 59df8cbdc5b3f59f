//! The message analysis of the verifier: every combination of message conditions one
//! message can satisfy, with a witness. Witnesses are checked with the runtime's own
//! matchers; completeness against brute force over all short messages.

use orch_codegen::verify::messages::{Combinations, MessageConditions};
use orch_runtime::compiled::{contains_folded, fold_case, MessageRegex};

fn analyse(contains: &[&str], regexes: &[&str]) -> Combinations {
    let contains: Vec<String> = contains.iter().map(|c| fold_case(c)).collect();
    let regexes: Vec<String> = regexes.iter().map(|r| r.to_string()).collect();
    MessageConditions {
        contains: &contains,
        regexes: &regexes,
    }
    .combinations(200_000, &mut { u64::MAX })
    .expect("patterns compile")
}

/// The flags the runtime's matchers give `message`.
fn real_flags(contains: &[&str], regexes: &[&str], message: &str) -> Vec<u64> {
    let compiled: Vec<MessageRegex> = regexes
        .iter()
        .map(|r| MessageRegex::new(r).unwrap())
        .collect();
    flags_of(contains, &compiled, message)
}

fn flags_of(contains: &[&str], regexes: &[MessageRegex], message: &str) -> Vec<u64> {
    let mut flags = vec![0u64; (contains.len() + regexes.len()).div_ceil(64).max(1)];
    for (i, c) in contains.iter().enumerate() {
        if contains_folded(message, &fold_case(c)) {
            flags[i / 64] |= 1 << (i % 64);
        }
    }
    for (j, r) in regexes.iter().enumerate() {
        let i = contains.len() + j;
        if r.is_match(message) {
            flags[i / 64] |= 1 << (i % 64);
        }
    }
    flags
}

fn bits(flags: &[u64]) -> u64 {
    flags[0]
}

/// Every witness produces exactly its combination.
fn witnesses_hold(contains: &[&str], regexes: &[&str], found: &Combinations) {
    for c in &found.combinations {
        assert_eq!(
            real_flags(contains, regexes, &c.witness),
            c.flags,
            "witness {:?}",
            c.witness
        );
    }
}

#[test]
fn full_case_folding_and_regexes_together() {
    // `ß` folds to `ss`: one message satisfies both.
    let (contains, regexes) = (["SS"], ["^ß$"]);
    let found = analyse(&contains, &regexes);
    assert!(found.complete);
    witnesses_hold(&contains, &regexes, &found);
    let mut combos: Vec<(u64, String)> = found
        .combinations
        .iter()
        .map(|c| (bits(&c.flags), c.witness.clone()))
        .collect();
    combos.sort();
    // Shortest witnesses: the capital sharp s `ẞ` also folds to `ss`, in one character.
    let expected: Vec<(u64, String)> =
        vec![(0b00, "".into()), (0b01, "ẞ".into()), (0b11, "ß".into())];
    assert_eq!(
        combos, expected,
        "no message matches `^ß$` without containing `ss`"
    );
}

#[test]
fn word_boundaries_and_contradictions() {
    let (contains, regexes) = (["cat"], [r"\bcat\b", "^a", "^b"]);
    let found = analyse(&contains, &regexes);
    assert!(found.complete);
    witnesses_hold(&contains, &regexes, &found);
    let has = |b: u64| found.combinations.iter().any(|c| bits(&c.flags) == b);
    assert!(has(0b0011), "`cat` satisfies both");
    assert!(has(0b0001), "`cats` contains it without a word boundary");
    assert!(!has(0b0010), "the regex never holds without the needle");
    assert!(
        !has(0b1100) && !has(0b1111),
        "`^a` and `^b` never hold together"
    );
    assert!(has(0b0111), "`a cat`");
    assert_eq!(
        found
            .combinations
            .iter()
            .find(|c| bits(&c.flags) == 0b0011)
            .unwrap()
            .witness,
        "cat",
        "shortest witness"
    );
}

#[test]
fn unicode_word_boundaries_are_exact() {
    // `é` is a word character: `\bcafé\b` matches `café` but not `caféx`, and `\bcaf\b`
    // never matches inside `café`.
    let regexes = [r"\bcafé\b", r"\bcaf\b"];
    let found = analyse(&[], &regexes);
    assert!(found.complete);
    witnesses_hold(&[], &regexes, &found);
    let has = |b: u64| found.combinations.iter().any(|c| bits(&c.flags) == b);
    assert!(has(0b01) && has(0b10) && has(0b11) && has(0b00));
}

/// Completeness: for conditions drawn from a pool, every combination some message of up
/// to three characters (over the characters the conditions care about) produces is
/// found, and every witness is right.
#[test]
fn agrees_with_brute_force_on_short_messages() {
    let pool_contains = ["ab", "b", "SS", "ß", "é", "a b"];
    let pool_regexes = [
        r"^a", r"b$", r"\bab\b", r"(?i)A+", r"a.b", r"^$", r"[ßé]", r"(?i)é",
    ];
    let alphabet = ['a', 'b', 'A', ' ', 'ß', 's', 'é', 'É', 'x'];
    let mut messages = vec![String::new()];
    let mut frontier = vec![String::new()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for m in &frontier {
            for c in alphabet {
                let mut s = m.clone();
                s.push(c);
                next.push(s);
            }
        }
        messages.extend(next.iter().cloned());
        frontier = next;
    }
    // A few fixed subsets of the pool (deterministic, covering mixes).
    for seed in 0..24u32 {
        let contains: Vec<&str> = pool_contains
            .iter()
            .enumerate()
            .filter(|(i, _)| (seed.wrapping_mul(2654435761) >> (i * 3)) & 3 == 0)
            .map(|(_, c)| *c)
            .collect();
        let regexes: Vec<&str> = pool_regexes
            .iter()
            .enumerate()
            .filter(|(i, _)| (seed.wrapping_mul(40503).wrapping_add(7) >> (i * 2 + 1)) & 3 == 0)
            .map(|(_, r)| *r)
            .collect();
        let found = analyse(&contains, &regexes);
        assert!(found.complete);
        witnesses_hold(&contains, &regexes, &found);
        let compiled: Vec<MessageRegex> = regexes
            .iter()
            .map(|r| MessageRegex::new(r).unwrap())
            .collect();
        for m in &messages {
            let flags = flags_of(&contains, &compiled, m);
            assert!(
                found.combinations.iter().any(|c| c.flags == flags),
                "{contains:?} {regexes:?}: {m:?} gives {flags:?}, which the analysis missed"
            );
        }
    }
}

//! Signed checkpoints (`orch_agent::audit`, feature `sign`): a signing auditor writes a
//! checkpoint every N records and when dropped; `verify_signed` checks every signature
//! and reports the records after the last checkpoint as unanchored; and every edit an
//! adversary can make — edit, delete, insert, reorder, truncate, duplicate, renumber,
//! with the chain rebuilt around it — is detected, or (a truncated tail) reported.

use orch_agent::audit::sign::{PublicKeys, SigningKey};
use orch_agent::audit::{
    verify, verify_signed, Anchor, Auditor, CheckpointRecord, DecisionRecord, JsonLines,
};
use proptest::prelude::*;
use std::sync::Arc;
use std::time::Duration;

/// A decision record about message `n` (numbering and chaining are the auditor's).
fn record(n: usize) -> DecisionRecord {
    serde_json::from_value(serde_json::json!({
        "v": 1, "seq": 0, "time": "2026-11-26T10:00:00.000Z", "run": "r1",
        "fingerprint": "0123456789abcdef",
        "event": {"kind": "message", "text": format!("message {n}")},
        "before": {"step": "Desk", "index": 0}, "after": {"step": "Desk", "index": 0},
        "decision": "message"
    }))
    .unwrap()
}

/// A log of `records` records written by an auditor signing every `every` records (and
/// at drop), and the public keys that check it.
fn signed_log(records: usize, every: u64) -> (String, PublicKeys) {
    let key = SigningKey::generate().unwrap();
    let public = PublicKeys(vec![key.public_key()]);
    let log = written(records, |auditor| {
        auditor.signed(Arc::new(key), every, Duration::from_secs(3600))
    });
    (log, public)
}

/// The log an auditor made by `make` (from a plain one on a fresh file) writes for
/// `records` records, dropped at the end.
fn written(records: usize, make: impl FnOnce(Auditor) -> Auditor) -> String {
    let dir = orch_test_support::scratch::Scratch::new("audit-sign");
    let path = dir.join("log.jsonl");
    make(Auditor::new(JsonLines::append(&path).unwrap(), "r1")).relay((0..records).map(record));
    std::fs::read_to_string(&path).unwrap()
}

fn lines(log: &str) -> Vec<String> {
    log.lines().map(str::to_owned).collect()
}

fn join(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn is_checkpoint(line: &str) -> bool {
    line.contains("\"checkpoint\"")
}

/// Renumbers and rehashes `lines` into a chain that holds (what anyone who can write the
/// file can do without the key): checkpoints keep their old signature.
fn rebuild(lines: &[String]) -> Vec<String> {
    let mut prev: Option<String> = None;
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            let seq = i as u64 + 1;
            if is_checkpoint(line) {
                let mut c: CheckpointRecord = serde_json::from_str(line).unwrap();
                c.seq = seq;
                c.prev = prev.take();
                c.hash = None;
                c.hash = Some(c.digest());
                prev = c.hash.clone();
                c.to_json()
            } else {
                let mut r: DecisionRecord = serde_json::from_str(line).unwrap();
                r.seq = seq;
                r.prev = prev.take();
                r.hash = None;
                r.hash = Some(r.digest());
                prev = r.hash.clone();
                r.to_json()
            }
        })
        .collect()
}

#[test]
fn a_signed_log_verifies_and_reports_its_unanchored_tail() {
    let (log, keys) = signed_log(10, 4);
    let l = lines(&log);
    // 10 records, checkpoints after 4, 8 and at drop (after 10).
    assert_eq!(l.iter().filter(|l| is_checkpoint(l)).count(), 3, "{log}");
    assert!(is_checkpoint(&l[4]) && is_checkpoint(&l[9]) && is_checkpoint(&l[12]));
    let v = verify_signed(&log, &Anchor::default(), Some(&keys)).unwrap();
    assert_eq!((v.records, v.checkpoints, v.unanchored), (10, 3, 0));
    // Without its last checkpoint, the last two records are unanchored (reported).
    let v = verify_signed(&join(&l[..12]), &Anchor::default(), Some(&keys)).unwrap();
    assert_eq!((v.unanchored, v.unanchored_from), (2, Some(11)));
    // Another key's checkpoints are refused at the first.
    let other = PublicKeys(vec![SigningKey::generate().unwrap().public_key()]);
    let e = verify_signed(&log, &Anchor::default(), Some(&other)).unwrap_err();
    assert_eq!(e.line, 5, "{e}");
    // Without keys the chain is checked and the signatures are not.
    assert_eq!(verify(&log, &Anchor::default()).unwrap().checkpoints, 3);
}

#[test]
fn every_named_tampering_fails_at_its_line() {
    let (log, keys) = signed_log(10, 4);
    let l = lines(&log);
    let check = |lines: &[String]| verify_signed(&join(lines), &Anchor::default(), Some(&keys));
    // A record edited and the whole chain rebuilt without the key: the first checkpoint
    // after the edit fails.
    let mut edited = l.clone();
    edited[1] = edited[1].replace("message 1", "message one");
    assert_eq!(check(&rebuild(&edited)).unwrap_err().line, 5);
    // A checkpoint moved one line earlier (chain rebuilt): its signature fails.
    let mut moved = l.clone();
    moved.swap(3, 4);
    assert_eq!(check(&rebuild(&moved)).unwrap_err().line, 4);
    // Lines cut before a checkpoint: the chain breaks at the line after the cut, and
    // rebuilt, the checkpoint's signature fails.
    let mut cut = l.clone();
    cut.remove(2);
    assert_eq!(check(&cut).unwrap_err().line, 3);
    assert_eq!(check(&rebuild(&cut)).unwrap_err().line, 4);
    // Every checkpoint removed and the chain rebuilt: nothing is signed.
    let bare: Vec<String> = l.iter().filter(|l| !is_checkpoint(l)).cloned().collect();
    let e = check(&rebuild(&bare)).unwrap_err();
    assert!(e.why.contains("no checkpoint"), "{e}");
    // A forged signature.
    let mut forged = l.clone();
    let mut c: CheckpointRecord = serde_json::from_str(&forged[4]).unwrap();
    c.checkpoint.sig = Some("0".repeat(128));
    c.hash = None;
    c.hash = Some(c.digest());
    forged[4] = c.to_json();
    assert_eq!(check(&rebuild(&forged)).unwrap_err().line, 5);
}

/// An edit an adversary who can write the file (but has not the key) can make.
#[derive(Clone, Debug)]
enum Edit {
    Change(usize),
    Delete(usize),
    Insert(usize, usize),
    Swap(usize, usize),
    Truncate(usize),
    Duplicate(usize),
    Renumber(usize, u64),
}

/// `edits` applied one after another (stopping when nothing is left).
fn apply_all(original: &[String], edits: &[Edit]) -> Vec<String> {
    let mut edited = original.to_vec();
    for e in edits {
        if edited.is_empty() {
            break;
        }
        edited = apply(&edited, e);
    }
    edited
}

fn apply(lines: &[String], edit: &Edit) -> Vec<String> {
    let n = lines.len();
    let mut out = lines.to_vec();
    match *edit {
        Edit::Change(i) => {
            let i = i % n;
            out[i] = out[i].replacen("\"time\":\"2026", "\"time\":\"2027", 1);
        }
        Edit::Delete(i) => {
            out.remove(i % n);
        }
        Edit::Insert(i, from) => {
            let line = out[from % n].replace("\"text\":\"message", "\"text\":\"inserted");
            out.insert(i % (n + 1), line);
        }
        Edit::Swap(a, b) => out.swap(a % n, b % n),
        Edit::Truncate(keep) => out.truncate(keep % n),
        Edit::Duplicate(i) => {
            let line = out[i % n].clone();
            out.insert(i % n, line);
        }
        Edit::Renumber(i, seq) => {
            let i = i % n;
            let mut v: serde_json::Value = serde_json::from_str(&out[i]).unwrap();
            v["seq"] = seq.into();
            out[i] = v.to_string();
        }
    }
    out
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<usize>().prop_map(Edit::Change),
        any::<usize>().prop_map(Edit::Delete),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Insert(a, b)),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Edit::Swap(a, b)),
        any::<usize>().prop_map(Edit::Truncate),
        any::<usize>().prop_map(Edit::Duplicate),
        (any::<usize>(), any::<u64>()).prop_map(|(a, b)| Edit::Renumber(a, b)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Every edit of a signed log — as it is, and with the chain rebuilt around it — is
    /// detected, unless it only cut lines off the end (what is left is a prefix and reads
    /// as one) or only added lines after it (reported unanchored); against the
    /// original's anchored head and count, a cut fails too, signed or not.
    #[test]
    fn every_edit_is_detected_or_an_honest_prefix(edits in prop::collection::vec(edit(), 1..4)) {
        let (log, keys) = signed_log(9, 3);
        let original = lines(&log);
        let anchored = verify(&log, &Anchor::default()).unwrap();
        let anchor = Anchor { head: anchored.head.clone(), count: Some(anchored.records) };
        let edited = apply_all(&original, &edits);
        prop_assume!(edited != original);
        for candidate in [edited.clone(), rebuild(&edited)] {
            if candidate == original {
                continue;
            }
            let text = join(&candidate);
            let prefix = candidate.len() < original.len() && candidate[..] == original[..candidate.len()];
            // Lines added after the whole original: new lines, as far as anyone can
            // tell — but no signature covers them.
            let extends = candidate.len() > original.len() && candidate[..original.len()] == original[..];
            if let Ok(v) = verify_signed(&text, &Anchor::default(), Some(&keys)) {
                // Accepted: then everything up to its last checkpoint is the original's,
                // and every record after it is reported unanchored (no signature covers
                // a tail, so an edit there can only be reported, not detected).
                let last = candidate.iter().rposition(|l| is_checkpoint(l));
                let signed = last.map_or(0, |i| i + 1);
                prop_assert!(signed > 0 || candidate.is_empty(), "{edits:?}");
                prop_assert_eq!(&candidate[..signed], &original[..signed], "a signed line changed unnoticed: {:?}", edits);
                prop_assert_eq!(v.unanchored as usize, candidate.len() - signed, "{:?}", edits);
                prop_assert!(extends || prefix || v.unanchored > 0, "an edit went unnoticed: {:?}", edits);
            }
            if !extends {
                prop_assert!(verify_signed(&text, &anchor, Some(&keys)).is_err(), "{edits:?}");
                prop_assert!(verify(&text, &anchor).is_err(), "{edits:?}");
            }
        }
    }
}

const VECTOR_BEGIN: &str =
    "<!-- audit test vector: kept by orch-agent/tests/audit_sign.rs (ORCH_BLESS=1 writes it) -->\n";
const VECTOR_END: &str = "<!-- end of the audit test vector -->";

/// docs/audit.md's test vector verifies: its log with its public key, to its head; and
/// one changed character in it does not.
#[test]
fn the_documented_test_vector_verifies() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/audit.md");
    let docs = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = (
        docs.find(VECTOR_BEGIN).expect("the vector's start marker") + VECTOR_BEGIN.len(),
        docs.find(VECTOR_END).expect("the vector's end marker"),
    );
    if std::env::var_os("ORCH_BLESS").is_some() {
        let (log, keys) = signed_log(2, 100);
        let head = verify(&log, &Anchor::default()).unwrap().head.unwrap();
        let public = keys.0[0].to_pem().unwrap();
        let vector = format!("```text\n{log}```\n\nhead: `{head}`\n\n```text\n{public}```\n");
        let updated = format!("{}{vector}{}", &docs[..begin], &docs[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    let vector = &docs[begin..end];
    let blocks: Vec<&str> = vector.split("```").collect();
    assert!(
        blocks.len() >= 5,
        "the vector has a log block and a key block: {vector}"
    );
    let log = blocks[1].trim_start_matches("text\n");
    let public = blocks[3].trim_start_matches("text\n");
    let head = vector
        .lines()
        .find_map(|l| l.strip_prefix("head: `"))
        .and_then(|l| l.strip_suffix('`'))
        .expect("a head line");
    let keys = PublicKeys(vec![
        orch_agent::audit::sign::PublicKey::from_pem(public).unwrap()
    ]);
    let anchor = Anchor {
        head: Some(head.to_owned()),
        count: Some(2),
    };
    let v = verify_signed(log, &anchor, Some(&keys)).unwrap();
    assert_eq!(
        (v.records, v.checkpoints, v.unanchored, v.head.as_deref()),
        (2, 1, 0, Some(head))
    );
    let changed = log.replacen("message 1", "message 2", 1);
    assert!(verify_signed(&changed, &anchor, Some(&keys)).is_err());
}

/// A chained log without checkpoints, written by an auditor without a key.
fn unsigned_log(records: usize) -> String {
    written(records, Auditor::chained)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Every edit of an unsigned chained log is detected where it happened unless it
    /// only cut lines off the end; with the chain rebuilt around it (no key needed) it
    /// passes as a chain — every record is reported unanchored — and the original's
    /// anchored head and count catch it unless it only added lines after them.
    #[test]
    fn every_edit_of_an_unsigned_log_is_detected_or_unanchored(edits in prop::collection::vec(edit(), 1..4)) {
        let log = unsigned_log(8);
        let original = lines(&log);
        let anchored = verify(&log, &Anchor::default()).unwrap();
        prop_assert_eq!(anchored.unanchored, 8);
        let anchor = Anchor { head: anchored.head.clone(), count: Some(anchored.records) };
        let edited = apply_all(&original, &edits);
        prop_assume!(edited != original);
        let prefix = edited.len() < original.len() && edited[..] == original[..edited.len()];
        if verify(&join(&edited), &Anchor::default()).is_ok() {
            prop_assert!(prefix || edited.is_empty(), "an edit went unnoticed: {:?}", edits);
        }
        for candidate in [edited.clone(), rebuild(&edited)] {
            let extends = candidate.len() > original.len() && candidate[..original.len()] == original[..];
            let text = join(&candidate);
            if let Ok(v) = verify(&text, &Anchor::default()) {
                prop_assert_eq!(v.unanchored, v.records);
            }
            if !extends && candidate != original {
                prop_assert!(verify(&text, &anchor).is_err(), "{:?}", edits);
            }
        }
    }
}

//! The record a gateway keeps per workflow run, under one key of a [`crate::SessionStore`]:
//! the client's MCP handshake, if the gateway keeps one (so that any gateway instance can
//! serve the session), the orchestration snapshot, and the *lease* of the tool call in
//! flight, if any. `orch mcp` and `orch policy` share it: the format is one, and so is the
//! admission protocol below.
//!
//! The lease is what makes admission atomic across tasks and instances: a call is
//! admitted against a stored version and the lease written with a compare-and-set on
//! that same version before the call is forwarded, so no second call can be admitted
//! against the state the first one was. The lease names its holder (a random token), the
//! tool, and when it expires (wall-clock milliseconds, so that every instance agrees):
//! a lease whose instance died mid-call stops blocking the session at that time.
//!
//! One record is one value, so the handshake, the workflow state and the lease expire
//! together, under the one session TTL. A run with an absolute end (a run `orch mcp`
//! minted for a credential) carries its expiry besides the store's idle TTL.
//!
//! A lease that lapses without its result is a *lost result*: what it means is the
//! template's (`lostResults`, semantics §15) — applied by the crate `orch-run` — and a lease
//! kept *held* blocks the run until an operator resolves it.
//!
//! A host whose callers name each delivery of a call (`orch mcp`: the JSON-RPC request id
//! within the client's MCP session) also keeps the last [`DELIVERIES`] deliveries and
//! what they came to — ran, or refused with a kind — so that the same request delivered
//! again is answered with what it got, and never runs a second time (`orch-run`).
//!
//! Encoding (all integers big-endian): the magic `OMR1`, a flags byte (bit 0 handshake,
//! bit 1 snapshot, bit 2 lease, bit 3 expiry, bit 4 the lease is held, bit 5 the lease
//! names its delivery, bit 6 deliveries kept, bit 7 a second flags byte follows: its bit
//! 0 a question posted for approvers), then for each present field in that order:
//! handshake and snapshot as a `u32` length and the bytes; the lease as `u64` token, `u64`
//! expiry, `u16` length and the tool's name in UTF-8, then its delivery if bit 5 is set;
//! the record's expiry as `u64` milliseconds since the Unix epoch; the deliveries kept as a
//! `u8` count (at most [`DELIVERIES`]), then each, oldest first: the delivery and a byte
//! saying what it came to (`0`: it ran; else the refusal kind's code, `orch-run`'s). A
//! delivery is its id's 16-byte key, then the call's 32-byte digest; the posted question
//! as a `u32` length and its bytes (`orch-run`'s JSON).

use crate::{ModifyError, SessionStore, Versioned};
use orch_runtime::CallDigest;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const MAGIC: &[u8; 4] = b"OMR1";
const HANDSHAKE: u8 = 1;
const SNAPSHOT: u8 = 2;
const LEASE: u8 = 4;
const EXPIRES: u8 = 8;
const HELD: u8 = 16;
const LEASE_DELIVERY: u8 = 32;
const DELIVERED: u8 = 64;
/// A second flags byte follows the first.
const MORE_FLAGS: u8 = 128;
/// In the second flags byte: a question is posted.
const QUESTION: u8 = 1;

/// How many deliveries a record keeps ([`Record::delivered`]), the oldest forgotten first.
pub const DELIVERIES: usize = 32;

/// A delivery's bytes: its id's key, then its call's digest.
const DELIVERY_BYTES: usize = 16 + 32;
/// A remembered delivery's bytes: the delivery, then what it came to.
const DELIVERED_BYTES: usize = DELIVERY_BYTES + 1;

/// One delivery of a call as a record keeps it: a key taken of the id its caller sent
/// it under (unique within the caller's session, as JSON-RPC asks; 128 bits of a
/// SHA-256 digest, so any id is kept in the same few bytes) and the call's identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The key of the caller's id for it.
    pub key: [u8; 16],
    /// The call's identity (tool and exact arguments).
    pub call: CallDigest,
}

impl Delivery {
    /// The delivery `id` of `call`.
    pub fn new(id: &str, call: CallDigest) -> Delivery {
        let digest = CallDigest::of_canonical("\0orch-delivery-id", id.as_bytes());
        let mut key = [0; 16];
        key.copy_from_slice(&digest.as_bytes()[..16]);
        Delivery { key, call }
    }

    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.key);
        out.extend_from_slice(self.call.as_bytes());
    }

    fn read(bytes: &[u8]) -> Delivery {
        let mut key = [0; 16];
        key.copy_from_slice(&bytes[..16]);
        let mut call = [0; 32];
        call.copy_from_slice(&bytes[16..DELIVERY_BYTES]);
        Delivery {
            key,
            call: CallDigest::from_bytes(call),
        }
    }
}

/// The deliveries a record remembers and what each came to, oldest first, at most
/// [`DELIVERIES`]: kept as their stored bytes, so reading and writing a record costs no
/// allocation per delivery, and a look-up compares keys in place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deliveries(Vec<u8>);

impl Deliveries {
    /// How many are remembered.
    pub fn len(&self) -> usize {
        self.0.len() / DELIVERED_BYTES
    }

    /// None is remembered.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The delivery with `key`, if remembered, and what it came to (`0`: it ran; else
    /// the code of the refusal's kind, `orch-run`'s).
    pub fn find(&self, key: &[u8; 16]) -> Option<(Delivery, u8)> {
        self.0
            .chunks_exact(DELIVERED_BYTES)
            .find(|entry| entry[..16] == key[..])
            .map(|entry| (Delivery::read(entry), entry[DELIVERY_BYTES]))
    }

    /// Remembers that `delivery` came to `outcome` (as [`Deliveries::find`] says it),
    /// in place of what its key came to before, forgetting the oldest past
    /// [`DELIVERIES`].
    pub fn remember(&mut self, delivery: Delivery, outcome: u8) {
        if let Some(at) = self
            .0
            .chunks_exact(DELIVERED_BYTES)
            .position(|entry| entry[..16] == delivery.key[..])
        {
            self.0
                .drain(at * DELIVERED_BYTES..(at + 1) * DELIVERED_BYTES);
        }
        if self.len() >= DELIVERIES {
            let over = self.len() + 1 - DELIVERIES;
            self.0.drain(..over * DELIVERED_BYTES);
        }
        delivery.put(&mut self.0);
        self.0.push(outcome);
    }
}

/// A call in flight: who holds the session, for which tool, until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The holder's random token.
    pub token: u64,
    /// The tool being called.
    pub tool: String,
    /// When the lease lapses, in milliseconds since the Unix epoch.
    pub expires_ms: u64,
    /// The call's result was lost and its tool must not run twice: the lease holds
    /// until an operator says whether the call ran (its expiry no longer counts).
    pub held: bool,
    /// The delivery the call came as, when its caller names deliveries.
    pub delivery: Option<Delivery>,
}

impl Lease {
    /// Does the lease still hold at `now_ms`? A held lease always does.
    pub fn holds(&self, now_ms: u64) -> bool {
        self.held || self.expires_ms > now_ms
    }
}

/// One run's record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The client's `initialize` parameters (JSON), as the MCP SDK keeps them.
    pub handshake: Option<Vec<u8>>,
    /// The orchestration session's snapshot (`None`: it has not changed since it began).
    pub snapshot: Option<Vec<u8>>,
    /// The call in flight.
    pub lease: Option<Lease>,
    /// When the record stops counting, in milliseconds since the Unix epoch, whatever
    /// the store's TTL says (a minted run's end); `None`: only the store's TTL ends it.
    pub expires_ms: Option<u64>,
    /// The last [`DELIVERIES`] named deliveries that were decided.
    pub delivered: Deliveries,
    /// The question about a gated call posted for approvers who are not the run's user,
    /// and what came of it (`orch-run`'s encoding): what they need to see it, kept with
    /// the run that holds it, so that answering it is one compare-and-set of the record.
    pub question: Option<Vec<u8>>,
}

impl Record {
    /// The lease of a call in flight now, if one holds (a lapsed lease does not, a held
    /// one is not in flight).
    pub fn busy(&self) -> Option<&Lease> {
        self.lease.as_ref().filter(|l| !l.held && l.holds(now_ms()))
    }

    /// The lease of a call whose result was lost, if it lapsed without one (and is not
    /// held yet): what it means is still to be decided.
    pub fn lapsed(&self) -> Option<&Lease> {
        self.lease
            .as_ref()
            .filter(|l| !l.held && !l.holds(now_ms()))
    }

    /// The held lease, if the run is held for an operator.
    pub fn held(&self) -> Option<&Lease> {
        self.lease.as_ref().filter(|l| l.held)
    }

    /// Leases the record to a call of `tool` for `lasting` from now, replacing any lapsed
    /// lease: the new lease's token.
    pub fn lease_to(&mut self, tool: &str, lasting: Duration) -> u64 {
        let token = token();
        self.lease = Some(Lease {
            token,
            tool: tool.to_owned(),
            expires_ms: ms_after(lasting),
            held: false,
            delivery: None,
        });
        token
    }

    /// The bytes stored.
    pub fn encode(&self) -> Vec<u8> {
        let mut flags = 0;
        let mut out = Vec::with_capacity(
            16 + self.handshake.as_ref().map_or(0, Vec::len)
                + self.snapshot.as_ref().map_or(0, Vec::len),
        );
        out.extend_from_slice(MAGIC);
        out.push(0);
        if self.question.is_some() {
            out.push(QUESTION);
        }
        for (bit, field) in [(HANDSHAKE, &self.handshake), (SNAPSHOT, &self.snapshot)] {
            if let Some(bytes) = field {
                flags |= bit;
                // Fields come from this process (a handshake the SDK accepted, a
                // snapshot): far below 4 GiB.
                let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&bytes[..len as usize]);
            }
        }
        if let Some(lease) = &self.lease {
            flags |= LEASE;
            if lease.held {
                flags |= HELD;
            }
            out.extend_from_slice(&lease.token.to_be_bytes());
            out.extend_from_slice(&lease.expires_ms.to_be_bytes());
            let name = lease.tool.as_bytes();
            let len = u16::try_from(name.len()).unwrap_or(u16::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&name[..len as usize]);
            if let Some(delivery) = &lease.delivery {
                flags |= LEASE_DELIVERY;
                delivery.put(&mut out);
            }
        }
        if let Some(expires_ms) = self.expires_ms {
            flags |= EXPIRES;
            out.extend_from_slice(&expires_ms.to_be_bytes());
        }
        if !self.delivered.is_empty() {
            flags |= DELIVERED;
            // At most DELIVERIES (32): fits a byte.
            out.push(self.delivered.len() as u8);
            out.extend_from_slice(&self.delivered.0);
        }
        if let Some(bytes) = &self.question {
            flags |= MORE_FLAGS;
            // Written by this process from a question it posted: far below 4 GiB.
            let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(&bytes[..len as usize]);
        }
        out[MAGIC.len()] = flags;
        out
    }

    /// Reads stored bytes back; an error says what is wrong with them.
    pub fn decode(bytes: &[u8]) -> Result<Record, RecordError> {
        let mut r = Reader { bytes, at: 0 };
        if r.take(MAGIC.len())? != MAGIC {
            return Err(RecordError::NoMagic);
        }
        let flags = r.take(1)?[0];
        let more = match flags & MORE_FLAGS != 0 {
            true => r.take(1)?[0],
            false => 0,
        };
        if more & !QUESTION != 0 {
            return Err(RecordError::UnknownFlags(more));
        }
        if flags & (HELD | LEASE_DELIVERY) != 0 && flags & LEASE == 0 {
            return Err(RecordError::HeldWithoutLease);
        }
        let mut record = Record::default();
        if flags & HANDSHAKE != 0 {
            record.handshake = Some(r.field()?.to_vec());
        }
        if flags & SNAPSHOT != 0 {
            record.snapshot = Some(r.field()?.to_vec());
        }
        if flags & LEASE != 0 {
            let token = u64::from_be_bytes(r.array()?);
            let expires_ms = u64::from_be_bytes(r.array()?);
            let len = u16::from_be_bytes(r.array()?);
            let tool = std::str::from_utf8(r.take(usize::from(len))?)
                .map_err(|_| RecordError::ToolNotUtf8)?
                .to_owned();
            let delivery = match flags & LEASE_DELIVERY != 0 {
                true => Some(Delivery::read(r.take(DELIVERY_BYTES)?)),
                false => None,
            };
            record.lease = Some(Lease {
                token,
                tool,
                expires_ms,
                held: flags & HELD != 0,
                delivery,
            });
        }
        if flags & EXPIRES != 0 {
            record.expires_ms = Some(u64::from_be_bytes(r.array()?));
        }
        if flags & DELIVERED != 0 {
            let count = usize::from(r.take(1)?[0]);
            if count > DELIVERIES {
                return Err(RecordError::TooManyDeliveries(count));
            }
            record.delivered = Deliveries(r.take(count * DELIVERED_BYTES)?.to_vec());
        }
        if more & QUESTION != 0 {
            record.question = Some(r.field()?.to_vec());
        }
        if r.at != bytes.len() {
            return Err(RecordError::Trailing(bytes.len() - r.at));
        }
        Ok(record)
    }
}

/// What is wrong with bytes that do not decode as a [`Record`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// They do not start with the record's magic.
    NoMagic,
    /// Flags this version does not know.
    UnknownFlags(u8),
    /// The flags say a lease is held or names its delivery, but there is no lease.
    HeldWithoutLease,
    /// The lease's tool name is not UTF-8.
    ToolNotUtf8,
    /// They end before a field does.
    CutOff {
        /// Bytes the field needs.
        needed: usize,
        /// Where it starts.
        at: usize,
        /// Bytes left there.
        left: usize,
    },
    /// Bytes after the last field.
    Trailing(usize),
    /// More deliveries than a record keeps ([`DELIVERIES`]).
    TooManyDeliveries(usize),
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::NoMagic => f.write_str("not a gateway session record (no `OMR1` magic)"),
            RecordError::UnknownFlags(flags) => write!(f, "unknown flags {flags:#04x}"),
            RecordError::HeldWithoutLease => f.write_str(
                "flags say a lease is held or names its delivery, but there is no lease",
            ),
            RecordError::ToolNotUtf8 => f.write_str("the lease's tool name is not UTF-8"),
            RecordError::CutOff { needed, at, left } => write!(
                f,
                "cut off: {needed} bytes needed at offset {at}, {left} there"
            ),
            RecordError::Trailing(n) => write!(f, "{n} trailing bytes"),
            RecordError::TooManyDeliveries(n) => {
                write!(
                    f,
                    "{n} deliveries, more than the {DELIVERIES} a record keeps"
                )
            }
        }
    }
}

impl std::error::Error for RecordError {}

/// What one look at a record decided ([`modify`]).
#[derive(Debug)]
// Made once per look and moved once: boxing the record would cost an allocation on
// every write to save stack bytes nobody keeps.
#[allow(clippy::large_enum_variant)]
pub enum Change<R> {
    /// Write this record (if it is still the one looked at), then return the value.
    Write(Record, R),
    /// Write nothing and return the value.
    Keep(R),
}

/// [`crate::modify`] for a [`Record`]: `change` sees the record stored under `id`
/// (`None`: nothing stored), decoded, and decides; bytes that are not a record are
/// `corrupt(error)`. `known` is a version and the record this process believes current
/// (one it wrote, or the store's [`SessionStore::cached`] value): the first attempt is
/// made against it without reading. Returns the value and, when it wrote, the new
/// version and record.
pub async fn modify<S, R, E>(
    store: &S,
    id: &str,
    known: Option<(u64, Record)>,
    corrupt: impl Fn(RecordError) -> E + Send,
    mut change: impl FnMut(Option<Record>) -> Result<Change<R>, E> + Send,
) -> Result<(R, Option<(u64, Record)>), ModifyError<E>>
where
    S: SessionStore + ?Sized,
{
    let known = known.map(|(version, record)| Versioned {
        bytes: record.encode(),
        version,
    });
    let modified = crate::modify(
        store,
        id,
        crate::DEFAULT_MAX_ATTEMPTS,
        known,
        move |current| {
            let record = match current {
                None => None,
                Some(v) => Some(Record::decode(&v.bytes).map_err(&corrupt)?),
            };
            Ok(match change(record)? {
                Change::Write(record, value) => {
                    crate::Change::Write(record.encode(), (value, Some(record)))
                }
                Change::Keep(value) => crate::Change::Keep((value, None)),
            })
        },
    )
    .await?;
    let (value, record) = modified.value;
    let written = modified.written.zip(record).map(|(w, r)| (w.version, r));
    Ok((value, written))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RecordError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(RecordError::CutOff {
                needed: n,
                at: self.at,
                left: self.bytes.len() - self.at,
            });
        };
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RecordError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn field(&mut self) -> Result<&'a [u8], RecordError> {
        let len = u32::from_be_bytes(self.array()?);
        self.take(len as usize)
    }
}

/// Now, in milliseconds since the Unix epoch (the clock leases are measured with, shared
/// by every instance).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `now_ms() + d`, saturating.
pub fn ms_after(d: Duration) -> u64 {
    now_ms().saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A fresh lease token: random per process (the standard library's hasher keys), mixed
/// with a counter and the clock, so that no two holders share one
/// ([`orch_runtime::approval::nonce`]).
pub fn token() -> u64 {
    orch_runtime::approval::nonce()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_bytes_are_errors() {
        let full = Record {
            handshake: Some(br#"{"protocolVersion":"2025-06-18"}"#.to_vec()),
            snapshot: Some(vec![0, 1, 2, 255]),
            lease: Some(Lease {
                token: 42,
                tool: "pay".into(),
                expires_ms: 1_700_000_000_000,
                held: false,
                delivery: Some(Delivery::new(
                    "s1\u{1f}7",
                    CallDigest::of_canonical("pay", b"{}"),
                )),
            }),
            expires_ms: Some(1_800_000_000_000),
            delivered: Deliveries::default(),
            question: Some(br#"{"id":"q-1"}"#.to_vec()),
        };
        let mut full = full;
        for (i, outcome) in [0, 2].into_iter().enumerate() {
            let call = CallDigest::of_canonical("a", b"{}");
            let delivery = Delivery::new(&format!("s1\u{1f}{i}"), call);
            full.delivered.remember(delivery, outcome);
        }
        let mut held = full.clone();
        if let Some(lease) = held.lease.as_mut() {
            lease.held = true;
        }
        for record in [
            full.clone(),
            held,
            Record::default(),
            Record {
                lease: None,
                ..full.clone()
            },
            Record {
                handshake: None,
                ..full.clone()
            },
            Record {
                expires_ms: None,
                ..full.clone()
            },
            Record {
                delivered: Deliveries::default(),
                ..full.clone()
            },
            Record {
                question: None,
                ..full.clone()
            },
        ] {
            assert_eq!(Record::decode(&record.encode()), Ok(record));
        }
        let bytes = full.encode();
        for cut in 0..bytes.len() {
            assert!(Record::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut extra = bytes.clone();
        extra.push(0);
        let error = |bytes: &[u8]| Record::decode(bytes).unwrap_err();
        assert_eq!(error(&extra), RecordError::Trailing(1));
        assert!(error(&extra).to_string().contains("trailing bytes"));
        assert_eq!(error(b"XXXX\0"), RecordError::NoMagic);
        assert!(error(b"XXXX\0").to_string().contains("magic"));
        assert_eq!(error(b"OMR1\x80\x02"), RecordError::UnknownFlags(0x02));
        assert!(error(b"OMR1\x80\x02").to_string().contains("flags"));
        assert_eq!(error(b"OMR1\x10"), RecordError::HeldWithoutLease);
        assert!(error(b"OMR1\x10").to_string().contains("held"));
        // A length that points past the end.
        let cut = error(b"OMR1\x01\xff\xff\xff\xff");
        assert!(matches!(cut, RecordError::CutOff { .. }), "{cut:?}");
        assert!(cut.to_string().contains("cut off"));
    }

    #[test]
    fn a_lease_holds_until_it_lapses_and_is_replaced_by_the_next() {
        let mut record = Record::default();
        assert_eq!(record.busy(), None);
        let first = record.lease_to("pay", Duration::from_secs(60));
        assert_eq!(
            record.busy().map(|l| (l.token, l.tool.as_str())),
            Some((first, "pay"))
        );
        record.lease.as_mut().unwrap().expires_ms = now_ms() - 1;
        assert_eq!(record.busy(), None, "a lapsed lease does not hold");
        assert_eq!(record.lapsed().map(|l| l.token), Some(first));
        record.lease.as_mut().unwrap().held = true;
        assert_eq!(record.busy(), None, "a held lease is not in flight");
        assert_eq!(record.lapsed(), None);
        assert_eq!(record.held().map(|l| l.token), Some(first));
        record.lease.as_mut().unwrap().held = false;
        assert!(record.lease.is_some(), "but it stays until replaced");
        let second = record.lease_to("refund", Duration::from_secs(60));
        assert_ne!(first, second);
        assert_eq!(record.busy().map(|l| l.tool.as_str()), Some("refund"));
    }

    #[test]
    fn a_record_keeps_the_last_deliveries_and_their_outcomes() {
        let mut record = Record::default();
        let digest = CallDigest::of_canonical("a", b"{}");
        let delivery = |i: usize| Delivery::new(&format!("s\u{1f}{i}"), digest);
        for i in 0..DELIVERIES + 5 {
            record.delivered.remember(delivery(i), (i % 2) as u8);
        }
        let found = |record: &Record, i: usize| record.delivered.find(&delivery(i).key);
        assert_eq!(record.delivered.len(), DELIVERIES);
        assert_eq!(found(&record, 4), None, "the oldest are forgotten");
        assert_eq!(found(&record, 5), Some((delivery(5), 1)));
        assert_eq!(found(&record, 36), Some((delivery(36), 0)));
        // Remembering a key again replaces what it came to.
        record.delivered.remember(delivery(35), 0);
        assert_eq!(record.delivered.len(), DELIVERIES);
        assert_eq!(found(&record, 35), Some((delivery(35), 0)));
        assert_eq!(
            found(&record, 5),
            Some((delivery(5), 1)),
            "nothing else forgotten"
        );
        assert_eq!(Record::decode(&record.encode()), Ok(record.clone()));
        // Any id, however long, is kept in the same bytes; ids differ by their keys.
        let long = Delivery::new(&"x".repeat(100_000), digest);
        assert_ne!(long.key, Delivery::new(&"x".repeat(99_999), digest).key);
        record.delivered.remember(long, 0);
        assert_eq!(Record::decode(&record.encode()), Ok(record));
        // A delivery flag without a lease is an error; so is a count past the limit.
        assert_eq!(
            Record::decode(b"OMR1\x20"),
            Err(RecordError::HeldWithoutLease)
        );
        let error = Record::decode(b"OMR1\x40\x21").unwrap_err();
        assert_eq!(error, RecordError::TooManyDeliveries(33));
        assert!(error.to_string().contains("33 deliveries"), "{error}");
    }

    #[test]
    fn tokens_differ() {
        let a: std::collections::HashSet<u64> = (0..10_000).map(|_| token()).collect();
        assert_eq!(a.len(), 10_000);
    }
}

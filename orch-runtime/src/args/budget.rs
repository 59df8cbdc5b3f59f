//! Budgets (semantics §17): counts of calls and sums of an argument, over the run, over
//! the active step's activation, or over a sliding time window — kept in a fixed number
//! of words per budget, so that judging a call costs the same whatever the run's length.
//!
//! A budget's state lives in the session's memory words, after the remembered values
//! (after the remembered values): one word for the session's clock (the newest time a host passed,
//! in milliseconds), then per budget its total (an `i128` of billionths, two words) and,
//! for a windowed budget, a queue of its charges — a cursor word and three words per
//! charge (time, amount). Amounts are exact: a number with at most nine decimal places,
//! held as an integer count of billionths; counts add one (a billion billionths).

use crate::form::{Literal, LiteralWriter};
use crate::tables::Span;

/// [`Budget::pred`] of a budget that charges every call of its tools.
pub const EVERY_CALL: u32 = u32::MAX;
/// The charges a windowed budget keeps unless the template says otherwise.
pub const BUDGET_EVENTS: u32 = 64;
/// The most charges a windowed budget may keep.
pub const MAX_BUDGET_EVENTS: u32 = 4096;
/// The longest window, in milliseconds (400 days).
pub const MAX_WINDOW_MS: u64 = 400 * 24 * 3_600_000;
/// Amounts are integers of this many units per 1 (nine decimal places).
pub const UNIT: i128 = 1_000_000_000;

/// What a budget counts over (semantics §17).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Per {
    /// The whole run (until a reset).
    Run,
    /// The active step's activation: it starts again whenever the active step changes.
    Step,
    /// The latest user message: it starts again with every user message (a turn).
    Message,
}

/// One budget, compiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Its name, a span of [`Rules::text`](super::Rules::text).
    pub name: Span,
    /// The tools whose calls it charges, a span of [`Rules::budget_tools`](super::Rules::budget_tools).
    pub tools: Span,
    /// The JSON pointer of the number it adds up, a span of [`Rules::text`](super::Rules::text); `None`: it
    /// counts calls.
    pub sum: Option<Span>,
    /// The predicate a call's arguments must satisfy to be charged (an index into
    /// [`Rules::preds`](super::Rules::preds)), or [`EVERY_CALL`].
    pub pred: u32,
    /// What it counts over: the run, the active step's activation, or the latest user
    /// message.
    pub per: Per,
    /// The window in milliseconds: a charge older than this no longer counts; 0: none.
    pub within: u64,
    /// The charges a windowed budget keeps (0 without a window).
    pub events: u32,
    /// Where its state starts in a session's budget words (after the clock word): the
    /// words of the budgets before it, plus one.
    pub offset: u32,
    /// It counts the calls the session *refused* to admit (`"counts": "refused"`), not
    /// those it admitted.
    pub refused: bool,
}

impl Budget {
    /// The words of its state: its total, and a windowed budget's queue.
    pub const fn words(&self) -> usize {
        if self.within == 0 {
            2
        } else {
            3 + 3 * self.events as usize
        }
    }
}

impl Literal for Budget {
    fn write_literal(&self, w: &mut LiteralWriter) {
        w.item("Budget { name: ");
        self.name.write_literal(w);
        w.text(", tools: ");
        self.tools.write_literal(w);
        w.text(", sum: ");
        match self.sum {
            Some(s) => {
                w.text("Some(");
                s.write_literal(w);
                w.text(")");
            }
            None => w.text("None"),
        }
        w.text(", pred: ");
        w.int(self.pred);
        w.text(", per: ");
        w.item(match self.per {
            Per::Run => "Per::Run",
            Per::Step => "Per::Step",
            Per::Message => "Per::Message",
        });
        w.text(", within: ");
        w.int(self.within);
        w.text(", events: ");
        w.int(self.events);
        w.text(", offset: ");
        w.int(self.offset);
        w.text(", refused: ");
        self.refused.write_literal(w);
        w.text(" }");
    }
}

/// A JSON number as an exact count of billionths: `None` when it is negative, has more
/// than nine decimal places, or is beyond an `i128`. Reads the text in place (no
/// allocation: budget conditions read their bounds on every event).
pub fn amount(text: &str) -> Option<i128> {
    if !super::scalar::is_number(text) {
        return None;
    }
    let b = text.as_bytes();
    let negative = b.first() == Some(&b'-');
    let body = &b[usize::from(negative)..];
    let (mantissa, exponent) = match body.iter().position(|&c| c == b'e' || c == b'E') {
        Some(at) => (&body[..at], body.get(at + 1..)),
        None => (body, None),
    };
    let (int, frac) = match mantissa.iter().position(|&c| c == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, &mantissa[mantissa.len()..]),
    };
    let digits = || int.iter().chain(frac.iter()).map(|c| c - b'0');
    // The significant digits: no leading zeros, no trailing zeros (each one dropped
    // moves the point).
    let lead = digits().take_while(|&d| d == 0).count();
    let total = int.len() + frac.len();
    if lead == total {
        return Some(0);
    }
    if negative {
        return None;
    }
    let trail = digits().rev().take_while(|&d| d == 0).count();
    let exponent: i64 = match exponent {
        None => 0,
        Some(e) => {
            let (sign, e) = match e.first() {
                Some(b'-') => (-1, &e[1..]),
                Some(b'+') => (1, &e[1..]),
                _ => (1, e),
            };
            // An exponent past 10^15 cannot give a billionth count in an i128, either way.
            let digits = core::str::from_utf8(e).ok()?;
            sign * digits
                .parse::<i64>()
                .ok()
                .filter(|e| *e < 1_000_000_000_000_000)?
        }
    };
    // value = significant digits × 10^(exponent − frac.len() + trail); in billionths
    // the power is 9 more.
    let shift = exponent
        .checked_sub(frac.len() as i64)?
        .checked_add(trail as i64)?
        .checked_add(9)?;
    if shift < 0 {
        return None;
    }
    let mut v: i128 = 0;
    for d in digits().skip(lead).take(total - lead - trail) {
        v = v.checked_mul(10)?.checked_add(i128::from(d))?;
    }
    for _ in 0..shift {
        v = v.checked_mul(10)?;
    }
    Some(v)
}

/// A bound of a budget test as billionths; a negative bound is allowed here.
pub fn bound(text: &str) -> Option<i128> {
    match text.strip_prefix('-') {
        Some(rest) => amount(rest).map(|v| -v),
        None => amount(text),
    }
}

/// Billionths written as a decimal: `12000.5`, `3`, `0.000000001`.
pub fn decimal(v: i128) -> String {
    let sign = if v < 0 { "-" } else { "" };
    let m = v.unsigned_abs();
    let (whole, frac) = (m / UNIT as u128, m % UNIT as u128);
    if frac == 0 {
        return format!("{sign}{whole}");
    }
    let frac = format!("{frac:09}");
    format!("{sign}{whole}.{}", frac.trim_end_matches('0'))
}

/// A window written `<number><unit>` (`ms`, `s`, `m`, `h`, `d`) in milliseconds.
pub fn window_ms(text: &str) -> Option<u64> {
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = text.split_at(split);
    if n.is_empty() || (n.len() > 1 && n.starts_with('0')) {
        return None;
    }
    let n: u64 = n.parse().ok()?;
    let scale = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// A window in milliseconds, written back in its largest exact unit (`24h`, `90s`).
pub fn window_text(ms: u64) -> String {
    for (unit, scale) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms != 0 && ms.is_multiple_of(scale) {
            return format!("{}{unit}", ms / scale);
        }
    }
    format!("{ms}ms")
}

/// What a budget would charge a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Charge {
    /// It does not charge this call (another tool, or its `where` does not hold).
    None,
    /// This many billionths.
    Amount(i128),
    /// It charges this call, but the value it adds up is absent or not a number it can
    /// add exactly (the byte where the value starts, if any).
    Unreadable(Option<u32>),
}

/// A view of the budgets' words of one session.
pub(crate) struct Area<'w> {
    words: &'w [u64],
}

/// The read half of a budget's state.
fn total_of(words: &[u64]) -> i128 {
    let lo = words.first().copied().unwrap_or(0);
    let hi = words.get(1).copied().unwrap_or(0);
    (u128::from(lo) | u128::from(hi) << 64) as i128
}

fn set_total(words: &mut [u64], v: i128) {
    let v = v as u128;
    if let [lo, hi, ..] = words {
        *lo = v as u64;
        *hi = (v >> 64) as u64;
    }
}

/// A windowed budget's queue: its cursor (head in the low half, length in the high)
/// and its slots.
struct Queue<'w> {
    cursor: u64,
    slots: &'w [u64],
}

impl Queue<'_> {
    fn head(&self) -> usize {
        (self.cursor & 0xffff_ffff) as usize
    }
    fn len(&self) -> usize {
        (self.cursor >> 32) as usize
    }
    fn capacity(&self) -> usize {
        self.slots.len() / 3
    }
    /// The `k`-th oldest charge: `(time, amount)`.
    fn get(&self, k: usize) -> (u64, i128) {
        let cap = self.capacity().max(1);
        let i = (self.head() + k) % cap * 3;
        match self.slots.get(i..i + 3) {
            Some(s) => (s[0], total_of(&s[1..])),
            None => (0, 0),
        }
    }
}

/// Budget `budget`'s words within a session's budget area.
fn slot<'w>(area: &'w [u64], budget: &Budget) -> Option<&'w [u64]> {
    let start = budget.offset as usize;
    area.get(start..start + budget.words())
}

/// [`slot`], mutable.
fn slot_mut<'w>(area: &'w mut [u64], budget: &Budget) -> Option<&'w mut [u64]> {
    let start = budget.offset as usize;
    area.get_mut(start..start + budget.words())
}

/// Is a charge made at `at` still within a window of `within` ms at `now`?
fn live(at: u64, now: u64, within: u64) -> bool {
    now.saturating_sub(at) <= within
}

impl<'w> Area<'w> {
    pub(crate) fn new(words: &'w [u64]) -> Self {
        Area { words }
    }

    /// The session's clock: the newest time a host passed (0 before any).
    pub(crate) fn clock(&self) -> u64 {
        self.words.first().copied().unwrap_or(0)
    }

    /// Budget `b`'s total at time `now`: what it charged, less the charges the window
    /// has passed.
    pub(crate) fn value(&self, budget: &Budget, now: u64) -> i128 {
        let Some(words) = slot(self.words, budget) else {
            return 0;
        };
        let total = total_of(words);
        if budget.within == 0 {
            return total;
        }
        let q = Queue {
            cursor: words.get(2).copied().unwrap_or(0),
            slots: words.get(3..).unwrap_or(&[]),
        };
        let mut expired: i128 = 0;
        for k in 0..q.len() {
            let (at, amount) = q.get(k);
            if live(at, now, budget.within) {
                break;
            }
            expired = expired.saturating_add(amount);
        }
        total.saturating_sub(expired)
    }

    /// The charges a windowed budget `b` holds, oldest first: `(time, amount)`.
    pub(crate) fn charges(&self, budget: &Budget) -> Vec<(u64, i128)> {
        let Some(words) = slot(self.words, budget) else {
            return Vec::new();
        };
        if budget.within == 0 {
            return Vec::new();
        }
        let q = Queue {
            cursor: words.get(2).copied().unwrap_or(0),
            slots: words.get(3..).unwrap_or(&[]),
        };
        (0..q.len()).map(|k| q.get(k)).collect()
    }

    /// Budget `b`'s total as stored (every charge its queue still holds).
    pub(crate) fn stored_total(&self, budget: &Budget) -> i128 {
        slot(self.words, budget).map_or(0, total_of)
    }
}

/// The budgets' words of one session, to change.
pub(crate) struct AreaMut<'w> {
    words: &'w mut [u64],
}

impl<'w> AreaMut<'w> {
    pub(crate) fn new(words: &'w mut [u64]) -> Self {
        AreaMut { words }
    }

    /// Moves the clock to `at` (never back) and returns the time it now reads.
    pub(crate) fn tick(&mut self, at: Option<u64>) -> u64 {
        let Some(clock) = self.words.first_mut() else {
            return 0;
        };
        if let Some(at) = at {
            *clock = (*clock).max(at);
        }
        *clock
    }

    /// Charges `amount` to budget `b` at time `now`: windowed budgets drop the charges
    /// the window has passed and, when full, merge their two oldest into one at the
    /// later one's time (so the total never reads less than what the window holds).
    pub(crate) fn charge(&mut self, budget: &Budget, now: u64, amount: i128) {
        let Some(words) = slot_mut(self.words, budget) else {
            return;
        };
        let total = total_of(words).saturating_add(amount);
        set_total(words, total);
        if budget.within == 0 {
            return;
        }
        let (head_words, slots) = words.split_at_mut(3);
        let mut cursor = head_words[2];
        let cap = slots.len() / 3;
        if cap == 0 {
            return;
        }
        let mut total = total;
        // Drop what the window has passed.
        loop {
            let (head, len) = ((cursor & 0xffff_ffff) as usize, (cursor >> 32) as usize);
            if len == 0 {
                break;
            }
            let i = head * 3;
            if live(slots[i], now, budget.within) {
                break;
            }
            total = total.saturating_sub(total_of(&slots[i + 1..i + 3]));
            cursor = ((len as u64 - 1) << 32) | ((head + 1) % cap) as u64;
        }
        let (mut head, mut len) = ((cursor & 0xffff_ffff) as usize, (cursor >> 32) as usize);
        if len == cap {
            // Full: the oldest charge joins the next one, at the next one's time.
            let i = head * 3;
            let oldest = total_of(&slots[i + 1..i + 3]);
            head = (head + 1) % cap;
            len -= 1;
            let j = head * 3;
            let merged = total_of(&slots[j + 1..j + 3]).saturating_add(oldest);
            set_total(&mut slots[j + 1..j + 3], merged);
        }
        let k = (head + len) % cap * 3;
        slots[k] = now;
        set_total(&mut slots[k + 1..k + 3], amount);
        len += 1;
        head_words[2] = ((len as u64) << 32) | head as u64;
        set_total(head_words, total);
    }

    /// Empties budget `b`.
    pub(crate) fn clear(&mut self, budget: &Budget) {
        if let Some(words) = slot_mut(self.words, budget) {
            words.fill(0);
        }
    }

    /// Sets the clock (a restore).
    pub(crate) fn set_clock(&mut self, at: u64) {
        if let Some(c) = self.words.first_mut() {
            *c = at;
        }
    }

    /// Sets a budget without a window to `total` (a restore).
    pub(crate) fn set_total(&mut self, budget: &Budget, total: i128) {
        if let Some(words) = slot_mut(self.words, budget) {
            set_total(words, total);
        }
    }
}

/// Is `total` (billionths) within the bounds `min..=max` (number texts; empty:
/// unbounded)?
pub(crate) fn within(total: i128, min: &str, max: &str) -> bool {
    let bound = |t: &str| bound(t);
    (min.is_empty() || bound(min).is_some_and(|m| total >= m))
        && (max.is_empty() || bound(max).is_some_and(|m| total <= m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_exact_billionths() {
        assert_eq!(amount("10000"), Some(10_000 * UNIT));
        assert_eq!(amount("0.5"), Some(UNIT / 2));
        assert_eq!(amount("1e3"), Some(1000 * UNIT));
        assert_eq!(amount("0.000000001"), Some(1));
        assert_eq!(amount("0.0000000001"), None);
        assert_eq!(amount("-1"), None);
        assert_eq!(amount("-0"), Some(0));
        assert_eq!(amount("1e40"), None);
        assert_eq!(bound("-2.5"), Some(-5 * UNIT / 2));
        assert_eq!(decimal(12_000 * UNIT + UNIT / 2), "12000.5");
        assert_eq!(decimal(-3 * UNIT), "-3");
        assert_eq!(decimal(1), "0.000000001");
    }

    /// The in-place reading agrees with the exact decimal reading on every shape of
    /// JSON number.
    #[test]
    fn amounts_read_in_place_agree_with_the_exact_reading() {
        let reference = |text: &str| -> Option<i128> {
            let (negative, digits, exponent) = crate::args::scalar::decimal_parts(text)?;
            if digits.is_empty() {
                return Some(0);
            }
            if negative {
                return None;
            }
            let shift = exponent.checked_sub(digits.len() as i64)?.checked_add(9)?;
            if shift < 0 {
                return None;
            }
            let mut v: i128 = 0;
            for d in digits {
                v = v.checked_mul(10)?.checked_add(i128::from(d))?;
            }
            for _ in 0..shift {
                v = v.checked_mul(10)?;
            }
            Some(v)
        };
        let mantissas = [
            "0",
            "-0",
            "1",
            "10",
            "100",
            "0.5",
            "0.50",
            "1.000000001",
            "1.0000000001",
            "120.0",
            "0.000000001",
            "0.0000000010",
            "99999999999999999999",
            "-2.5",
            "00",
            "1.",
            ".5",
            "+1",
            "",
            "-",
            "1e",
            "abc",
        ];
        let exponents = [
            "",
            "e0",
            "e3",
            "E-3",
            "e+2",
            "e-9",
            "e-10",
            "e29",
            "e40",
            "e-99999999999999999999",
        ];
        for m in mantissas {
            for e in exponents {
                let text = format!("{m}{e}");
                let expected = if super::super::scalar::is_number(&text) {
                    reference(&text)
                } else {
                    None
                };
                assert_eq!(amount(&text), expected, "{text}");
            }
        }
    }

    #[test]
    fn windows_read_and_write_back() {
        assert_eq!(window_ms("24h"), Some(86_400_000));
        assert_eq!(window_ms("90s"), Some(90_000));
        assert_eq!(window_ms("250ms"), Some(250));
        assert_eq!(window_ms("1w"), None);
        assert_eq!(window_ms("h"), None);
        assert_eq!(window_ms("01h"), None);
        assert_eq!(window_text(86_400_000), "1d");
        assert_eq!(window_text(90_000), "90s");
        assert_eq!(window_text(250), "250ms");
    }
}

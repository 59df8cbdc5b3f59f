//! Session state (SPEC §4) and the engine that applies events to it (SPEC §5–§8).
//!
//! The engine is written once, over slices: the typed [`crate::Session`] keeps its state
//! in fixed arrays, a run-time loaded [`crate::dynamic::DynSession`] in boxed slices, and
//! both call the same methods here.

use crate::bits;
use crate::regexes::Matchers;
use crate::tables::{reset, Condition, Tables};

/// Marks "no step is active" in [`State::step`].
pub(crate) const NO_STEP: u16 = u16::MAX;
/// The history entry of a foreign tool: equals no tool of the universe.
pub(crate) const FOREIGN: u16 = u16::MAX;

/// Cumulative token usage of a session (saturating).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Usage {
    /// Prompt (input) tokens.
    pub prompt: u64,
    /// Completion (output) tokens.
    pub completion: u64,
}

impl Usage {
    /// `prompt + completion`, saturating.
    pub fn total(&self) -> u64 {
        self.prompt.saturating_add(self.completion)
    }
}

/// What recording a tool did (SPEC §5), in table indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawOutcome {
    /// Advanced the sequence to this index (not yet complete).
    Advanced(u16),
    /// Advanced the sequence to its end.
    Completed,
    /// No unfinished sequence, and the tool was allowed.
    Free,
    /// An unfinished sequence expected the group at this word offset of the bit pool.
    OutOfSequence(u32),
    /// No unfinished sequence, and the tool was not allowed.
    NotAllowed,
}

/// A tool as the engine sees it: one the template declares (its index), or a foreign
/// one, by name (SPEC §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ToolRef<'a> {
    /// A tool of the universe.
    Declared(usize),
    /// A tool the template does not declare.
    Foreign(&'a str),
}

/// Why a tool may not run now (SPEC §5 "check tool"), in table indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawDenied {
    /// Not in the active step's static set.
    NotInStep(u16),
    /// The active step's sequence expects the group at this bit-pool offset.
    SequenceExpects { step: u16, index: u16, group: u32 },
    /// Permitted by the orchestration, but the host has not made it available.
    Unavailable,
}

/// The state of one session. `U` holds the used set (tool words), `F` the message flags,
/// `H` the history ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct State<U, F, H> {
    /// Active step index, or [`NO_STEP`].
    pub step: u16,
    /// Position in the active step's sequence.
    pub index: u16,
    /// Next write position of the history ring.
    pub hist_next: u16,
    /// Live entries of the history ring.
    pub hist_len: u16,
    /// Tools used since the session began (or was reset).
    pub used: U,
    /// Which message conditions the latest user message satisfied.
    pub flags: F,
    /// The history ring: tool indices, [`FOREIGN`] for foreign tools.
    pub hist: H,
    /// Cumulative token usage.
    pub usage: Usage,
}

impl<U, F, H> State<U, F, H>
where
    U: AsRef<[u64]> + AsMut<[u64]>,
    F: AsRef<[u64]> + AsMut<[u64]>,
    H: AsRef<[u16]> + AsMut<[u16]>,
{
    /// A blank state over the given (zeroed) storage; call [`State::activate`] next.
    pub fn blank(used: U, flags: F, hist: H) -> Self {
        State {
            step: NO_STEP,
            index: 0,
            hist_next: 0,
            hist_len: 0,
            used,
            flags,
            hist,
            usage: Usage::default(),
        }
    }

    /// Back to a blank state, keeping the storage.
    pub fn clear(&mut self) {
        self.step = NO_STEP;
        self.index = 0;
        self.hist_next = 0;
        self.hist_len = 0;
        self.used.as_mut().fill(0);
        self.flags.as_mut().fill(0);
        self.hist.as_mut().fill(0);
        self.usage = Usage::default();
    }

    /// The active step, if any.
    #[inline]
    pub fn active(&self) -> Option<usize> {
        (self.step != NO_STEP).then_some(self.step as usize)
    }

    /// The `k`-th newest history entry (0 = newest). `k < hist_len`.
    #[inline]
    fn recent(&self, k: usize) -> u16 {
        let ring = self.hist.as_ref();
        let cap = ring.len();
        ring[(self.hist_next as usize + cap - 1 - k) % cap]
    }

    /// History entries, oldest first.
    pub fn history(&self) -> impl Iterator<Item = u16> + '_ {
        let len = self.hist_len as usize;
        (0..len).rev().map(move |k| self.recent(k))
    }

    /// Appends a tool to the history ring.
    fn push_history(&mut self, tool: u16) {
        let ring = self.hist.as_mut();
        let cap = ring.len();
        if cap == 0 {
            return;
        }
        ring[self.hist_next as usize % cap] = tool;
        self.hist_next = ((self.hist_next as usize + 1) % cap) as u16;
        if (self.hist_len as usize) < cap {
            self.hist_len += 1;
        }
    }

    /// Does the condition hold for step `step` (SPEC §7)?
    fn holds<S: AsRef<str>>(&self, t: &Tables<'_, S>, step: usize, c: Condition) -> bool {
        match c {
            Condition::ToolUsed(tool) => bits::test(self.used.as_ref(), tool as usize),
            Condition::Message(flag) => bits::test(self.flags.as_ref(), flag as usize),
            Condition::NotRecentlyUsed { tool, window } => {
                let n = (window as usize).min(self.hist_len as usize);
                (0..n).all(|k| self.recent(k) != tool)
            }
            Condition::SequenceMatch => {
                let Some(s) = t.steps.get(step) else {
                    return false;
                };
                let n = s.sequence.len as usize;
                if n == 0 || n > self.hist_len as usize {
                    return false;
                }
                (0..n).all(|pos| {
                    let entry = self.recent(n - 1 - pos);
                    entry != FOREIGN && bits::test(t.group(step, pos), entry as usize)
                })
            }
        }
    }

    /// Step activation (SPEC §6): first matching conditional step wins; else keep the
    /// active step; else the default. A change of step resets the index to 0.
    pub fn activate<S: AsRef<str>>(&mut self, t: &Tables<'_, S>) {
        let default = t.default_step.map_or(NO_STEP, |d| d);
        let mut winner = NO_STEP;
        for (i, s) in t.steps.iter().enumerate() {
            if i as u16 == default || s.conditions.is_empty() {
                continue;
            }
            if t.step_conditions(i).iter().all(|c| self.holds(t, i, *c)) {
                winner = i as u16;
                break;
            }
        }
        if winner == NO_STEP {
            if self.step != NO_STEP {
                return;
            }
            winner = default;
        }
        if winner != self.step {
            self.step = winner;
            self.index = 0;
        }
    }

    /// The unfinished sequence position of the active step: `(step, index, group offset)`.
    #[inline]
    pub fn expected<S: AsRef<str>>(&self, t: &Tables<'_, S>) -> Option<(usize, usize, u32)> {
        let step = self.active()?;
        let s = t.steps.get(step)?;
        let index = self.index as usize;
        (index < s.sequence.len as usize)
            .then(|| (step, index, s.sequence.start + (index * t.words) as u32))
    }

    /// `allowed()` (SPEC §8) given the host's available tools, written into `out`.
    #[inline]
    pub fn allowed_into<S: AsRef<str>>(
        &self,
        t: &Tables<'_, S>,
        available: &[u64],
        out: &mut [u64],
    ) {
        match self.active() {
            None => {
                for (o, a) in out.iter_mut().zip(available) {
                    *o = *a;
                }
            }
            Some(step) => {
                let set = match self.expected(t) {
                    Some((_, _, group)) => t.set_at(group),
                    None => t.static_set(step),
                };
                bits::and_into(out, set, available);
            }
        }
    }

    /// Is the foreign tool `name` allowed now? (See [`State::check`].)
    pub fn foreign_allowed<S: AsRef<str>>(&self, t: &Tables<'_, S>, name: &str) -> bool {
        self.check(t, &[], ToolRef::Foreign(name)).is_ok()
    }

    /// Check tool (SPEC §5): may `tool` run now? The one rule for every session type,
    /// declared and foreign tools alike:
    ///
    /// 1. The active step decides whether the orchestration permits it: with no active
    ///    step, every tool; while a sequence position is pending, only that position's
    ///    tools (a sequence names declared tools only, so never a foreign one);
    ///    otherwise the step's static set — for a foreign tool, the step's `allowed`
    ///    patterns (every tool when `allowed` is empty) minus its `denied` patterns.
    /// 2. Then the host's availability: a declared tool must be in `available`; a
    ///    foreign tool is one the host itself names, so it is available.
    pub fn check<S: AsRef<str>>(
        &self,
        t: &Tables<'_, S>,
        available: &[u64],
        tool: ToolRef<'_>,
    ) -> Result<(), RawDenied> {
        if let Some(step) = self.active() {
            let permitted = match (self.expected(t), tool) {
                (Some((step, index, group)), tool) => {
                    if !matches!(tool, ToolRef::Declared(i) if bits::test(t.set_at(group), i)) {
                        return Err(RawDenied::SequenceExpects {
                            step: step as u16,
                            index: index as u16,
                            group,
                        });
                    }
                    true
                }
                (None, ToolRef::Declared(i)) => bits::test(t.static_set(step), i),
                (None, ToolRef::Foreign(name)) => t.foreign_permitted(step, name),
            };
            if !permitted {
                return Err(RawDenied::NotInStep(step as u16));
            }
        }
        match tool {
            ToolRef::Declared(i) if !bits::test(available, i) => Err(RawDenied::Unavailable),
            _ => Ok(()),
        }
    }

    /// Record tool (SPEC §5).
    pub fn record<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        available: &[u64],
        tool: ToolRef<'_>,
    ) -> RawOutcome {
        self.activate(t);
        // Was it allowed before it ran? (Judged on the state before the history changes.)
        let was_allowed = self.check(t, available, tool).is_ok();
        let entry = match tool {
            ToolRef::Declared(i) => {
                bits::set(self.used.as_mut(), i);
                i as u16
            }
            ToolRef::Foreign(_) => FOREIGN,
        };
        self.push_history(entry);
        let outcome = match self.expected(t) {
            Some((step, index, group)) => match tool {
                ToolRef::Declared(i) if bits::test(t.set_at(group), i) => {
                    self.index += 1;
                    let len = t.steps.get(step).map_or(0, |s| s.sequence.len as usize);
                    if index + 1 >= len {
                        RawOutcome::Completed
                    } else {
                        RawOutcome::Advanced(self.index)
                    }
                }
                _ => RawOutcome::OutOfSequence(group),
            },
            None if was_allowed => RawOutcome::Free,
            None => RawOutcome::NotAllowed,
        };
        self.activate(t);
        outcome
    }

    /// User message (SPEC §5): evaluate message conditions, apply `resetSequenceOn`,
    /// evaluate activation. `matchers` is the compiled form of `t.contains` and
    /// `t.regexes`.
    pub fn on_message<S: AsRef<str>>(
        &mut self,
        t: &Tables<'_, S>,
        matchers: &Matchers,
        message: &str,
    ) {
        let flags = self.flags.as_mut();
        flags.fill(0);
        let n_contains = t.contains.len();
        matchers.match_message(message, n_contains, flags);
        if let Some(step) = self.active() {
            let rules = t.steps.get(step).map_or(0, |s| s.reset);
            let mut reset_now = rules & reset::USER_MESSAGE != 0;
            if !reset_now && rules & (reset::MESSAGE_CONTAINS | reset::MESSAGE_REGEX) != 0 {
                reset_now = t.step_conditions(step).iter().any(|c| match *c {
                    Condition::Message(f) if bits::test(self.flags.as_ref(), f as usize) => {
                        let kind = if (f as usize) < n_contains {
                            reset::MESSAGE_CONTAINS
                        } else {
                            reset::MESSAGE_REGEX
                        };
                        rules & kind != 0
                    }
                    _ => false,
                });
            }
            if reset_now {
                self.index = 0;
            }
        }
        self.activate(t);
    }

    /// Usage (SPEC §5): add to the cumulative token usage, saturating.
    pub fn add_usage(&mut self, prompt: u64, completion: u64) {
        self.usage.prompt = self.usage.prompt.saturating_add(prompt);
        self.usage.completion = self.usage.completion.saturating_add(completion);
    }
}

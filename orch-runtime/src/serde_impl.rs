//! `serde` for sessions and tool sets (feature `serde`): the state of SPEC §4 by
//! *names*, so it reads well as JSON and does not depend on enum order.
//!
//! ```json
//! {"machine": "cognitive-reasoner", "step": "ResearchMode", "sequenceIndex": 1,
//!  "history": ["search", null], "used": ["search"],
//!  "matched": ["regex:(?i)\\b(research|find out)\\b"],
//!  "usage": {"prompt": 120, "completion": 30}, "available": ["search", "think"]}
//! ```
//!
//! `null` in `history` is a foreign tool. Deserializing checks everything against the
//! machine — its name, step and tool names, the sequence index, the history length — and
//! fails with a message naming the offending value; it never panics.

use crate::bits::{ToolEnum, ToolSet, Words};
use crate::machine::{Machine, StepEnum};
use crate::session::Session;
use crate::state::{State, Usage, FOREIGN, NO_STEP};
use crate::Entries;
use serde::de::{self, Deserialize, Deserializer, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeSeq, Serializer};
use std::marker::PhantomData;

impl<T: ToolEnum> Serialize for ToolSet<T> {
    /// A list of tool names.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for name in self.names() {
            seq.serialize_element(name)?;
        }
        seq.end()
    }
}

impl<'de, T: ToolEnum> Deserialize<'de> for ToolSet<T> {
    /// A list of tool names; an unknown name is an error.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: ToolEnum> Visitor<'de> for V<T> {
            type Value = ToolSet<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of tool names")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut set = ToolSet::EMPTY;
                while let Some(name) = seq.next_element::<std::borrow::Cow<'de, str>>()? {
                    match T::from_name(&name) {
                        Some(t) => set.insert(t),
                        None => return Err(de::Error::custom(format!("unknown tool `{name}`"))),
                    }
                }
                Ok(set)
            }
        }
        d.deserialize_seq(V(PhantomData))
    }
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase", bound = "")]
struct SessionOut<'a, T: ToolEnum> {
    machine: &'a str,
    step: Option<&'a str>,
    sequence_index: u16,
    history: Vec<Option<&'a str>>,
    used: ToolSet<T>,
    matched: Vec<String>,
    usage: Usage,
    available: ToolSet<T>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, bound = "")]
struct SessionIn<T: ToolEnum> {
    machine: String,
    step: Option<String>,
    sequence_index: u16,
    history: Vec<Option<String>>,
    used: ToolSet<T>,
    #[serde(default)]
    matched: Vec<String>,
    usage: Usage,
    available: ToolSet<T>,
}

/// The name of message flag `i`: `contains:<needle>` or `regex:<pattern>`.
fn flag_name<M: Machine>(i: usize) -> String {
    let t = M::tables();
    match t.contains.get(i) {
        Some(c) => format!("contains:{c}"),
        None => format!(
            "regex:{}",
            t.regexes.get(i - t.contains.len()).copied().unwrap_or("")
        ),
    }
}

impl<M: Machine> Serialize for Session<M> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = M::tables();
        let state = self.raw_state();
        let tools = <M::Tool as ToolEnum>::ALL;
        SessionOut::<M::Tool> {
            machine: t.name,
            step: self.step().map(StepEnum::name),
            sequence_index: state.index,
            history: state
                .history()
                .map(|i| match i {
                    FOREIGN => None,
                    i => tools.get(i as usize).map(|t| t.name()),
                })
                .collect(),
            used: self.used(),
            matched: crate::bits::BitIter::new(state.flags.as_ref())
                .map(flag_name::<M>)
                .collect(),
            usage: state.usage,
            available: self.available(),
        }
        .serialize(s)
    }
}

impl<'de, M: Machine> Deserialize<'de> for Session<M> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let input = SessionIn::<M::Tool>::deserialize(d)?;
        let t = M::tables();
        if input.machine != t.name {
            return Err(de::Error::custom(format!(
                "this session belongs to machine `{}`, not `{}`",
                input.machine, t.name
            )));
        }
        let mut state = State::blank(
            <<M::Tool as ToolEnum>::Words as Words>::ZERO,
            <M::Flags as Words>::ZERO,
            <M::History as Entries>::ZERO,
        );
        state.step = match &input.step {
            None => NO_STEP,
            Some(name) => match <M::Step as StepEnum>::from_name(name) {
                Some(s) => s.index() as u16,
                None => return Err(de::Error::custom(format!("unknown step `{name}`"))),
            },
        };
        let seq_len = state
            .active()
            .and_then(|i| t.steps.get(i))
            .map_or(0, |s| s.sequence.len);
        if u32::from(input.sequence_index) > seq_len {
            return Err(de::Error::custom(format!(
                "sequenceIndex {} is past the end of the sequence ({seq_len} positions)",
                input.sequence_index
            )));
        }
        state.index = input.sequence_index;
        let capacity = state.hist.as_ref().len();
        if input.history.len() > capacity {
            return Err(de::Error::custom(format!(
                "history has {} entries; this machine keeps {capacity}",
                input.history.len()
            )));
        }
        for entry in &input.history {
            let i = match entry {
                None => FOREIGN,
                Some(name) => match <M::Tool as ToolEnum>::from_name(name) {
                    Some(tool) => tool.index() as u16,
                    None => {
                        return Err(de::Error::custom(format!(
                            "unknown tool `{name}` in history"
                        )))
                    }
                },
            };
            let next = state.hist_next as usize;
            state.hist.as_mut()[next % capacity] = i;
            state.hist_next = ((next + 1) % capacity) as u16;
            state.hist_len += 1;
        }
        state.used = *input.used.words();
        for m in &input.matched {
            let flags = t.contains.len() + t.regexes.len();
            match (0..flags).find(|i| flag_name::<M>(*i) == *m) {
                Some(i) => crate::bits::set(state.flags.as_mut(), i),
                None => {
                    return Err(de::Error::custom(format!(
                        "unknown message condition `{m}`"
                    )))
                }
            }
        }
        state.usage = input.usage;
        Ok(Session::from_parts(state, *input.available.words()))
    }
}

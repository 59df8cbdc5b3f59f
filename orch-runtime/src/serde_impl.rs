//! `serde` for sessions and tool sets (feature `serde`).
//!
//! A `ToolSet` is a list of tool names. A `Session` is its [`Snapshot`] (by names, with
//! format version and fingerprint). Deserializing a session is strict: the snapshot must
//! map onto this machine exactly (same machine, every step, tool and condition known,
//! index and history in range), else it is an error naming what did not fit. For a
//! tolerant restore into a changed template use [`Session::restore`].

use crate::bits::{ToolEnum, ToolSet};
use crate::machine::Machine;
use crate::session::Session;
use crate::snapshot::Snapshot;
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

impl<M: Machine> Serialize for Session<M> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.snapshot().serialize(s)
    }
}

impl<'de, M: Machine> Deserialize<'de> for Session<M> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let snapshot = Snapshot::deserialize(d)?;
        let (session, report) = Session::restore(&snapshot).map_err(de::Error::custom)?;
        if let Some(step) = &report.missing_step {
            return Err(de::Error::custom(format!("unknown step `{step}`")));
        }
        if let Some((index, len)) = report.index_clamped {
            return Err(de::Error::custom(format!(
                "sequenceIndex {index} is past the end of the sequence ({len} positions)"
            )));
        }
        if let Some(tool) = report.missing_tools.first() {
            return Err(de::Error::custom(format!("unknown tool `{tool}`")));
        }
        if let Some(c) = report.missing_conditions.first() {
            return Err(de::Error::custom(format!(
                "unknown message condition `{c}`"
            )));
        }
        if report.history_truncated > 0 {
            return Err(de::Error::custom(format!(
                "history has {} entries more than this machine keeps",
                report.history_truncated
            )));
        }
        Ok(session)
    }
}

//! A set of keys kept under one key of a [`SessionStore`]: how a host finds the few
//! values of many that something is waiting on (the runs that hold a question for an
//! approver) without a scan of the store, on any store — in memory, one Redis server or
//! a Redis Cluster (the set is one value, so one slot).
//!
//! Each change is one compare-and-set of the set ([`crate::modify`]). The set is an
//! index, not the truth: a host writes the value first and the index after, and a reader
//! looks at each value it names (a member whose value no longer waits is dropped with
//! [`remove`]). Kept for rare changes (a question asked, answered): every change writes
//! the whole set.
//!
//! Encoding: the magic `OIX1`, then each member as a `u32` big-endian length and its
//! bytes (UTF-8), in the order they were added.

use crate::{Change, ModifyError, SessionStore, StoreError};

const MAGIC: &[u8; 4] = b"OIX1";

/// Adds `member` to the set under `index`: `true` if it was not in it.
pub async fn add<S: SessionStore + ?Sized>(
    store: &S,
    index: &str,
    member: &str,
) -> Result<bool, StoreError> {
    change(store, index, |members| {
        if members.iter().any(|m| m == member) {
            return false;
        }
        members.push(member.to_owned());
        true
    })
    .await
}

/// Removes `member` from the set under `index`: `true` if it was in it.
pub async fn remove<S: SessionStore + ?Sized>(
    store: &S,
    index: &str,
    member: &str,
) -> Result<bool, StoreError> {
    change(store, index, |members| {
        let before = members.len();
        members.retain(|m| m != member);
        members.len() != before
    })
    .await
}

/// The members of the set under `index`, in the order they were added (none when
/// nothing is stored there).
pub async fn members<S: SessionStore + ?Sized>(
    store: &S,
    index: &str,
) -> Result<Vec<String>, StoreError> {
    match store.load(index).await? {
        None => Ok(Vec::new()),
        Some(value) => decode(index, &value.bytes),
    }
}

/// One compare-and-set of the set: `f` changes the members and says whether it did.
async fn change<S: SessionStore + ?Sized>(
    store: &S,
    index: &str,
    mut f: impl FnMut(&mut Vec<String>) -> bool + Send,
) -> Result<bool, StoreError> {
    let modified = crate::modify(store, index, crate::DEFAULT_MAX_ATTEMPTS, None, |value| {
        let mut members = match value {
            None => Vec::new(),
            Some(v) => decode(index, &v.bytes)?,
        };
        Ok(match f(&mut members) {
            true => Change::Write(encode(&members), true),
            false => Change::Keep(false),
        })
    })
    .await;
    match modified {
        Ok(m) => Ok(m.value),
        Err(ModifyError::Store(e) | ModifyError::Change(e)) => Err(e),
    }
}

fn encode(members: &[String]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    for member in members {
        // Keys are short; a member is never near 4 GiB.
        let len = u32::try_from(member.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&member.as_bytes()[..len as usize]);
    }
    out
}

fn decode(index: &str, bytes: &[u8]) -> Result<Vec<String>, StoreError> {
    let corrupt = |why: &str| StoreError::backend(format!("the key index `{index}` {why}"));
    let mut rest = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| corrupt("is not an index (no `OIX1` magic)"))?;
    let mut members = Vec::new();
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| corrupt("is cut off in a length"))?;
        let len = usize::try_from(u32::from_be_bytes(*len)).unwrap_or(usize::MAX);
        if tail.len() < len {
            return Err(corrupt("is cut off in a member"));
        }
        let (member, tail) = tail.split_at(len);
        let member =
            std::str::from_utf8(member).map_err(|_| corrupt("holds a member that is not UTF-8"))?;
        members.push(member.to_owned());
        rest = tail;
    }
    Ok(members)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;

    #[tokio::test]
    async fn members_are_added_once_removed_once_and_bad_bytes_are_errors() {
        let store = MemoryStore::new();
        assert!(members(&store, "ix").await.unwrap().is_empty());
        assert!(add(&store, "ix", "run:a").await.unwrap());
        assert!(add(&store, "ix", "run:\nb").await.unwrap());
        assert!(!add(&store, "ix", "run:a").await.unwrap());
        assert_eq!(members(&store, "ix").await.unwrap(), ["run:a", "run:\nb"]);
        assert!(remove(&store, "ix", "run:a").await.unwrap());
        assert!(!remove(&store, "ix", "run:a").await.unwrap());
        assert_eq!(members(&store, "ix").await.unwrap(), ["run:\nb"]);
        let bytes = encode(&["ab".to_owned()]);
        for cut in [0, 3, 5, bytes.len() - 1] {
            assert!(decode("ix", &bytes[..cut]).is_err(), "cut at {cut}");
        }
        let error = decode("ix", b"OIX1\0\0\0\x01\xff").unwrap_err();
        assert!(error.to_string().contains("not UTF-8"), "{error}");
    }
}

//! Workflow runs keyed by a credential, for clients without protocol sessions (MCP
//! 2026-07-28) and for anyone who wants a run to outlive a connection.
//!
//! `POST /runs` mints a run: a fresh record in the store and a bearer token that names
//! it. The token is 32 bytes from the operating system's random source, written as
//! `orch_run_` and 64 hex digits; the gateway never stores it, only its SHA-256 (the
//! run's *id*, which is not secret: the token cannot be derived from it). The record lives
//! under `run:<id>` and carries the run's absolute expiry besides the store's idle TTL.
//! Revoking a run deletes its record: the token names nothing any more, and a call in
//! flight cannot bring the run back.
//!
//! This module is the runs' names (tokens, ids, store keys); minting, finding and
//! revoking a run are the handler's (`handler/runs.rs`).

use sha2::{Digest, Sha256};

/// What every run token starts with (so that a gateway can tell one from its operator
/// token at a glance, and secret scanners can find leaked ones).
pub(crate) const TOKEN_PREFIX: &str = "orch_run_";

/// The store key of the run a request presented a valid credential for, put in the
/// request's extensions by the HTTP guard (or found from `_meta` over stdio).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunKey(pub(crate) String);

/// The run id of `token`: its SHA-256 in lowercase hex.
pub(crate) fn run_id(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// What the store key of every run starts with.
pub(crate) const RUN_PREFIX: &str = "run:";

/// The store key of run `id`.
pub(crate) fn run_key(id: &str) -> String {
    format!("{RUN_PREFIX}{id}")
}

/// Is `id` the shape of a run id (64 lowercase hex digits)?
pub(crate) fn is_run_id(id: &str) -> bool {
    id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `bytes` in lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_tokens_hashes() {
        // The SHA-256 of "abc" (FIPS 180-2, appendix B.1).
        assert_eq!(
            run_id("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(is_run_id(&run_id("abc")));
        assert!(!is_run_id("BA7816bf"));
        assert!(!is_run_id(&"g".repeat(64)));
    }
}

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

use crate::handler::{store_error, Shared};
use crate::jwt::JWT_PREFIX;
use orch_store::lease::{ms_after, now_ms, Record};
use orch_store::SessionStore;
use rmcp::ErrorData as McpError;
use sha2::{Digest, Sha256};
use std::time::Duration;

/// What every run token starts with (so that a gateway can tell one from its operator
/// token at a glance, and secret scanners can find leaked ones).
pub(crate) const TOKEN_PREFIX: &str = "orch_run_";

/// The store key of the run a request presented a valid credential for, put in the
/// request's extensions by the HTTP guard (or found from `_meta` over stdio).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RunKey(pub(crate) String);

/// A run just minted.
pub(crate) struct Minted {
    /// The run's id: the SHA-256 of its token, in hex.
    pub(crate) id: String,
    /// The bearer token (shown once, stored nowhere).
    pub(crate) token: String,
    /// When the run ends, in milliseconds since the Unix epoch.
    pub(crate) expires_ms: u64,
}

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

/// A fresh run token.
fn fresh_token() -> Result<String, McpError> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)
        .map_err(|e| McpError::from(crate::error::Error::Random(e.to_string())))?;
    Ok(format!("{TOKEN_PREFIX}{}", hex(&secret)))
}

impl<S: SessionStore + 'static> Shared<S> {
    /// Mints a run that lasts `ttl` from now: its record is written (only if no record
    /// has that key, which a fresh 256-bit secret makes certain) before the token is
    /// handed out.
    pub(crate) async fn mint_run(&self, ttl: Duration) -> Result<Minted, McpError> {
        let token = fresh_token()?;
        let id = run_id(&token);
        let expires_ms = ms_after(ttl);
        let record = Record {
            expires_ms: Some(expires_ms),
            ..Record::default()
        };
        let written = self
            .store
            .compare_and_set(&run_key(&id), None, record.encode())
            .await
            .map_err(store_error)?;
        if written.is_none() {
            return Err(crate::error::Error::RunIdTaken.into());
        }
        Ok(Minted {
            id,
            token,
            expires_ms,
        })
    }

    /// The run `token` names, if it names a live one: `None` when it was never minted,
    /// was revoked, or has expired (an expired run's record is deleted on the way).
    pub(crate) async fn run_for_token(&self, token: &str) -> Result<Option<RunKey>, McpError> {
        if !token.starts_with(TOKEN_PREFIX) {
            return Ok(None);
        }
        let key = run_key(&run_id(token));
        let Some(record) = self.record(&key).await? else {
            return Ok(None);
        };
        if record.expires_ms.is_some_and(|at| at <= now_ms()) {
            self.store.remove(&key).await.map_err(store_error)?;
            return Ok(None);
        }
        Ok(Some(RunKey(key)))
    }

    /// Ends run `id` (deletes its record): a minted run, or the state of a run named by
    /// a JWT claim (which the next token with that claim starts afresh). Whether there
    /// was one.
    pub(crate) async fn revoke_run(&self, id: &str) -> Result<bool, McpError> {
        let mut existed = false;
        for key in [run_key(id), format!("{JWT_PREFIX}{id}")] {
            existed |= self.store.load(&key).await.map_err(store_error)?.is_some();
            self.store.remove(&key).await.map_err(store_error)?;
        }
        Ok(existed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_and_ids_are_their_hashes() {
        let a = fresh_token().unwrap();
        let b = fresh_token().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX));
        assert_eq!(a.len(), TOKEN_PREFIX.len() + 64);
        let id = run_id(&a);
        assert!(is_run_id(&id));
        assert_ne!(id, run_id(&b));
        // The SHA-256 of "abc" (FIPS 180-2, appendix B.1).
        assert_eq!(
            run_id("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(!is_run_id("BA7816bf"));
        assert!(!is_run_id(&"g".repeat(64)));
    }
}

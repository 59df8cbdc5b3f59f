//! Minting, finding and revoking workflow runs keyed by a credential
//! ([`crate::runs`] names them).

use super::{store_error, Shared};
use crate::jwt::JWT_PREFIX;
use crate::runs::{hex, run_id, run_key, RunKey, TOKEN_PREFIX};
use orch_store::lease::{ms_after, now_ms, Record};
use orch_store::SessionStore;
use rmcp::ErrorData as McpError;
use std::time::Duration;

/// A run just minted.
pub(crate) struct Minted {
    /// The run's id: the SHA-256 of its token, in hex.
    pub(crate) id: String,
    /// The bearer token (shown once, stored nowhere).
    pub(crate) token: String,
    /// When the run ends, in milliseconds since the Unix epoch.
    pub(crate) expires_ms: u64,
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
    use crate::runs::is_run_id;

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
    }
}

//! JWTs from an identity provider as run credentials: the gateway checks a bearer JWT
//! (`orch_approvals::jwt`: its signature against the provider's JSON Web Key Set, its
//! issuer, audience and expiry) and keys the run by one of its claims (`sub` by default).
//! The run is the claim's, not the token's: every token the provider issues with that
//! claim value continues it.

use crate::runs::{hex, RunKey};
use crate::GatewayError;
pub use orch_approvals::jwt::Jwks;
use orch_approvals::jwt::{Trust, Verifier};
use sha2::{Digest, Sha256};

/// What the store key of every run named by a JWT claim starts with.
pub(crate) const JWT_PREFIX: &str = "jwt:";

/// How the gateway accepts JWTs as run credentials (see `docs/mcp.md`).
#[derive(Clone, Debug)]
pub struct JwtOptions {
    /// The provider's keys.
    pub jwks: Jwks,
    /// The `iss` every token must carry.
    pub issuer: String,
    /// An `aud` every token must carry.
    pub audience: String,
    /// The claim whose value names the run (e.g. `sub`, or a claim of your own such
    /// as `run_id`); a token without it (or with a value that is not a non-empty string
    /// or a number) is refused.
    pub run_claim: String,
}

/// Checks JWTs against [`JwtOptions`].
pub(crate) struct JwtVerifier {
    verifier: Verifier,
    run_claim: String,
}

impl JwtVerifier {
    /// The issuer whose tokens are taken.
    pub(crate) fn issuer(&self) -> &str {
        self.verifier.issuer()
    }

    /// Reads or fetches the key set; an error says why it cannot be had.
    pub(crate) async fn load(options: JwtOptions) -> Result<Self, GatewayError> {
        let trust = Trust {
            jwks: options.jwks,
            issuer: options.issuer,
            audience: options.audience,
        };
        let verifier = Verifier::load(trust).await.map_err(GatewayError::Options)?;
        Ok(JwtVerifier {
            verifier,
            run_claim: options.run_claim,
        })
    }

    /// Does `token` look like a JWT (three base64url parts, the first a JSON object)?
    pub(crate) fn looks_like_jwt(token: &str) -> bool {
        Verifier::looks_like_jwt(token)
    }

    /// The run `token` names, or why it is refused (said to the client: about its own
    /// token).
    pub(crate) async fn verify(&self, token: &str) -> Result<RunKey, String> {
        let claims = self.verifier.verify(token).await?;
        let claim = &self.run_claim;
        let value = match claims.get(claim) {
            Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
            Some(serde_json::Value::Number(n)) => n.to_string(),
            _ => {
                return Err(format!(
                    "the JWT has no `{claim}` claim (a non-empty string or a number), which names the run"
                ))
            }
        };
        let mut hasher = Sha256::new();
        hasher.update(self.verifier.issuer().as_bytes());
        hasher.update([0]);
        hasher.update(value.as_bytes());
        Ok(RunKey(format!("{JWT_PREFIX}{}", hex(&hasher.finalize()))))
    }
}

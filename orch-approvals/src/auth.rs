//! Who may look at and answer the questions: operator tokens (each with a name and a
//! role) and bearer JWTs from an identity provider whose role claim names a role.
//!
//! Two roles: a **viewer** lists and reads questions; an **approver** also answers them.
//! A token is compared by its SHA-256 digest in constant time; a JWT is verified
//! ([`crate::jwt`]) and its identity is its `sub`. Which roles a JWT holds is its role
//! claim's (`roles` by default: an array of strings, or one string of space-separated
//! words): `orch:approver` and `orch:viewer` by default.

use crate::jwt::{Trust, Verifier};
use std::fmt;

/// What a caller may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// List and read questions.
    Viewer,
    /// List, read and answer questions.
    Approver,
}

impl Role {
    /// The role's word in an operator-token line: `viewer` or `approver`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Approver => "approver",
        }
    }
}

/// A caller who proved who they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// Their name: an operator token's name (`token:<name>`), a JWT's issuer-scoped
    /// subject (`jwt:<sub>`).
    pub name: String,
    /// What they may do.
    pub role: Role,
}

/// Why a caller is turned away.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    /// No credential, or one that does not verify (401): why.
    Unauthenticated(String),
    /// A credential that verifies but grants no role here (403): why.
    Forbidden(String),
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Denied::Unauthenticated(why) | Denied::Forbidden(why) => f.write_str(why),
        }
    }
}

/// How JWTs grant roles.
#[derive(Clone, Debug)]
pub struct JwtRoles {
    /// Which JWTs are taken.
    pub trust: Trust,
    /// The claim that lists the holder's roles (default `roles`).
    pub claim: String,
    /// The claim value that makes an approver (default `orch:approver`).
    pub approver: String,
    /// The claim value that makes a viewer (default `orch:viewer`).
    pub viewer: String,
}

impl JwtRoles {
    /// Roles from JWTs of `trust`, with the default claim and values.
    pub fn new(trust: Trust) -> JwtRoles {
        JwtRoles {
            trust,
            claim: "roles".to_owned(),
            approver: "orch:approver".to_owned(),
            viewer: "orch:viewer".to_owned(),
        }
    }
}

/// The credentials the approvals API takes.
pub struct Approvers {
    /// Each operator token: its name, its role and its digest.
    tokens: Vec<(String, Role, [u8; 32])>,
    jwt: Option<(Verifier, JwtRoles)>,
}

impl fmt::Debug for Approvers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.tokens.iter().map(|(n, r, _)| (n, r)).collect();
        f.debug_struct("Approvers")
            .field("tokens", &names)
            .field("jwt", &self.jwt.as_ref().map(|(_, roles)| roles))
            .finish()
    }
}

impl Approvers {
    /// No credentials yet: nobody is let in.
    pub fn new() -> Approvers {
        Approvers {
            tokens: Vec::new(),
            jwt: None,
        }
    }

    /// Also takes the operator token `token`, named `name`, with `role`.
    pub fn token(mut self, name: &str, role: Role, token: &str) -> Approvers {
        self.tokens.push((
            name.to_owned(),
            role,
            hmac_sha256::Hash::hash(token.as_bytes()),
        ));
        self
    }

    /// Also takes operator tokens from `text`: one per line, `NAME ROLE TOKEN` (role
    /// `viewer` or `approver`); blank lines and lines starting with `#` are skipped. An
    /// error names the line.
    pub fn tokens_from(mut self, text: &str) -> Result<Approvers, String> {
        for (at, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let [name, role, token] = words[..] else {
                return Err(format!(
                    "line {}: expected `NAME ROLE TOKEN`, found {} words",
                    at + 1,
                    words.len()
                ));
            };
            let role = match role {
                "approver" => Role::Approver,
                "viewer" => Role::Viewer,
                other => {
                    return Err(format!(
                        "line {}: the role `{other}` is neither `approver` nor `viewer`",
                        at + 1
                    ))
                }
            };
            if token.len() < 16 {
                return Err(format!(
                    "line {}: the token of `{name}` is shorter than 16 characters",
                    at + 1
                ));
            }
            self = self.token(name, role, token);
        }
        Ok(self)
    }

    /// Also takes JWTs as `roles` says; the key set is read or fetched now.
    pub async fn jwt(mut self, roles: JwtRoles) -> Result<Approvers, String> {
        let verifier = Verifier::load(roles.trust.clone()).await?;
        self.jwt = Some((verifier, roles));
        Ok(self)
    }

    /// Does it take any credential at all?
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty() && self.jwt.is_none()
    }

    /// Who the bearer of `authorization` (an `Authorization` header's value) is.
    pub async fn identify(&self, authorization: Option<&str>) -> Result<Identity, Denied> {
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                Denied::Unauthenticated("send `Authorization: Bearer <token>`".to_owned())
            })?;
        let digest = hmac_sha256::Hash::hash(token.as_bytes());
        let mut found = None;
        for (name, role, known) in &self.tokens {
            // Every token is compared in full, in constant time.
            if constant_time_eq(known, &digest) {
                found = Some(Identity {
                    name: format!("token:{name}"),
                    role: *role,
                });
            }
        }
        if let Some(identity) = found {
            return Ok(identity);
        }
        match &self.jwt {
            Some((verifier, roles)) if Verifier::looks_like_jwt(token) => {
                let claims = verifier
                    .verify(token)
                    .await
                    .map_err(Denied::Unauthenticated)?;
                let subject = match claims.get("sub") {
                    Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
                    _ => {
                        return Err(Denied::Unauthenticated(
                            "the JWT has no `sub` claim, which names the approver".to_owned(),
                        ))
                    }
                };
                let granted = role_words(claims.get(&roles.claim));
                let role = if granted.iter().any(|w| *w == roles.approver) {
                    Role::Approver
                } else if granted.iter().any(|w| *w == roles.viewer) {
                    Role::Viewer
                } else {
                    return Err(Denied::Forbidden(format!(
                        "the JWT's `{}` claim grants neither `{}` nor `{}`",
                        roles.claim, roles.approver, roles.viewer
                    )));
                };
                Ok(Identity {
                    name: format!("jwt:{subject}"),
                    role,
                })
            }
            _ => Err(Denied::Unauthenticated(
                "the bearer token is not one this service takes".to_owned(),
            )),
        }
    }
}

impl Default for Approvers {
    fn default() -> Self {
        Approvers::new()
    }
}

/// The words of a role claim: an array of strings, or one string of space-separated
/// words (OAuth's `scope` style).
fn role_words(claim: Option<&serde_json::Value>) -> Vec<&str> {
    match claim {
        Some(serde_json::Value::String(s)) => s.split_whitespace().collect(),
        Some(serde_json::Value::Array(items)) => {
            items.iter().filter_map(serde_json::Value::as_str).collect()
        }
        _ => Vec::new(),
    }
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn operator_tokens_are_read_strictly_and_name_their_bearer() {
        let approvers = Approvers::new()
            .tokens_from("# who may answer\nfinance approver 0123456789abcdef0123\n\nops viewer fedcba9876543210fedc\n")
            .unwrap();
        let who = approvers
            .identify(Some("Bearer 0123456789abcdef0123"))
            .await
            .unwrap();
        assert_eq!(
            who,
            Identity {
                name: "token:finance".into(),
                role: Role::Approver
            }
        );
        let viewer = approvers
            .identify(Some("Bearer fedcba9876543210fedc"))
            .await
            .unwrap();
        assert_eq!(viewer.role, Role::Viewer);
        for header in [
            None,
            Some("Bearer "),
            Some("Basic abc"),
            Some("Bearer nope"),
        ] {
            assert!(matches!(
                approvers.identify(header).await,
                Err(Denied::Unauthenticated(_))
            ));
        }
        for (text, says) in [
            ("a approver", "expected `NAME ROLE TOKEN`"),
            ("a admin 0123456789abcdef0123", "neither"),
            ("a viewer short", "shorter than 16"),
        ] {
            let error = Approvers::new().tokens_from(text).unwrap_err();
            assert!(
                error.contains(says) && error.starts_with("line 1"),
                "{error}"
            );
        }
    }

    #[test]
    fn role_claims_are_arrays_or_words() {
        let words = serde_json::json!("openid orch:approver");
        assert_eq!(role_words(Some(&words)), ["openid", "orch:approver"]);
        let list = serde_json::json!(["orch:viewer", 3]);
        assert_eq!(role_words(Some(&list)), ["orch:viewer"]);
        assert!(role_words(Some(&serde_json::json!({"a": 1}))).is_empty());
    }
}

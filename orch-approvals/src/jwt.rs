//! JWTs from an identity provider: a bearer JWT's signature checked against the
//! provider's JSON Web Key Set, its issuer, audience, expiry and `nbf`; what it says is
//! its claims. `orch mcp` keys runs by one of them; the approvals API reads an
//! approver's identity and roles from them.
//!
//! Only public-key algorithms are accepted (RS*, PS*, ES*, EdDSA); a key set served at a
//! URL is fetched at start and again when a token names a key it does not have (the
//! first time at once, then at most once a minute), so the provider can rotate its keys.

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// How long a fetch of the key set may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest time between two fetches of the key set for an unknown key id.
const REFETCH_PAUSE: Duration = Duration::from_secs(60);

/// Where the identity provider's JSON Web Key Set is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Jwks {
    /// A file holding the set (`{"keys": [...]}`), read once at start.
    File(PathBuf),
    /// The provider's `jwks_uri` (http or https), fetched at start and on rotation.
    Url(String),
}

/// Which JWTs are taken: the provider's keys, its issuer, the audience.
#[derive(Clone, Debug)]
pub struct Trust {
    /// The provider's keys.
    pub jwks: Jwks,
    /// The `iss` every token must carry.
    pub issuer: String,
    /// An `aud` every token must carry.
    pub audience: String,
}

/// A JWT's claims, once it verified.
pub type Claims = serde_json::Map<String, serde_json::Value>;

/// Checks JWTs against a [`Trust`].
pub struct Verifier {
    options: Trust,
    keys: RwLock<Arc<JwkSet>>,
    /// When the set was last fetched for an unknown key (`None`: not yet since start).
    last_refetch: Mutex<Option<Instant>>,
    http: reqwest::Client,
}

impl Verifier {
    /// The issuer whose tokens are taken.
    pub fn issuer(&self) -> &str {
        &self.options.issuer
    }

    /// Reads or fetches the key set; an error says why it cannot be had.
    pub async fn load(options: Trust) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        let keys = fetch(&options.jwks, &http).await?;
        if keys.keys.is_empty() {
            return Err(format!(
                "the JSON Web Key Set {} has no keys",
                describe(&options.jwks)
            ));
        }
        Ok(Verifier {
            options,
            keys: RwLock::new(Arc::new(keys)),
            last_refetch: Mutex::new(None),
            http,
        })
    }

    /// Does `token` look like a JWT (three base64url parts, the first a JSON object)?
    pub fn looks_like_jwt(token: &str) -> bool {
        token.starts_with("eyJ") && token.bytes().filter(|&b| b == b'.').count() == 2
    }

    /// The claims of `token`, or why it is refused (said to the token's holder: about
    /// their own token).
    pub async fn verify(&self, token: &str) -> Result<Claims, String> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| format!("the bearer token is not a JWT ({e})"))?;
        let key = match self.key_for(header.kid.as_deref()) {
            Some(key) => key,
            None => {
                self.refetch().await;
                self.key_for(header.kid.as_deref()).ok_or_else(|| match &header.kid {
                    Some(kid) => format!(
                        "the JWT is signed with a key the identity provider does not list (kid `{kid}`)"
                    ),
                    None => "the JWT names no key (kid), and the identity provider lists several"
                        .to_owned(),
                })?
            }
        };
        let (decoding, algorithms) = key;
        if !algorithms.contains(&header.alg) {
            return Err(format!(
                "the JWT says it is signed with {:?}, but its key is for {algorithms:?}",
                header.alg
            ));
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.options.issuer]);
        validation.set_audience(&[&self.options.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        // A token is taken from its `nbf` on (when it has one), not only until `exp`.
        validation.validate_nbf = true;
        validation.leeway = 30;
        jsonwebtoken::decode::<Claims>(token, &decoding, &validation)
            .map(|data| data.claims)
            .map_err(|e| refusal(&e))
    }

    /// The key for `kid` (the only key, when the token names none and the set has
    /// one) and the algorithms it may verify, if the set has it in a usable form.
    fn key_for(&self, kid: Option<&str>) -> Option<(DecodingKey, Vec<Algorithm>)> {
        let keys = Arc::clone(&self.keys.read().unwrap_or_else(PoisonError::into_inner));
        let jwk = match kid {
            Some(kid) => keys.find(kid)?,
            None if keys.keys.len() == 1 => &keys.keys[0],
            None => return None,
        };
        use Algorithm::{EdDSA, ES256, ES384, PS256, PS384, PS512, RS256, RS384, RS512};
        let algorithms = match (&jwk.algorithm, jwk.common.key_algorithm) {
            // A symmetric key in a provider's public set is a mistake: never trusted.
            (AlgorithmParameters::OctetKey(_), _) => return None,
            (_, Some(alg)) => vec![Algorithm::try_from(alg).ok()?],
            (AlgorithmParameters::RSA(_), None) => vec![RS256, RS384, RS512, PS256, PS384, PS512],
            (AlgorithmParameters::EllipticCurve(p), None) => match p.curve {
                jsonwebtoken::jwk::EllipticCurve::P256 => vec![ES256],
                jsonwebtoken::jwk::EllipticCurve::P384 => vec![ES384],
                _ => return None,
            },
            (AlgorithmParameters::OctetKeyPair(_), None) => vec![EdDSA],
            _ => return None,
        };
        let symmetric =
            |a: &Algorithm| matches!(a, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512);
        if algorithms.iter().any(symmetric) {
            return None;
        }
        Some((DecodingKey::from_jwk(jwk).ok()?, algorithms))
    }

    /// Fetches the key set again (a URL, at most once a minute); on failure the last
    /// set stays.
    async fn refetch(&self) {
        if !matches!(self.options.jwks, Jwks::Url(_)) {
            return;
        }
        {
            let mut last = self
                .last_refetch
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if last.is_some_and(|at| at.elapsed() < REFETCH_PAUSE) {
                return;
            }
            *last = Some(Instant::now());
        }
        match fetch(&self.options.jwks, &self.http).await {
            Ok(keys) if !keys.keys.is_empty() => {
                *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(keys);
            }
            Ok(_) => orch_runtime::eprintln_printable!(
                "orch: warning: the JSON Web Key Set {} is empty now; keeping the last one",
                describe(&self.options.jwks)
            ),
            Err(why) => {
                orch_runtime::eprintln_printable!("orch: warning: {why}; keeping the last key set")
            }
        }
    }
}

fn describe(jwks: &Jwks) -> String {
    match jwks {
        Jwks::File(path) => format!("in {}", path.display()),
        Jwks::Url(url) => format!("at {url}"),
    }
}

/// Reads or fetches a key set.
async fn fetch(jwks: &Jwks, http: &reqwest::Client) -> Result<JwkSet, String> {
    let bytes = match jwks {
        Jwks::File(path) => tokio::fs::read(path)
            .await
            .map_err(|e| format!("cannot read the JSON Web Key Set {}: {e}", path.display()))?,
        Jwks::Url(url) => {
            let response = http
                .get(url)
                .send()
                .await
                .map_err(|e| format!("cannot fetch the JSON Web Key Set at {url}: {e}"))?;
            if !response.status().is_success() {
                return Err(format!(
                    "the JSON Web Key Set at {url} answered {}",
                    response.status()
                ));
            }
            response
                .bytes()
                .await
                .map_err(|e| format!("cannot fetch the JSON Web Key Set at {url}: {e}"))?
                .to_vec()
        }
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("the JSON Web Key Set {} is not one ({e})", describe(jwks)))
}

/// What to tell a client whose JWT failed a check.
fn refusal(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind;
    match e.kind() {
        ErrorKind::ExpiredSignature => "the JWT has expired".into(),
        ErrorKind::ImmatureSignature => "the JWT is not valid yet (nbf)".into(),
        ErrorKind::InvalidIssuer => "the JWT's issuer (iss) is not the one trusted here".into(),
        ErrorKind::InvalidAudience => "the JWT's audience (aud) does not name this service".into(),
        ErrorKind::InvalidSignature => "the JWT's signature does not verify".into(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the JWT has no `{claim}` claim"),
        ErrorKind::InvalidAlgorithm => "the JWT's algorithm does not match its key".into(),
        _ => format!("the JWT is not valid ({e})"),
    }
}

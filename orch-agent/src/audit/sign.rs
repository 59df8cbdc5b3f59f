//! Ed25519 keys for signed checkpoints (feature `sign`), in the standard key file
//! encodings: the private key as PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), the public
//! key as SPKI PEM (`-----BEGIN PUBLIC KEY-----`) — what `openssl genpkey -algorithm
//! ed25519` and `openssl pkey -pubout` write, and what `orch audit keygen` writes.

use super::{key_id, CheckpointKeys, CheckpointSigner};
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{Signer, Verifier};

/// Why a key could not be made, read or encoded.
#[derive(Debug)]
#[non_exhaustive]
pub enum KeyError {
    /// The operating system's random source failed (making a key).
    NoRandomness(String),
    /// A key file could not be read.
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The text is not a key of the kind expected.
    Malformed {
        /// The file it came from, if any.
        path: Option<std::path::PathBuf>,
        /// What was expected ("an Ed25519 private key in PKCS#8 PEM", ...).
        expected: &'static str,
        /// What the decoder said.
        reason: String,
    },
    /// The key could not be encoded.
    Encode(String),
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyError::NoRandomness(e) => write!(f, "no randomness for a key: {e}"),
            KeyError::Read { path, error } => {
                write!(f, "cannot read the key {}: {error}", path.display())
            }
            KeyError::Malformed {
                path,
                expected,
                reason,
            } => {
                if let Some(path) = path {
                    write!(f, "{}: ", path.display())?;
                }
                write!(f, "not {expected} ({reason})")
            }
            KeyError::Encode(e) => write!(f, "cannot encode the key: {e}"),
        }
    }
}

impl std::error::Error for KeyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KeyError::Read { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// The PEM document in the file at `path`.
fn read_pem(path: &std::path::Path) -> Result<String, KeyError> {
    std::fs::read_to_string(path).map_err(|error| KeyError::Read {
        path: path.to_owned(),
        error,
    })
}

/// `e` with the file it came from.
fn from_file(e: KeyError, path: &std::path::Path) -> KeyError {
    match e {
        KeyError::Malformed {
            path: None,
            expected,
            reason,
        } => KeyError::Malformed {
            path: Some(path.to_owned()),
            expected,
            reason,
        },
        other => other,
    }
}

const PRIVATE_PEM: &str = "an Ed25519 private key in PKCS#8 PEM";
const PUBLIC_PEM: &str = "an Ed25519 public key in SPKI PEM";

/// A private key that signs checkpoints.
pub struct SigningKey {
    key: ed25519_dalek::SigningKey,
    id: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// A new key from the operating system's random source.
    pub fn generate() -> Result<Self, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError::NoRandomness(e.to_string()))?;
        Ok(Self::from_key(ed25519_dalek::SigningKey::from_bytes(&seed)))
    }

    fn from_key(key: ed25519_dalek::SigningKey) -> Self {
        let id = key_id(key.verifying_key().as_bytes());
        SigningKey { key, id }
    }

    /// The key in a PKCS#8 PEM document.
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        ed25519_dalek::SigningKey::from_pkcs8_pem(pem)
            .map(Self::from_key)
            .map_err(|e| KeyError::Malformed {
                path: None,
                expected: PRIVATE_PEM,
                reason: e.to_string(),
            })
    }

    /// The key in the PKCS#8 PEM file at `path`.
    pub fn read(path: &std::path::Path) -> Result<Self, KeyError> {
        Self::from_pem(&read_pem(path)?).map_err(|e| from_file(e, path))
    }

    /// The key as a PKCS#8 PEM document (keep it secret).
    pub fn to_pem(&self) -> Result<String, KeyError> {
        self.key
            .to_pkcs8_pem(LineEnding::LF)
            .map(|pem| pem.to_string())
            .map_err(|e| KeyError::Encode(e.to_string()))
    }

    /// Its public half.
    pub fn public_key(&self) -> PublicKey {
        PublicKey {
            key: self.key.verifying_key(),
            id: self.id.clone(),
        }
    }
}

impl CheckpointSigner for SigningKey {
    fn key_id(&self) -> String {
        self.id.clone()
    }

    fn sign(&self, message: &[u8]) -> String {
        super::record::hex(&self.key.sign(message).to_bytes())
    }
}

/// A public key that checks checkpoints.
#[derive(Clone, Debug)]
pub struct PublicKey {
    key: ed25519_dalek::VerifyingKey,
    id: String,
}

impl PublicKey {
    /// The key in an SPKI PEM document.
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        let key = ed25519_dalek::VerifyingKey::from_public_key_pem(pem).map_err(|e| {
            KeyError::Malformed {
                path: None,
                expected: PUBLIC_PEM,
                reason: e.to_string(),
            }
        })?;
        Ok(PublicKey {
            id: key_id(key.as_bytes()),
            key,
        })
    }

    /// The key in the SPKI PEM file at `path`.
    pub fn read(path: &std::path::Path) -> Result<Self, KeyError> {
        Self::from_pem(&read_pem(path)?).map_err(|e| from_file(e, path))
    }

    /// The key as an SPKI PEM document.
    pub fn to_pem(&self) -> Result<String, KeyError> {
        self.key
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| KeyError::Encode(e.to_string()))
    }

    /// Its id, as checkpoints name it.
    pub fn id(&self) -> &str {
        &self.id
    }
}

/// The public keys a verifier accepts (several while keys are rotated).
#[derive(Clone, Debug, Default)]
pub struct PublicKeys(pub Vec<PublicKey>);

impl CheckpointKeys for PublicKeys {
    fn check(&self, key: &str, message: &[u8], sig: &str) -> Result<(), String> {
        let Some(public) = self.0.iter().find(|k| k.id == key) else {
            let known: Vec<&str> = self.0.iter().map(|k| k.id.as_str()).collect();
            return Err(format!(
                "it is signed by key {key}, which is not one given ({})",
                known.join(", ")
            ));
        };
        let bytes = unhex(sig).ok_or("its signature is not 128 hex digits")?;
        let signature = ed25519_dalek::Signature::from_bytes(&bytes);
        public.key.verify(message, &signature).map_err(|_| {
            format!("its signature is not key {key}'s over what it says (the chain was rebuilt without the key, or the checkpoint was moved or edited)")
        })
    }
}

/// 128 hex digits as 64 bytes.
fn unhex(text: &str) -> Option<[u8; 64]> {
    let bytes = text.as_bytes();
    if bytes.len() != 128 {
        return None;
    }
    let mut out = [0u8; 64];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let digit = |b: u8| (b as char).to_digit(16);
        out[i] = u8::try_from(digit(pair[0])? * 16 + digit(pair[1])?).ok()?;
    }
    Some(out)
}

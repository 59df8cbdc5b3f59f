//! Who is signed in to the console: a session per sign-in, named by a random id (the
//! cookie), with its own random CSRF token, for eight hours.

use crate::auth::Identity;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a console session lasts.
const LIFE: Duration = Duration::from_secs(8 * 60 * 60);

/// The most sessions kept at once (the oldest goes first).
const MOST: usize = 10_000;

/// A signed-in console session.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    /// Who signed in.
    pub(crate) identity: Identity,
    /// The token every form of this session carries.
    pub(crate) csrf: String,
    /// When it was opened.
    opened: Instant,
}

/// The console's sessions.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    open: Mutex<HashMap<String, Session>>,
}

impl Sessions {
    /// Opens a session for `identity`: its id and CSRF token (`None` when the system
    /// has no randomness to make them with).
    pub(crate) fn open(&self, identity: Identity) -> Option<(String, String)> {
        let (id, csrf) = (random()?, random()?);
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.retain(|_, s| s.opened.elapsed() < LIFE);
        if open.len() >= MOST {
            if let Some(oldest) = open
                .iter()
                .min_by_key(|(_, s)| s.opened)
                .map(|(k, _)| k.clone())
            {
                open.remove(&oldest);
            }
        }
        let session = Session {
            identity,
            csrf: csrf.clone(),
            opened: Instant::now(),
        };
        open.insert(id.clone(), session);
        Some((id, csrf))
    }

    /// The session `id`, if it is open.
    pub(crate) fn get(&self, id: &str) -> Option<Session> {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(id).filter(|s| s.opened.elapsed() < LIFE).cloned()
    }

    /// The session `id`, if it is open and `csrf` is its token (compared in constant
    /// time).
    pub(crate) fn check(&self, id: &str, csrf: &str) -> Option<Session> {
        self.get(id).filter(|s| {
            s.csrf.len() == csrf.len()
                && s.csrf
                    .bytes()
                    .zip(csrf.bytes())
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
        })
    }

    /// Closes the session `id`.
    pub(crate) fn close(&self, id: &str) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
    }
}

/// 32 random bytes in hex, if the system has randomness.
fn random() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

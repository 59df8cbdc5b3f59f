//! A run's record in the store and the sessions kept between a call's two phases and
//! between a run's calls: which run a check names, the rules for a call, restoring and
//! changing the record.

use super::admission::failed;
use super::prelude::*;
use super::state::{run_key, Engine, Kept, MAX_KEPT_SESSIONS, MAX_RUN_NAME};

impl<S: SessionStore + 'static> Engine<S> {
    pub(super) fn overloaded(&self) -> CheckError {
        CheckError::Overloaded {
            limit: self.options.max_in_flight,
        }
    }

    /// The store key of the run the gateway names in `metadata_context`.
    pub(super) fn run_of(
        &self,
        context: Option<&prost_types::Struct>,
    ) -> Result<String, CheckError> {
        let key = &self.options.run_key;
        let missing = || CheckError::NoRun { key: key.clone() };
        let value = context
            .and_then(|c| c.fields.get(key))
            .and_then(|v| v.kind.as_ref())
            .ok_or_else(missing)?;
        let name = match value {
            Kind::StringValue(s) => s.clone(),
            Kind::NumberValue(n) if n.fract() == 0.0 && n.abs() < 9.0e15 => format!("{n:.0}"),
            Kind::NullValue(_) => return Err(missing()),
            _ => return Err(CheckError::RunNotString { key: key.clone() }),
        };
        if name.is_empty() || name.len() > MAX_RUN_NAME {
            return Err(CheckError::RunNameLength {
                key: key.clone(),
                max: MAX_RUN_NAME,
            });
        }
        Ok(run_key(&name))
    }

    /// The rules for a call of `tool`: the template's tools and the one called are the
    /// host's (a tool the template does not declare is judged by the step's patterns),
    /// with a buffered auditor when the server keeps a decision log. A declared tool
    /// without a log borrows the rules made once.
    pub(super) fn policy_for(&self, run: &str, tool: &str) -> Cow<'_, Policy> {
        let declared = self.machine.tools().iter().any(|t| t == tool);
        let policy = match (declared, &self.options.audit) {
            (true, None) => return Cow::Borrowed(&self.declared),
            (true, Some(_)) => self.declared.clone(),
            (false, _) => {
                let mut host = self.machine.tools().to_vec();
                host.push(tool.to_owned());
                Policy::new(host).in_mode(self.options.mode)
            }
        };
        Cow::Owned(match &self.options.audit {
            Some(_) => policy.audited(Arc::new(Auditor::buffered(run))),
            None => policy,
        })
    }

    /// Keeps the session a call was admitted with for its response phase (calls whose
    /// response never came are dropped first when the map is full).
    pub(super) fn keep_admitted(
        &self,
        token: u64,
        snapshot: Option<Vec<u8>>,
        session: DetachedSession,
    ) {
        keep(&self.admitted, token, (snapshot, session));
    }

    /// Keeps the session `run`'s last recorded call left, at `snapshot`, for the run's
    /// next request phase (runs not called since are dropped first when the map is full).
    pub(super) fn keep_settled(
        &self,
        run: &str,
        snapshot: Option<Vec<u8>>,
        session: DetachedSession,
    ) {
        keep(&self.settled, run.to_owned(), (snapshot, session));
    }

    /// A kept session, attached, when the stored snapshot is still `snapshot`, the one it
    /// was kept at.
    pub(super) fn attached_at(
        &self,
        kept: Option<Kept>,
        snapshot: Option<&[u8]>,
    ) -> Option<DynSession<'_>> {
        kept.filter(|(at, _)| at.as_deref() == snapshot)
            .and_then(|(_, session)| session.attach(&self.machine))
    }

    /// The session of `run` at `snapshot` for a request phase: the one its last recorded
    /// call left when the stored snapshot is still that one, prepared for this call's
    /// rules as a restored one is (the host's tools, which differ for a tool the template
    /// does not declare, and their record in the decision log); or restored.
    pub(super) fn session_at(
        &self,
        run: &str,
        snapshot: Option<&[u8]>,
        policy: &Policy,
    ) -> Result<DynSession<'_>, RunError> {
        let kept = self
            .settled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run);
        match self.attached_at(kept, snapshot) {
            Some(mut session) => {
                policy.prepare(&mut session);
                Ok(session)
            }
            None => self.restore(snapshot, policy),
        }
    }

    /// The session kept for the call with lease `token`, if any.
    pub(super) fn take_admitted(&self, token: u64) -> Option<Kept> {
        self.admitted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&token)
    }

    pub(super) fn log_attempt(&self, policy: &Policy) {
        if let (Some(audit), Some(buffered)) = (&self.options.audit, policy.auditor()) {
            audit.relay(buffered.take_buffered());
        }
    }

    /// The session of a run's record ([`run::restore`]), counted.
    pub(super) fn restore(
        &self,
        snapshot: Option<&[u8]>,
        policy: &Policy,
    ) -> Result<DynSession<'_>, RunError> {
        self.restores.fetch_add(1, Ordering::Relaxed);
        run::restore(&self.machine, policy, snapshot)
    }

    /// Applies `f` to the record of `run` with compare-and-set, reading again after a
    /// conflict (`f` may run more than once; it sees `None` when nothing is stored).
    pub(super) async fn modify<R>(
        &self,
        run: &str,
        f: impl FnMut(Option<Record>) -> Result<Change<R>, RunError> + Send,
    ) -> Result<R, CheckError> {
        // The value this instance last saw is tried first (a store that caches, as the
        // Redis store does, saves a read per check when no other instance wrote since;
        // a stale one costs a conflict and a read).
        let known = self
            .store
            .cached(run)
            .and_then(|v| Record::decode(&v.bytes).ok().map(|r| (v.version, r)));
        let (value, _) = run::modify(&self.store, run, known, f)
            .await
            .map_err(|e| failed(run, e))?;
        Ok(value)
    }
}

/// Puts `kept` under `key` in one of the engine's maps of kept sessions, first dropping
/// another entry when the map holds [`MAX_KEPT_SESSIONS`] (a dropped session is restored
/// when it is needed).
fn keep<K: std::hash::Hash + Eq + Clone>(map: &Mutex<HashMap<K, Kept>>, key: K, kept: Kept) {
    let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
    if map.len() >= MAX_KEPT_SESSIONS && !map.contains_key(&key) {
        if let Some(old) = map.keys().next().cloned() {
            map.remove(&old);
        }
    }
    map.insert(key, kept);
}

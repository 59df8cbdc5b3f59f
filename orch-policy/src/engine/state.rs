//! The shared state of a policy server: the template, the store, the options, the
//! permits, and the sessions kept between a call's two phases.

use crate::Options;
use orch_agent::Policy;
use orch_runtime::dynamic::{DetachedSession, DynMachine};
use orch_store::SessionStore;
use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// The key of the call token in `McpRequestResult.metadata`, and the `metadata_context`
/// key the gateway's configuration feeds it back under (`orch_call:
/// 'mcpGuardrails.orch_call'`).
pub const TOKEN_FIELD: &str = "orch_call";

/// The store key of the workflow run named `name`.
pub(crate) fn run_key(name: &str) -> String {
    format!("run:{name}")
}

/// The longest run name accepted, in bytes.
pub(super) const MAX_RUN_NAME: usize = 512;

/// The longest pause between two looks at a run whose call is in flight.
pub(super) const MAX_WAIT_PAUSE: Duration = Duration::from_millis(20);

/// The shared state of a policy server.
pub(crate) struct Engine<S> {
    pub(super) machine: DynMachine,
    /// The rules for calls of the template's own tools, made once.
    pub(super) declared: Policy,
    pub(super) store: S,
    pub(crate) options: Options,
    pub(super) permits: Arc<Semaphore>,
    /// The sessions of calls this instance admitted, by lease token, with the snapshot
    /// they were admitted at: the response phase attaches one instead of restoring the
    /// run again while the stored snapshot is still that one (at most
    /// [`MAX_KEPT_SESSIONS`]; a call whose entry is gone is restored as usual).
    pub(super) admitted: Mutex<HashMap<u64, Kept>>,
    /// The session each run's last recorded call left, by run key, with its snapshot:
    /// the run's next request phase attaches it instead of restoring the run while the
    /// stored snapshot is still that one (at most [`MAX_KEPT_SESSIONS`]; a run whose
    /// entry is gone is restored as usual).
    pub(super) settled: Mutex<HashMap<String, Kept>>,
    /// How many times a run was restored from its snapshot (the cost a kept session
    /// saves; read by the tests).
    pub(super) restores: AtomicUsize,
}

/// A session kept for a call's response phase: the snapshot it was admitted at, and the
/// session.
pub(super) type Kept = (Option<Vec<u8>>, DetachedSession);

/// The most admitted sessions an instance keeps for their response phase.
pub(super) const MAX_KEPT_SESSIONS: usize = 4096;

impl<S: SessionStore + 'static> Engine<S> {
    pub(crate) fn new(machine: DynMachine, store: S, options: Options) -> Self {
        Engine {
            declared: Policy::new(machine.tools().to_vec()).in_mode(options.mode),
            machine,
            store,
            permits: Arc::new(Semaphore::new(options.max_in_flight.max(1))),
            options,
            admitted: Mutex::new(HashMap::new()),
            settled: Mutex::new(HashMap::new()),
            restores: AtomicUsize::new(0),
        }
    }
}

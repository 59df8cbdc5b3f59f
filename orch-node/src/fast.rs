//! The fast path of a session: plain functions over numbers, which `main.cjs` calls
//! behind the same `Session` methods (`allowed`, `check`, `record`, `onUserMessage`).
//!
//! A method of a napi-rs class pays for finding its receiver on every call (a reference
//! to `this` made and dropped, a borrow registered): measured here at ~200 ns, against
//! tens of nanoseconds for a function whose arguments are numbers. So each session is
//! also registered in a table of this thread, under a number (its *handle*), and the
//! functions below take that number. Tools are numbers too (their index among the
//! declared tools, resolved once per machine in JavaScript).
//!
//! Every event answers with the *state* it left: a small number naming the allowed set,
//! interned per machine, which JavaScript turns into the tools' names once and keeps.
//! So `allowed()` and the common `check` answer in JavaScript with no crossing, and a
//! turn costs one crossing per event. State `0` means "not interned" (a foreign tool is
//! allowed, or the machine has more distinct sets than the table keeps): the class
//! methods answer then, as before.

use napi::bindgen_prelude::{Error, Result, Status};
use napi_derive::napi;
use orch_agent::hosted::HostedSession;
use orch_runtime::dynamic::DynSession;
use orch_runtime::hash::HashMap;
use orch_runtime::OutcomeKind;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// How many distinct allowed sets a machine interns; past it, new sets are state `0`.
const MAX_SETS: usize = 4096;

/// The allowed sets a machine's sessions have been in, each with a number (from 1).
#[derive(Default)]
pub(crate) struct SetTable {
    ids: HashMap<Box<[u64]>, u32>,
    sets: Vec<Box<[u64]>>,
    /// The allowed set being computed.
    scratch: Vec<u64>,
}

impl SetTable {
    /// The state `session` is in: its allowed set's number, `0` when it is not interned.
    fn state_of(&mut self, session: &HostedSession) -> u32 {
        if session.allowed_bits(&mut self.scratch) {
            return 0;
        }
        if let Some(&id) = self.ids.get(self.scratch.as_slice()) {
            return id;
        }
        if self.sets.len() >= MAX_SETS {
            return 0;
        }
        let bits: Box<[u64]> = self.scratch.as_slice().into();
        self.sets.push(bits.clone());
        let id = small_id(self.sets.len());
        self.ids.insert(bits, id);
        id
    }
}

fn small_id(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(0)
}

/// A machine's set table, shared by its sessions (all on this thread).
pub(crate) type Sets = Rc<RefCell<SetTable>>;

/// A registered session.
struct Entry {
    session: Rc<RefCell<HostedSession>>,
    sets: Sets,
}

/// One place of the table: its entry, and how many times it was reused (a handle names
/// both, so a handle of a dropped session never reaches the next one).
struct Slot {
    generation: u32,
    entry: Option<Entry>,
}

/// The sessions of this thread that have a handle.
#[derive(Default)]
struct Registry {
    slots: Vec<Slot>,
    free: Vec<u32>,
}

/// Generations stay below 2^7, so a handle (generation · 2^32 + index, below 2^39) and a
/// tool (below 2^14: a machine has at most 16,384 tools) fit one exact JavaScript number
/// (handle · 2^14 + tool): `record` takes one argument, which saves a crossing's worth of
/// argument reading on WebAssembly.
const GENERATIONS: u32 = 1 << 7;
/// The tools a packed `record` argument can name.
const TOOLS: f64 = 16_384.0;
const INDEX: f64 = 4_294_967_296.0;

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
    /// Handles whose session was dropped while the registry was in use, freed later.
    static DROPPED: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
}

impl Registry {
    fn insert(&mut self, entry: Entry) -> f64 {
        self.release_dropped();
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    entry: None,
                });
                u32::try_from(self.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let Some(slot) = self.slots.get_mut(index as usize) else {
            return -1.0;
        };
        slot.entry = Some(entry);
        f64::from(slot.generation) * INDEX + f64::from(index)
    }

    fn remove(&mut self, handle: f64) {
        let Some(index) = self.index_of(handle) else {
            return;
        };
        if let Some(slot) = self.slots.get_mut(index) {
            slot.entry = None;
            slot.generation = (slot.generation + 1) % GENERATIONS;
            self.free.push(index as u32);
        }
    }

    fn release_dropped(&mut self) {
        let dropped = DROPPED.with(Cell::take);
        for handle in dropped {
            self.remove(handle);
        }
    }

    /// The slot a live handle names.
    fn index_of(&self, handle: f64) -> Option<usize> {
        if !(handle >= 0.0 && handle < f64::from(GENERATIONS) * INDEX) || handle.fract() != 0.0 {
            return None;
        }
        let generation = (handle / INDEX).floor();
        let index = handle - generation * INDEX;
        let slot = self.slots.get(index as usize)?;
        (f64::from(slot.generation) == generation && slot.entry.is_some()).then_some(index as usize)
    }

    fn get(&self, handle: f64) -> Option<&Entry> {
        let index = self.index_of(handle)?;
        self.slots.get(index)?.entry.as_ref()
    }
}

/// Registers a session under a new handle.
pub(crate) fn register(session: Rc<RefCell<HostedSession>>, sets: Sets) -> f64 {
    REGISTRY.with(|r| match r.try_borrow_mut() {
        Ok(mut registry) => registry.insert(Entry { session, sets }),
        // Only while another call of this table runs, which never creates a session.
        Err(_) => -1.0,
    })
}

/// Forgets a handle (its session's class object was collected).
pub(crate) fn unregister(handle: f64) {
    let _ = REGISTRY.try_with(|r| match r.try_borrow_mut() {
        Ok(mut registry) => registry.remove(handle),
        Err(_) => {
            let _ = DROPPED.try_with(|d| {
                let mut pending = d.take();
                pending.push(handle);
                d.set(pending);
            });
        }
    });
}

/// Runs `f` on the session `handle` names and its machine's set table.
fn with<T>(handle: f64, f: impl FnOnce(&mut HostedSession, &mut SetTable) -> T) -> Result<T> {
    REGISTRY.with(|r| {
        let registry = r
            .try_borrow()
            .map_err(|_| Error::new(Status::GenericFailure, "the session table is in use"))?;
        let entry = registry.get(handle).ok_or_else(|| {
            Error::new(
                Status::InvalidArg,
                format!("no live session has the handle {handle}"),
            )
        })?;
        let mut session = entry
            .session
            .try_borrow_mut()
            .map_err(|_| Error::new(Status::GenericFailure, "the session is in use"))?;
        let mut sets = entry
            .sets
            .try_borrow_mut()
            .map_err(|_| Error::new(Status::GenericFailure, "the machine's sets are in use"))?;
        Ok(f(&mut session, &mut sets))
    })
}

/// The number of an outcome's kind (`OUTCOMES` in `main.cjs` names them in this order).
fn outcome_code(kind: OutcomeKind) -> u32 {
    match kind {
        OutcomeKind::Advanced => 0,
        OutcomeKind::Completed => 1,
        OutcomeKind::Free => 2,
        OutcomeKind::OutOfSequence => 3,
        OutcomeKind::NotAllowed => 4,
    }
}

/// Records that the declared tool `tool` ran: the outcome's number plus 8 × the state
/// it left.
fn record(handle: f64, tool: u32) -> Result<u32> {
    with(handle, |session, sets| {
        let kind = session.record_index_kind(tool as usize).ok_or_else(|| {
            Error::new(
                Status::InvalidArg,
                format!("the machine has no tool {tool}"),
            )
        })?;
        let state = sets.state_of(session);
        Ok(outcome_code(kind) | state.saturating_mul(8))
    })?
}

/// A user message: the state it left.
fn message(handle: f64, text: &str) -> Result<u32> {
    with(handle, |session, sets| {
        session.on_user_message(text);
        sets.state_of(session)
    })
}

/// The declared tools (indices, in declaration order) of the allowed set numbered
/// `state` on the session's machine.
fn set(handle: f64, state: u32) -> Result<Vec<u32>> {
    with(handle, |_, sets| {
        let bits = state
            .checked_sub(1)
            .and_then(|i| sets.sets.get(i as usize))
            .ok_or_else(|| Error::new(Status::InvalidArg, format!("no allowed set {state}")))?;
        Ok(DynSession::bit_indices(bits).map(small_id).collect())
    })?
}

/// Where the session is, as one number: (the active step's index + 1, `0` for none) ×
/// 2^32 + the sequence index.
fn position(handle: f64) -> Result<f64> {
    with(handle, |session, _| {
        let s = session.session();
        let step = s.step_index().map_or(0.0, |i| i as f64 + 1.0);
        step * 4_294_967_296.0 + s.sequence_index() as f64
    })
}

/// The session's snapshot as base64 text (what the AgentDock drop-in stores).
fn snapshot64(handle: f64) -> Result<Base64> {
    use base64::Engine as _;
    with(handle, |session, _| {
        SNAPSHOT.with(|buffers| {
            let Ok(mut buffers) = buffers.try_borrow_mut() else {
                // Only a reentrant call finds the buffers in use: it gets its own.
                return Base64::Owned(
                    base64::engine::general_purpose::STANDARD.encode(session.snapshot()),
                );
            };
            let (bytes, text) = &mut *buffers;
            session.snapshot_into(bytes);
            // Encoded in place (no UTF-8 check of what is ASCII by construction).
            let engine = &base64::engine::general_purpose::STANDARD;
            text.resize(base64::encoded_len(bytes.len(), true).unwrap_or(0), 0);
            match engine.encode_slice(&*bytes, text) {
                Ok(written) => {
                    text.truncate(written);
                    Base64::Kept
                }
                Err(_) => Base64::Owned(engine.encode(&*bytes)),
            }
        })
    })
}

/// A snapshot as base64 text: in this thread's buffer ([`SNAPSHOT`]), or its own.
enum Base64 {
    /// In `SNAPSHOT`'s text buffer.
    Kept,
    /// Its own text.
    Owned(String),
}

thread_local! {
    /// The bytes and the base64 text of the last snapshot, reused from call to call.
    static SNAPSHOT: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// The functions above as N-API callbacks, written against the C API: napi-rs's own
/// `#[napi]` functions open a borrow scope per call (an allocation and thread-local
/// bookkeeping, over half of a call's ~135 ns here), which these do not need — they
/// take numbers and a string, and keep nothing of JavaScript's.
mod raw {
    use napi::sys;
    use std::cell::RefCell;
    use std::ffi::{c_char, CString};
    use std::ptr;

    thread_local! {
        /// A message's bytes, reused from call to call.
        static TEXT: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }

    /// Throws an `Error` with `message`; the callback's result is then ignored.
    ///
    /// # Safety
    /// `env` is the running callback's environment.
    unsafe fn throw(env: sys::napi_env, message: &str) -> sys::napi_value {
        let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: `env` is the callback's environment; both strings are NUL-terminated
        // and outlive the call.
        unsafe { sys::napi_throw_error(env, ptr::null(), text.as_ptr()) };
        ptr::null_mut()
    }

    /// The callback's first `N` arguments (`undefined` past the ones given).
    ///
    /// # Safety
    /// `env` and `info` are the running callback's.
    unsafe fn args<const N: usize>(
        env: sys::napi_env,
        info: sys::napi_callback_info,
    ) -> Option<[sys::napi_value; N]> {
        let mut argv = [ptr::null_mut(); N];
        let mut argc = N;
        // SAFETY: `argv` has room for `argc` values.
        let status = unsafe {
            sys::napi_get_cb_info(
                env,
                info,
                &mut argc,
                argv.as_mut_ptr(),
                ptr::null_mut(),
                ptr::null_mut(),
            )
        };
        (status == sys::Status::napi_ok).then_some(argv)
    }

    /// `value` as a number; `None` when it is not one.
    ///
    /// # Safety
    /// `env` is the running callback's environment and `value` one of its values.
    unsafe fn number(env: sys::napi_env, value: sys::napi_value) -> Option<f64> {
        let mut out = 0.0;
        // SAFETY: `value` is an argument of the running callback.
        let status = unsafe { sys::napi_get_value_double(env, value, &mut out) };
        (status == sys::Status::napi_ok).then_some(out)
    }

    /// The callback's first `N` arguments as numbers; `None` when one is not a number.
    ///
    /// # Safety
    /// `env` and `info` are the running callback's.
    unsafe fn numbers<const N: usize>(
        env: sys::napi_env,
        info: sys::napi_callback_info,
    ) -> Option<[f64; N]> {
        // SAFETY: the callback's own environment and info.
        let values = unsafe { args::<N>(env, info) }?;
        let mut out = [0.0; N];
        for (o, v) in out.iter_mut().zip(values) {
            // SAFETY: `v` is an argument of the running callback.
            *o = unsafe { number(env, v) }?;
        }
        Some(out)
    }

    /// What a fast function answers, as a JavaScript value (`Err`: why it could not be
    /// made).
    trait Answer {
        /// # Safety
        /// `env` is the running callback's environment.
        unsafe fn to_js(self, env: sys::napi_env) -> Result<sys::napi_value, &'static str>;
    }

    /// `status` was `napi_ok`: `out`, else `why`.
    fn made(
        status: sys::napi_status,
        out: sys::napi_value,
        why: &'static str,
    ) -> Result<sys::napi_value, &'static str> {
        if status == sys::Status::napi_ok {
            Ok(out)
        } else {
            Err(why)
        }
    }

    impl Answer for u32 {
        unsafe fn to_js(self, env: sys::napi_env) -> Result<sys::napi_value, &'static str> {
            let mut out = ptr::null_mut();
            // SAFETY: a number made in the callback's environment.
            let status = unsafe { sys::napi_create_uint32(env, self, &mut out) };
            made(status, out, "cannot make a number")
        }
    }

    impl Answer for f64 {
        unsafe fn to_js(self, env: sys::napi_env) -> Result<sys::napi_value, &'static str> {
            let mut out = ptr::null_mut();
            // SAFETY: a number made in the callback's environment.
            let status = unsafe { sys::napi_create_double(env, self, &mut out) };
            made(status, out, "cannot make a number")
        }
    }

    /// A JavaScript string of `text`, base64 (ASCII, so also Latin-1), copied. Natively
    /// as Latin-1, which V8 copies without decoding; on WebAssembly as UTF-8: emnapi
    /// decodes that with a `TextDecoder`, where its Latin-1 reads byte by byte.
    ///
    /// # Safety
    /// `env` is the running callback's environment.
    unsafe fn base64_text(
        env: sys::napi_env,
        text: &[u8],
    ) -> Result<sys::napi_value, &'static str> {
        let mut out = ptr::null_mut();
        let len = isize::try_from(text.len()).unwrap_or(isize::MAX);
        let bytes = text.as_ptr().cast::<c_char>();
        // SAFETY: the bytes outlive the call that copies them.
        let status = unsafe {
            if cfg!(target_arch = "wasm32") {
                sys::napi_create_string_utf8(env, bytes, len, &mut out)
            } else {
                sys::napi_create_string_latin1(env, bytes, len, &mut out)
            }
        };
        made(status, out, "cannot make the text")
    }

    impl Answer for super::Base64 {
        unsafe fn to_js(self, env: sys::napi_env) -> Result<sys::napi_value, &'static str> {
            match self {
                // SAFETY: the callback's environment.
                super::Base64::Owned(owned) => unsafe { base64_text(env, owned.as_bytes()) },
                super::Base64::Kept => super::SNAPSHOT.with(|buffers| match buffers.try_borrow() {
                    // SAFETY: the callback's environment.
                    Ok(buffers) => unsafe { base64_text(env, &buffers.1) },
                    Err(_) => Err("the snapshot buffer is in use"),
                }),
            }
        }
    }

    impl Answer for Vec<u32> {
        unsafe fn to_js(self, env: sys::napi_env) -> Result<sys::napi_value, &'static str> {
            let mut array = ptr::null_mut();
            // SAFETY: values made and filled in the callback's environment.
            unsafe {
                let status = sys::napi_create_array_with_length(env, self.len(), &mut array);
                made(status, array, "cannot make the array")?;
                for (i, n) in self.into_iter().enumerate() {
                    let index = u32::try_from(i).unwrap_or(u32::MAX);
                    let status = sys::napi_set_element(env, array, index, n.to_js(env)?);
                    made(status, array, "cannot fill the array")?;
                }
            }
            Ok(array)
        }
    }

    /// The callback's result: `answer` as a JavaScript value, or a thrown `Error`.
    ///
    /// # Safety
    /// `env` is the running callback's environment.
    unsafe fn reply<T: Answer>(env: sys::napi_env, answer: napi::Result<T>) -> sys::napi_value {
        // SAFETY: the running callback's environment.
        unsafe {
            match answer.map(|a| a.to_js(env)) {
                Ok(Ok(value)) => value,
                Ok(Err(why)) => throw(env, why),
                Err(e) => throw(env, &e.reason),
            }
        }
    }

    /// `f` with the text of string `value` (as UTF-8; a lone surrogate becomes U+FFFD).
    /// One copy when the text fits the buffer kept from earlier calls (at least 1 KiB);
    /// otherwise its length is asked first.
    ///
    /// # Safety
    /// `env` is the running callback's environment and `value` one of its values.
    unsafe fn with_text<T>(
        env: sys::napi_env,
        value: sys::napi_value,
        f: impl FnOnce(&str) -> T,
    ) -> Option<T> {
        TEXT.with(|buffer| {
            let mut buffer = buffer.try_borrow_mut().ok()?;
            if buffer.len() < 1024 {
                buffer.resize(1024, 0);
            }
            let copy = |buffer: &mut Vec<u8>| {
                let mut written = 0usize;
                // SAFETY: `buffer` has room for `buffer.len()` bytes, the NUL included.
                let status = unsafe {
                    sys::napi_get_value_string_utf8(
                        env,
                        value,
                        buffer.as_mut_ptr().cast::<c_char>(),
                        buffer.len(),
                        &mut written,
                    )
                };
                (status == sys::Status::napi_ok).then_some(written)
            };
            let mut written = copy(&mut buffer)?;
            // Complete unless it may have been cut (at the end, or before a character of
            // up to 4 bytes that did not fit).
            if written + 4 >= buffer.len() {
                let mut len = 0usize;
                // SAFETY: no buffer: N-API only writes the length.
                let status = unsafe {
                    sys::napi_get_value_string_utf8(env, value, ptr::null_mut(), 0, &mut len)
                };
                if status != sys::Status::napi_ok {
                    return None;
                }
                buffer.resize(len + 1, 0);
                written = copy(&mut buffer)?;
            }
            let bytes = buffer.get(..written)?;
            let answer = match std::str::from_utf8(bytes) {
                Ok(text) => f(text),
                Err(_) => f(&String::from_utf8_lossy(bytes)),
            };
            // A very long message's room is not kept.
            if buffer.len() > 1 << 20 {
                *buffer = vec![0; 1024];
            }
            Some(answer)
        })
    }

    /// `__orchRecord(handle · 16384 + tool)`.
    pub(super) unsafe extern "C" fn record(
        env: sys::napi_env,
        info: sys::napi_callback_info,
    ) -> sys::napi_value {
        // SAFETY: called by N-API with its environment and callback info.
        unsafe {
            let Some([packed]) = numbers::<1>(env, info) else {
                return throw(env, "__orchRecord(handle * 16384 + tool) takes a number");
            };
            if !(packed >= 0.0 && packed.fract() == 0.0 && packed < 9_007_199_254_740_992.0) {
                return throw(
                    env,
                    &format!("no live session has the handle {packed} / 16384"),
                );
            }
            let handle = (packed / super::TOOLS).floor();
            let tool = (packed - handle * super::TOOLS) as u32;
            reply(env, super::record(handle, tool))
        }
    }

    /// `__orchMessage(handle, text)`.
    pub(super) unsafe extern "C" fn message(
        env: sys::napi_env,
        info: sys::napi_callback_info,
    ) -> sys::napi_value {
        // SAFETY: called by N-API with its environment and callback info.
        unsafe {
            let Some([handle, text]) = args::<2>(env, info) else {
                return throw(env, "__orchMessage: cannot read the arguments");
            };
            let Some(handle) = number(env, handle) else {
                return throw(env, "__orchMessage(handle, text): the handle is a number");
            };
            match with_text(env, text, |text| super::message(handle, text)) {
                Some(answer) => reply(env, answer),
                None => throw(env, "__orchMessage(handle, text): the text is a string"),
            }
        }
    }

    /// `__orchState(handle)`.
    pub(super) unsafe extern "C" fn state(
        env: sys::napi_env,
        info: sys::napi_callback_info,
    ) -> sys::napi_value {
        // SAFETY: called by N-API with its environment and callback info.
        unsafe {
            let Some([handle]) = numbers::<1>(env, info) else {
                return throw(env, "__orchState(handle): the handle is a number");
            };
            reply(
                env,
                super::with(handle, |session, sets| sets.state_of(session)),
            )
        }
    }

    /// `__orchPosition(handle)`.
    pub(super) unsafe extern "C" fn position(
        env: sys::napi_env,
        info: sys::napi_callback_info,
    ) -> sys::napi_value {
        // SAFETY: called by N-API with its environment and callback info.
        unsafe {
            let Some([handle]) = numbers::<1>(env, info) else {
                return throw(env, "__orchPosition(handle): the handle is a number");
            };
            reply(env, super::position(handle))
        }
    }

    /// `__orchSnapshot64(handle)`.
    pub(super) unsafe extern "C" fn snapshot64(
        env: sys::napi_env,
        info: sys::napi_callback_info,
    ) -> sys::napi_value {
        // SAFETY: called by N-API with its environment and callback info.
        unsafe {
            let Some([handle]) = numbers::<1>(env, info) else {
                return throw(env, "__orchSnapshot64(handle): the handle is a number");
            };
            reply(env, super::snapshot64(handle))
        }
    }

    /// `__orchSet(handle, state)`: an array of tool indices.
    pub(super) unsafe extern "C" fn set(
        env: sys::napi_env,
        info: sys::napi_callback_info,
    ) -> sys::napi_value {
        // SAFETY: called by N-API with its environment and callback info.
        unsafe {
            let Some([handle, state]) = numbers::<2>(env, info) else {
                return throw(env, "__orchSet(handle, state) takes two numbers");
            };
            let state = if state >= 0.0 && state <= f64::from(u32::MAX) {
                state as u32
            } else {
                0
            };
            reply(env, super::set(handle, state))
        }
    }

    /// Puts each function on the module's exports.
    pub(super) fn install(env: sys::napi_env, exports: sys::napi_value) -> napi::Result<()> {
        type Callback =
            unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;
        let functions: [(&std::ffi::CStr, Callback); 6] = [
            (c"__orchRecord", record),
            (c"__orchPosition", position),
            (c"__orchSnapshot64", snapshot64),
            (c"__orchMessage", message),
            (c"__orchState", state),
            (c"__orchSet", set),
        ];
        for (name, callback) in functions {
            let mut function = ptr::null_mut();
            // SAFETY: `env` and `exports` are the module's, given to its registration;
            // `name` is NUL-terminated and static.
            let status = unsafe {
                let made = sys::napi_create_function(
                    env,
                    name.as_ptr(),
                    -1,
                    Some(callback),
                    ptr::null_mut(),
                    &mut function,
                );
                if made == sys::Status::napi_ok {
                    sys::napi_set_named_property(env, exports, name.as_ptr(), function)
                } else {
                    made
                }
            };
            if status != sys::Status::napi_ok {
                return Err(napi::Error::from_reason(format!(
                    "cannot export {}",
                    name.to_string_lossy()
                )));
            }
        }
        Ok(())
    }
}

/// Puts the fast path's functions (`__orchRecord`, `__orchMessage`, `__orchState`,
/// `__orchSet`, `__orchPosition`, `__orchSnapshot64`) on the module's exports, for
/// `main.cjs` and the AgentDock drop-in.
#[napi(module_exports)]
pub fn fast_path(exports: napi::bindgen_prelude::Object) -> Result<()> {
    use napi::bindgen_prelude::JsValue;
    let value = exports.value();
    raw::install(value.env, value.value)
}

// The package's entry: the engine (the loader napi-rs generates, `index.js`: the native
// addon, else the WebAssembly module) and the error classes a caller catches by type.
// Written by hand, kept in git.
'use strict'

// Written so that Node's detection of CommonJS exports sees the re-export (`import * as
// orch from '@orch/core'` then has every name).
module.exports = require('./index.js')
installFastPath(module.exports)

/**
 * The fast path behind `Session`'s methods (docs/typescript.md, "Performance"): a
 * method of the native class costs ~200 ns to find its receiver, a function of numbers
 * tens of nanoseconds. So `record` (of a declared tool, without a result) and
 * `onUserMessage` call functions that take the session's handle and the tool's index,
 * and answer with the state they left — the number of the allowed set, interned per
 * machine — from which `allowed()` answers without crossing, and `check` of an allowed
 * tool on a machine without approval gates too. Everything else, and every case the
 * fast path does not cover (foreign tools, gates, refusals, state 0), goes to the
 * class's own methods, which stay the reference: the tests compare the two.
 *
 * Both builds of the engine (native, WebAssembly) get it: `installFastPath` is also
 * what the tests and the benchmark call on an engine they load themselves.
 */
function installFastPath(engine) {
  const { Machine, Session } = engine
  if (!Machine || !Session || typeof engine.__orchRecord !== 'function') return engine
  if (Session.prototype.__orchFast) return engine
  const fastRecord = engine.__orchRecord
  const fastMessage = engine.__orchMessage
  const fastState = engine.__orchState
  const fastSet = engine.__orchSet
  const OUTCOMES = ['advanced', 'completed', 'free', 'out_of_sequence', 'not_allowed']

  /** What a machine's sessions share: tool indices by name, allowed sets by number. */
  const caches = new WeakMap()
  function cacheOf(machine) {
    let cache = caches.get(machine)
    if (cache === undefined) {
      const tools = machine.tools
      cache = {
        tools,
        ids: new Map(tools.map((name, i) => [name, i])),
        gates: machine.hasGates,
        names: [],
        members: [],
      }
      caches.set(machine, cache)
    }
    return cache
  }

  const M = Machine.prototype
  const S = Session.prototype
  const native = {
    session: M.session,
    restore: M.restore,
    allowed: S.allowed,
    check: S.check,
    record: S.record,
    onUserMessage: S.onUserMessage,
  }

  function attach(session, machine) {
    const handle = session.__handle
    // A session without a handle (none could be given) keeps the class's methods.
    session.__orchCache = handle >= 0 ? cacheOf(machine) : undefined
    session.__orchHandle = handle
    session.__orchState = -1
    return session
  }

  /** The session's state, asked of the engine when an event the fast path did not see
   * may have changed it. */
  function stateOf(session) {
    let state = session.__orchState
    if (state < 0) state = session.__orchState = fastState(session.__orchHandle)
    return state
  }

  /** The names of allowed set `state` (and which tools it holds), asked once. */
  function namesOf(session, cache, state) {
    let names = cache.names[state]
    if (names === undefined) {
      const indices = fastSet(session.__orchHandle, state)
      names = indices.map((i) => cache.tools[i])
      const member = new Uint8Array(cache.tools.length)
      for (const i of indices) member[i] = 1
      cache.names[state] = names
      cache.members[state] = member
    }
    return names
  }

  M.session = function session(available) {
    return attach(native.session.call(this, available), this)
  }
  M.restore = function restore(snapshot, available) {
    return attach(native.restore.call(this, snapshot, available), this)
  }
  S.allowed = function allowed() {
    const cache = this.__orchCache
    if (cache !== undefined) {
      const state = stateOf(this)
      if (state > 0) return namesOf(this, cache, state).slice()
    }
    return native.allowed.call(this)
  }
  // The allowed set as the array the machine's cache keeps (shared by every session in
  // that set: callers must not change it), or `undefined` when the fast path cannot
  // answer. For the AgentDock drop-in, which filters the host's tools once per set.
  Object.defineProperty(S, '__orchAllowedShared', {
    value: function allowedShared() {
      const cache = this.__orchCache
      if (cache === undefined) return undefined
      const state = stateOf(this)
      return state > 0 ? namesOf(this, cache, state) : undefined
    },
    configurable: true,
    writable: true,
  })
  S.check = function check(tool) {
    const cache = this.__orchCache
    if (cache !== undefined && !cache.gates && arguments.length === 1) {
      const i = cache.ids.get(tool)
      // A foreign or unknown name goes to the class's method without asking the state.
      const state = i === undefined ? 0 : stateOf(this)
      if (state > 0) {
        if (cache.members[state] === undefined) namesOf(this, cache, state)
        if (cache.members[state][i] === 1) return null
      }
    }
    return native.check.apply(this, arguments)
  }
  S.record = function record(tool, result) {
    const cache = this.__orchCache
    if (cache !== undefined && result === undefined && arguments.length <= 2) {
      const i = cache.ids.get(tool)
      // Handle and tool in one number (a machine has at most 16,384 tools).
      if (i !== undefined && i < 16384) {
        const answer = fastRecord(this.__orchHandle * 16384 + i)
        this.__orchState = answer >>> 3
        return OUTCOMES[answer & 7]
      }
    }
    this.__orchState = -1
    return native.record.apply(this, arguments)
  }
  S.onUserMessage = function onUserMessage(text) {
    if (this.__orchCache !== undefined && typeof text === 'string') {
      this.__orchState = fastMessage(this.__orchHandle, text)
      return
    }
    this.__orchState = -1
    return native.onUserMessage.apply(this, arguments)
  }
  // Every other method that changes the session: the state is asked again after it.
  for (const name of ['admit', 'ask', 'answer', 'approve', 'reject', 'setAvailable', 'reset', 'begin', 'answerCall', 'finish']) {
    const method = S[name]
    S[name] = {
      [name](...args) {
        this.__orchState = -1
        return method.apply(this, args)
      },
    }[name]
  }
  Object.defineProperty(S, '__orchFast', { value: { native, installFastPath } })
  return engine
}

/** An error orch throws whose `name` is `name`, as a class: `instanceof` is true for
 * every error of that name (those the engine throws, and those made with `new`). */
function errorClass(name) {
  const cls = class extends Error {
    constructor(message, options) {
      super(message, options)
      this.name = name
      this.code = name
    }

    static [Symbol.hasInstance](value) {
      return value instanceof Error && value.name === name
    }
  }
  Object.defineProperty(cls, 'name', { value: name })
  return cls
}

module.exports.installFastPath = installFastPath

/** A template with errors (`compile`): `diagnostics` holds every finding. */
module.exports.TemplateError = errorClass('TemplateError')
/** Snapshot bytes that cannot be restored (`Machine.restore`, the AgentDock drop-in). */
module.exports.SnapshotError = errorClass('SnapshotError')

/**
 * A drop-in for AgentDock's orchestration manager, backed by orch: the same class shape
 * (`getAllowedTools`, `processToolUsage`, `getActiveStep`, `getState`, …), the same
 * arguments (the template's `orchestration` object, the conversation's messages, the
 * session id, the host's tool ids) and state kept in the same storage interface
 * (AgentDock's `StorageProvider`: `get`, `set`, `delete`).
 *
 * ```ts
 * // before: import { createOrchestrationManager } from 'agentdock-core'
 * import { createOrchestrationManager } from '@orch/core/agentdock'
 * const manager = createOrchestrationManager({ storageProvider })
 * const tools = await manager.getAllowedTools(template.orchestration, messages, sessionId, toolIds)
 * const refusal = await manager.checkToolUsage(template.orchestration, messages, sessionId, name)
 * if (!refusal) { await runTool(); await manager.processToolUsage(template.orchestration, messages, sessionId, name) }
 * ```
 *
 * What changes for its users (docs/typescript.md has the list): the template is
 * compiled and checked once (a broken one throws `TemplateError` with every diagnostic
 * instead of misbehaving at run time); message conditions (`message_contains`,
 * `message_regex`), sequence groups, `resetSequenceOn` and approval gates work; a call
 * can be judged before it runs (`checkToolUsage`, in the words orch gives a model);
 * calls on one session are serialised, so concurrent tool results do not lose
 * updates within a process; and the stored state is orch's snapshot (with AgentDock's
 * fields beside it for readers).
 *
 * @module
 */
import { createRequire } from 'node:module'
import type { Machine, Refusal, Session } from '../index.js'

const require = createRequire(import.meta.url)

/** AgentDock's storage interface (the part the manager uses). */
export interface StorageProvider {
  get<T>(key: string, options?: StorageOptions): Promise<T | null>
  set<T>(key: string, value: T, options?: StorageOptions): Promise<void>
  delete(key: string, options?: StorageOptions): Promise<boolean>
}

/** AgentDock's storage options (the part the manager uses). */
export interface StorageOptions {
  /** Time to live, in seconds. */
  ttlSeconds?: number
  /** A namespace instead of the provider's. */
  namespace?: string
}

/** A storage provider in memory, like AgentDock's default (values kept as given). */
export class MemoryStorageProvider implements StorageProvider {
  private readonly items = new Map<string, { value: unknown; expiresAt?: number }>()

  async get<T>(key: string): Promise<T | null> {
    const item = this.items.get(key)
    if (item === undefined) return null
    if (item.expiresAt !== undefined && item.expiresAt <= Date.now()) {
      this.items.delete(key)
      return null
    }
    return item.value as T
  }

  async set<T>(key: string, value: T, options: StorageOptions = {}): Promise<void> {
    const ttl = options.ttlSeconds
    this.items.set(key, { value, expiresAt: ttl !== undefined && ttl > 0 ? Date.now() + ttl * 1000 : undefined })
  }

  async delete(key: string): Promise<boolean> {
    return this.items.delete(key)
  }
}

/** AgentDock's condition of a step. */
export interface OrchestrationCondition {
  type: string
  value?: string
  description?: string
}

/** AgentDock's step. */
export interface OrchestrationStep {
  name: string
  description?: string
  conditions?: OrchestrationCondition[]
  availableTools?: { allowed?: string[]; denied?: string[]; [key: string]: unknown }
  isDefault?: boolean
  sequence?: Array<string | string[]>
  [key: string]: unknown
}

/** AgentDock's orchestration (a template's `orchestration`). */
export interface OrchestrationConfig {
  steps: OrchestrationStep[]
  description?: string | string[]
  [key: string]: unknown
}

/** A conversation message, as AgentDock passes them (only user messages are read). */
export interface LLMMessage {
  role: string
  content: unknown
}

/** The AI-facing state AgentDock's `getState` returns. */
export interface AIOrchestrationState {
  sessionId: string
  recentlyUsedTools: string[]
  activeStep?: string
  sequenceIndex?: number
  cumulativeTokenUsage?: { promptTokens: number; completionTokens: number; totalTokens: number }
}

/** What the manager stores per session: AgentDock's fields, and orch's snapshot. */
export interface OrchestrationState extends AIOrchestrationState {
  lastAccessed: number
  ttl: number
  orch: {
    /** The session's snapshot (the Rust crates' format), base64. */
    snapshot: string
    /** The fingerprint of the template it was taken under. */
    fingerprint: string
    /** How many user messages of the conversation were seen, and the last one. */
    userMessages: number
    lastUserMessage?: string
    /** The host's tools last given (`getAllowedTools`' `allToolIds`), which a session
     * restored from the snapshot has; absent when none were given (every tool). */
    available?: readonly string[]
  }
}

/** The engine the manager compiles with (the package's own by default; the tests and
 * the benchmark pass the WebAssembly build). */
export interface Engine {
  compile(template: string): Machine
}

/** Options of the manager (AgentDock's, plus `engine`). */
export interface OrchestrationManagerOptions {
  storageProvider?: StorageProvider
  /** Keys are `<namespace>:<sessionId>` (default `orchestration-state`, as AgentDock's). */
  storageNamespace?: string
  cleanup?: { ttlMs?: number }
  engine?: Engine
}

const DEFAULT_TTL_MS = 24 * 60 * 60 * 1000

/** How many sessions a manager keeps live in memory beside the storage (restoring one
 * from its snapshot is the cost it saves; the storage stays the truth). */
export const LIVE_SESSIONS = 10_000

/** How many recently used tools the state lists (AgentDock keeps ten). */
const RECENT_TOOLS = 10

/** A session kept live: valid while the storage holds `snapshot`. */
interface Live {
  readonly machine: Machine
  readonly session: Session
  /** The session's storage key. */
  readonly key: string
  /** The snapshot the storage holds (`undefined` until one is stored). */
  snapshot: string | undefined
  /** The host's tools last set on it (a copy). */
  available: readonly string[] | undefined
  /** The state last read or written (`null`: none stored). */
  state: OrchestrationState | null
  /** Whether `state` has the host's own fields beside the manager's. */
  extras: boolean
  /** Whether the session has every tool the template declares and no other (what a
   * session has when no list is given). */
  availableAll: boolean
  /** The allowed set `allowedTo` was filtered from (the engine's shared array). */
  allowedFrom: readonly string[] | undefined
  /** The host's tools in that set, in the host's order. */
  allowedTo: readonly string[]
}

function newLive(machine: Machine, session: Session, key: string, extras: boolean): Live {
  return {
    machine,
    session,
    key,
    snapshot: undefined,
    available: undefined,
    availableAll: true,
    state: null,
    extras,
    allowedFrom: undefined,
    allowedTo: [],
  }
}

/** The work of `processToolUsage`: records `tool`. */
function recordIn(tool: string): (session: Session) => undefined {
  return (session) => {
    session.record(tool)
    return undefined
  }
}

/** What the package's fast path (`main.cjs`) adds to a session. */
interface FastSession {
  /** The allowed set as an array the engine keeps and shares (not to be changed);
   * `undefined` when the fast path cannot say. */
  __orchAllowedShared?: () => readonly string[] | undefined
}

/** What the package's fast path (`main.cjs`) adds to an engine and its sessions. */
interface Fast {
  __orchSnapshot64?: (handle: number) => string
  __orchPosition?: (handle: number) => number
}

/** The calls waiting on a session that has one running and none waiting (shared,
 * never changed: the first waiter gets an array of its own). */
const NONE_WAITING: Array<() => void> = []

/** The same names in the same order. */
function sameList(a: readonly string[] | undefined, b: readonly string[]): boolean {
  if (a === undefined || a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

function base64(bytes: Uint8Array): string {
  if (typeof Buffer !== 'undefined') return Buffer.from(bytes).toString('base64')
  let text = ''
  for (const b of bytes) text += String.fromCharCode(b)
  return btoa(text)
}

function unbase64(text: string): Uint8Array {
  if (typeof Buffer !== 'undefined') return new Uint8Array(Buffer.from(text, 'base64'))
  return Uint8Array.from(atob(text), (c) => c.charCodeAt(0))
}

/** The fields of the state the manager writes itself. */
const OWN_FIELDS = new Set(['sessionId', 'activeStep', 'sequenceIndex', 'recentlyUsedTools', 'lastAccessed', 'ttl', 'orch'])

/** Whether a stored state has fields besides the manager's own (the host's, such as
 * `cumulativeTokenUsage`, which a write keeps). */
function hasExtras(state: object): boolean {
  for (const key in state) if (!OWN_FIELDS.has(key)) return true
  return false
}

/** The text of a message (AgentDock messages carry a string or parts with `text`). */
function textOf(message: LLMMessage): string {
  if (typeof message.content === 'string') return message.content
  if (Array.isArray(message.content)) {
    return message.content
      .map((p: unknown) => (p && typeof p === 'object' && 'text' in p && typeof p.text === 'string' ? p.text : ''))
      .join('')
  }
  return ''
}

/** AgentDock's `OrchestrationManager`, backed by orch. */
export class OrchestrationManager {
  private readonly storage: StorageProvider
  private readonly namespace: string
  private readonly ttlMs: number
  /** The options of every write (the time to live). */
  private readonly setOptions: StorageOptions
  private readonly engine: Engine
  private readonly machines = new WeakMap<object, Machine>()
  private readonly byText = new Map<string, Machine>()
  /** Per session with a call running: the calls waiting for it, in order. */
  private readonly waiting = new Map<string, Array<() => void>>()
  /** The orchestration asked for last and its machine (most hosts have one). */
  private lastOrchestration: object | undefined = undefined
  private lastMachine: Machine | undefined = undefined
  private readonly live = new Map<string, Live>()
  private readonly fingerprints = new WeakMap<Machine, string>()
  private readonly stepNames = new WeakMap<Machine, string[]>()
  private readonly declared = new WeakMap<Machine, Set<string>>()

  constructor(options: OrchestrationManagerOptions = {}) {
    this.storage = options.storageProvider ?? new MemoryStorageProvider()
    this.namespace = options.storageNamespace ?? 'orchestration-state'
    this.ttlMs = options.cleanup?.ttlMs ?? DEFAULT_TTL_MS
    this.setOptions = { ttlSeconds: Math.ceil(this.ttlMs / 1000) }
    // The engine with the package's fast path (`main.cjs`), also one given here.
    const { installFastPath } = require('../main.cjs') as { installFastPath: <T>(engine: T) => T }
    this.engine = installFastPath(options.engine ?? (require('../index.js') as Engine))
  }

  /** The machine of `orchestration`, compiled once (throws `TemplateError`). */
  machine(orchestration: OrchestrationConfig): Machine {
    if (orchestration === this.lastOrchestration && this.lastMachine !== undefined) return this.lastMachine
    let machine = this.machines.get(orchestration)
    if (machine === undefined) {
      const text = JSON.stringify({ name: 'agentdock', orchestration })
      machine = this.byText.get(text)
      if (machine === undefined) {
        machine = this.engine.compile(text)
        this.byText.set(text, machine)
      }
      this.machines.set(orchestration, machine)
    }
    this.lastOrchestration = orchestration
    this.lastMachine = machine
    return machine
  }

  /** Whether `tools` are exactly the tools `machine` declares, in any order. */
  private everyTool(machine: Machine, tools: readonly string[]): boolean {
    let declared = this.declared.get(machine)
    if (declared === undefined) this.declared.set(machine, (declared = new Set(machine.tools)))
    if (tools.length !== declared.size) return false
    const given = new Set(tools)
    if (given.size !== declared.size) return false
    for (const t of given) if (!declared.has(t)) return false
    return true
  }

  /** The machine's fingerprint, asked once. */
  private fingerprint(machine: Machine): string {
    let known = this.fingerprints.get(machine)
    if (known === undefined) this.fingerprints.set(machine, (known = machine.fingerprint))
    return known
  }

  private key(sessionId: string): string {
    return `${this.namespace}:${sessionId}`
  }

  /** Waits until no earlier call on `sessionId` in this process is running, and marks
   * one as running (`release` ends it): calls on a session run one at a time, in the
   * order they were made. */
  private acquire(sessionId: string): Promise<void> | undefined {
    const waiting = this.waiting.get(sessionId)
    if (waiting === undefined) {
      this.waiting.set(sessionId, NONE_WAITING)
      return undefined
    }
    return new Promise<void>((go) => {
      if (waiting === NONE_WAITING) this.waiting.set(sessionId, [go])
      else waiting.push(go)
    })
  }

  /** Ends the running call on `sessionId`: the next one waiting starts. */
  private release(sessionId: string): void {
    const waiting = this.waiting.get(sessionId)
    if (waiting === undefined || waiting.length === 0) {
      this.waiting.delete(sessionId)
      return
    }
    const next = waiting.shift() as () => void
    next()
  }

  /** Runs `work` after every earlier call on `sessionId` in this process. */
  private async serially<T>(sessionId: string, work: () => Promise<T>): Promise<T> {
    const turn = this.acquire(sessionId)
    if (turn !== undefined) await turn
    try {
      return await work()
    } finally {
      this.release(sessionId)
    }
  }

  /** Loads the session (fresh when none is stored; a stored one that does not restore
   * — corrupt, or from a template whose steps are gone — is a `SnapshotError`), feeds it the user messages it has not seen,
   * lets `work` act, and stores it back when something changed (`used`: the tool that
   * ran, for AgentDock's `recentlyUsedTools`). */
  private async withSession<T>(
    orchestration: OrchestrationConfig,
    messages: readonly LLMMessage[],
    sessionId: string,
    available: readonly string[] | undefined,
    used: string | undefined,
    work: (session: Session, live: Live) => T,
  ): Promise<T> {
    const turn = this.acquire(sessionId)
    if (turn !== undefined) await turn
    try {
      const machine = this.machine(orchestration)
      // The session this process last stored, when the storage still holds exactly that
      // snapshot (taken out while in use: a failed call leaves nothing half-changed).
      const cached = this.live.get(sessionId)
      const key = cached === undefined ? this.key(sessionId) : cached.key
      const stored = await this.storage.get<OrchestrationState>(key)
      if (cached !== undefined) this.live.delete(sessionId)
      let live: Live
      let seen = 0
      let last: string | undefined
      const orch = stored?.orch
      if (orch && cached && cached.machine === machine && cached.snapshot === orch.snapshot) {
        live = cached
        seen = orch.userMessages
        last = orch.lastUserMessage
        // Whether the state has fields besides the manager's own (the host's, kept on
        // write): known when it is the very object last written or read.
        if (stored !== cached.state) live.extras = hasExtras(stored as OrchestrationState)
      } else if (orch) {
        let session: Session
        const hosted = orch.available
        try {
          if (hosted !== undefined && !(Array.isArray(hosted) && hosted.every((t) => typeof t === 'string'))) {
            throw new Error('its `orch.available` is not a list of tool names')
          }
          session = machine.restore(unbase64(orch.snapshot), hosted === undefined ? undefined : [...hosted])
        } catch (e) {
          // Never a silent fresh start: the host decides (resetState starts afresh).
          const error = new Error(
            `the stored state of session \`${sessionId}\` cannot be restored (${e instanceof Error ? e.message : String(e)}); resetState('${sessionId}') starts it afresh`,
          )
          error.name = 'SnapshotError'
          throw error
        }
        live = newLive(machine, session, key, hasExtras(stored as OrchestrationState))
        live.available = hosted === undefined ? undefined : [...hosted]
        live.availableAll = hosted === undefined || this.everyTool(machine, hosted)
        seen = orch.userMessages
        last = orch.lastUserMessage
      } else {
        live = newLive(machine, machine.session(), key, stored !== null && hasExtras(stored))
      }
      live.state = stored
      const session = live.session
      let changed = false
      if (available !== undefined && !sameList(live.available, available)) {
        live.allowedFrom = undefined
        const all = this.everyTool(machine, available)
        if (!(all && live.availableAll)) {
          // The host's tools are part of the session: stored like any other change
          // (`orch.available`), so that a session restored elsewhere has them too.
          session.setAvailable([...available])
          changed = true
        }
        live.available = [...available]
        live.availableAll = all
      }
      // The user messages not seen yet are fed to the session; when there are no new
      // ones, a last one whose text changed counts as new (a conversation edited or
      // replaced by the host).
      // Only the new messages and the last one are read (`textOf` joins a message's parts).
      let users = 0
      let lastIndex = -1
      let lastUser = last
      let fed = false
      for (let i = 0; i < messages.length; i++) {
        if ((messages[i] as LLMMessage).role !== 'user') continue
        users += 1
        lastIndex = i
        if (users > seen) {
          lastUser = textOf(messages[i] as LLMMessage)
          session.onUserMessage(lastUser)
          fed = true
        }
      }
      if (!fed && lastIndex >= 0) {
        lastUser = textOf(messages[lastIndex] as LLMMessage)
        if (lastUser !== last) {
          session.onUserMessage(lastUser)
          fed = true
        }
      }
      changed ||= fed
      const result = work(session, live)
      if (used !== undefined || changed || stored === null) {
        const state = this.stateOf(sessionId, live, users, lastUser, stored, used)
        await this.storage.set(key, state, this.setOptions)
        live.state = state
        live.snapshot = state.orch.snapshot
      } else if (orch !== undefined) {
        live.snapshot = orch.snapshot
      }
      if (live.snapshot !== undefined) this.keep(sessionId, live)
      return result
    } finally {
      this.release(sessionId)
    }
  }

  /** The state to store: AgentDock's fields, orch's snapshot, and the host's own fields
   * of `before` (kept as they were). */
  private stateOf(
    sessionId: string,
    live: Live,
    userMessages: number,
    lastUserMessage: string | undefined,
    before: OrchestrationState | null,
    used: string | undefined,
  ): OrchestrationState {
    const { session, machine } = live
    const where = this.position(session, machine)
    const earlier = before?.recentlyUsedTools ?? []
    let recent = earlier
    if (used !== undefined) {
      // The tool just used first, then the others in their order (AgentDock keeps ten).
      recent = [used]
      for (let i = 0; i < earlier.length && recent.length < RECENT_TOOLS; i++) {
        if (earlier[i] !== used) recent.push(earlier[i] as string)
      }
    }
    const state: OrchestrationState = {
      sessionId,
      activeStep: where.step,
      sequenceIndex: where.index,
      recentlyUsedTools: recent,
      lastAccessed: Date.now(),
      ttl: this.ttlMs,
      orch: {
        snapshot: this.snapshot(session),
        fingerprint: this.fingerprint(machine),
        userMessages,
        lastUserMessage,
        available: live.availableAll ? undefined : live.available,
      },
    }
    return live.extras ? { ...before, ...state } : state
  }

  /** The active step and the sequence index (one crossing on the fast path). */
  private position(session: Session, machine: Machine): { step: string | undefined; index: number } {
    const handle = (session as unknown as { __orchHandle?: number }).__orchHandle
    const position = (this.engine as Fast).__orchPosition
    if (handle === undefined || handle < 0 || position === undefined) {
      return { step: session.step ?? undefined, index: session.sequenceIndex }
    }
    const at = position(handle)
    const step = Math.floor(at / 4294967296)
    let names = this.stepNames.get(machine)
    if (names === undefined) this.stepNames.set(machine, (names = machine.steps))
    return { step: step === 0 ? undefined : names[step - 1], index: at - step * 4294967296 }
  }

  /** The session's snapshot as base64 (made by the engine on the fast path). */
  private snapshot(session: Session): string {
    const handle = (session as unknown as { __orchHandle?: number }).__orchHandle
    const snapshot64 = (this.engine as Fast).__orchSnapshot64
    if (handle === undefined || handle < 0 || snapshot64 === undefined) return base64(session.snapshot())
    return snapshot64(handle)
  }

  /** Keeps a session this process stored, the least recently used dropped past
   * `LIVE_SESSIONS`. */
  private keep(sessionId: string, entry: Live): void {
    this.live.set(sessionId, entry)
    if (this.live.size > LIVE_SESSIONS) {
      const oldest = this.live.keys().next()
      if (!oldest.done) this.live.delete(oldest.value)
    }
  }

  /** The session's state, created (AgentDock's fields, no workflow state yet: the
   * first call with the orchestration starts it) when there is none; `null` when the
   * storage fails. */
  async ensureStateExists(sessionId: string): Promise<OrchestrationState | AIOrchestrationState | null> {
    try {
      return await this.serially(sessionId, async () => {
        const stored = await this.storage.get<OrchestrationState>(this.key(sessionId))
        if (stored !== null) return stored
        const fresh = { sessionId, recentlyUsedTools: [], sequenceIndex: 0, lastAccessed: Date.now(), ttl: this.ttlMs }
        await this.storage.set(this.key(sessionId), fresh, this.setOptions)
        return fresh
      })
    } catch {
      return null
    }
  }

  /** The active step of the session, as the template's step object. */
  async getActiveStep(
    orchestration: OrchestrationConfig,
    messages: LLMMessage[],
    sessionId: string,
  ): Promise<OrchestrationStep | undefined> {
    const name = await this.withSession(orchestration, messages, sessionId, undefined, undefined, (s) => s.step)
    return orchestration.steps.find((s) => s.name === name)
  }

  /** The tools of `allToolIds` the session allows now (tool ids the template does not
   * name are judged by the step's patterns). */
  getAllowedTools(
    orchestration: OrchestrationConfig,
    messages: LLMMessage[],
    sessionId: string,
    allToolIds: string[],
  ): Promise<string[]> {
    if (!orchestration?.steps?.length) return Promise.resolve(allToolIds)
    return this.withSession(orchestration, messages, sessionId, allToolIds, undefined, (s, live) => {
      // The engine's array of the allowed set, shared (the same array while the set is
      // the same): the host's tools in it are filtered once per set.
      const shared = (s as unknown as FastSession).__orchAllowedShared?.()
      if (shared !== undefined && shared === live.allowedFrom) return live.allowedTo.slice()
      const allowed = shared ?? s.allowed()
      // In the host's order, as AgentDock filters `allToolIds`.
      let result: string[]
      if (allowed.length > 16) {
        const set = new Set(allowed)
        result = allToolIds.filter((t) => set.has(t))
      } else {
        result = allToolIds.filter((t) => allowed.includes(t))
      }
      // Kept only when the host's list is the one the session holds (`available`).
      if (shared !== undefined && live.available !== undefined) {
        live.allowedFrom = shared
        live.allowedTo = result.slice()
      }
      return result
    })
  }

  /** Not in AgentDock: `null` when `toolName` may run now, else why not (in the words
   * orch gives a model). Call it before running a tool. */
  checkToolUsage(
    orchestration: OrchestrationConfig,
    messages: LLMMessage[],
    sessionId: string,
    toolName: string,
    allToolIds?: string[],
  ): Promise<Refusal | null> {
    return this.withSession(orchestration, messages, sessionId, allToolIds, undefined, (s) => s.check(toolName))
  }

  /** Records that `toolName` ran: the sequence advances, conditions on tools are
   * evaluated, the state is stored. */
  processToolUsage(
    orchestration: OrchestrationConfig,
    messages: LLMMessage[],
    sessionId: string,
    toolName: string,
  ): Promise<void> {
    if (!orchestration?.steps?.length) return Promise.resolve()
    return this.withSession(orchestration, messages, sessionId, undefined, toolName, recordIn(toolName))
  }

  /** The AI-facing state (`null` when the session has none or the storage fails). */
  async getState(sessionId: string): Promise<AIOrchestrationState | null> {
    try {
      const state = await this.storage.get<OrchestrationState>(this.key(sessionId))
      if (state === null) return null
      const { sessionId: id, recentlyUsedTools, activeStep, sequenceIndex, cumulativeTokenUsage } = state
      return { sessionId: id, recentlyUsedTools, activeStep, sequenceIndex, cumulativeTokenUsage }
    } catch {
      return null
    }
  }

  /** Updates fields orch does not own (such as `cumulativeTokenUsage`). The workflow's
   * own fields (`activeStep`, `sequenceIndex`, `recentlyUsedTools`, `orch`) change only
   * through messages and tool usage: updating them throws. */
  async updateState(sessionId: string, partialState: Partial<OrchestrationState>): Promise<OrchestrationState | null> {
    const owned = ['activeStep', 'sequenceIndex', 'recentlyUsedTools', 'orch'].filter((k) => k in partialState)
    if (owned.length > 0) {
      throw new Error(
        `orch owns ${owned.map((k) => `\`${k}\``).join(', ')}: the workflow's state changes through messages and tool usage, not updateState`,
      )
    }
    return this.serially(sessionId, async () => {
      const state = await this.storage.get<OrchestrationState>(this.key(sessionId))
      if (state === null) return null
      const next = { ...state, ...partialState, lastAccessed: Date.now() }
      await this.storage.set(this.key(sessionId), next, this.setOptions)
      return next
    })
  }

  /** Back to a fresh session (the stored state is removed). */
  async resetState(sessionId: string): Promise<void> {
    await this.serially(sessionId, () => {
      this.live.delete(sessionId)
      return this.storage.delete(this.key(sessionId))
    })
  }

  /** Forgets the session. */
  async removeSession(sessionId: string): Promise<void> {
    await this.resetState(sessionId)
  }
}

/** AgentDock's factory. */
export function createOrchestrationManager(options: OrchestrationManagerOptions = {}): OrchestrationManager {
  return new OrchestrationManager(options)
}

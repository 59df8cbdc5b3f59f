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
import { Serial } from './serial.mjs'

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
  machine: Machine
  session: Session
  snapshot: string
  /** The host's tools last set on it (a copy). */
  available: readonly string[] | undefined
}

/** What the package's fast path (`main.cjs`) adds to an engine and its sessions. */
interface Fast {
  __orchSnapshot64?: (handle: number) => string
  __orchPosition?: (handle: number) => number
}

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
  private readonly engine: Engine
  private readonly machines = new WeakMap<object, Machine>()
  private readonly byText = new Map<string, Machine>()
  private readonly queues = new Map<string, Serial>()
  private readonly live = new Map<string, Live>()
  private readonly fingerprints = new WeakMap<Machine, string>()
  private readonly stepNames = new WeakMap<Machine, string[]>()

  constructor(options: OrchestrationManagerOptions = {}) {
    this.storage = options.storageProvider ?? new MemoryStorageProvider()
    this.namespace = options.storageNamespace ?? 'orchestration-state'
    this.ttlMs = options.cleanup?.ttlMs ?? DEFAULT_TTL_MS
    // The engine with the package's fast path (`main.cjs`), also one given here.
    const { installFastPath } = require('../main.cjs') as { installFastPath: <T>(engine: T) => T }
    this.engine = installFastPath(options.engine ?? (require('../index.js') as Engine))
  }

  /** The machine of `orchestration`, compiled once (throws `TemplateError`). */
  machine(orchestration: OrchestrationConfig): Machine {
    const known = this.machines.get(orchestration)
    if (known !== undefined) return known
    const text = JSON.stringify({ name: 'agentdock', orchestration })
    let machine = this.byText.get(text)
    if (machine === undefined) {
      machine = this.engine.compile(text)
      this.byText.set(text, machine)
    }
    this.machines.set(orchestration, machine)
    return machine
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

  /** Runs `work` after every earlier call on `sessionId` in this process. */
  private serially<T>(sessionId: string, work: () => Promise<T>): Promise<T> {
    let queue = this.queues.get(sessionId)
    if (queue === undefined) {
      const made: Serial = new Serial(() => {
        if (this.queues.get(sessionId) === made) this.queues.delete(sessionId)
      })
      this.queues.set(sessionId, (queue = made))
    }
    return queue.run(work)
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
    work: (session: Session, machine: Machine) => T,
  ): Promise<T> {
    return this.serially(sessionId, async () => {
      const machine = this.machine(orchestration)
      const stored = await this.storage.get<OrchestrationState>(this.key(sessionId))
      // The session this process last stored, when the storage still holds exactly that
      // snapshot (taken out while in use: a failed call leaves nothing half-changed).
      const cached = this.live.get(sessionId)
      this.live.delete(sessionId)
      let session: Session
      let seen = 0
      let last: string | undefined
      let hosted: readonly string[] | undefined
      if (stored?.orch && cached && cached.machine === machine && cached.snapshot === stored.orch.snapshot) {
        session = cached.session
        hosted = cached.available
        seen = stored.orch.userMessages
        last = stored.orch.lastUserMessage
      } else if (stored?.orch) {
        try {
          session = machine.restore(unbase64(stored.orch.snapshot))
        } catch (e) {
          // Never a silent fresh start: the host decides (resetState starts afresh).
          const error = new Error(
            `the stored state of session \`${sessionId}\` cannot be restored (${e instanceof Error ? e.message : String(e)}); resetState('${sessionId}') starts it afresh`,
          )
          error.name = 'SnapshotError'
          throw error
        }
        seen = stored.orch.userMessages
        last = stored.orch.lastUserMessage
      } else {
        session = machine.session()
      }
      if (available !== undefined && !sameList(hosted, available)) {
        hosted = [...available]
        session.setAvailable([...hosted])
      }
      const users = messages.filter((m) => m.role === 'user')
      let changed = false
      if (users.length > seen) {
        for (const m of users.slice(seen)) session.onUserMessage(textOf(m))
        changed = true
      } else if (users.length > 0) {
        const text = textOf(users[users.length - 1] as LLMMessage)
        if (text !== last) {
          session.onUserMessage(text)
          changed = true
        }
      }
      const lastUser = users.length > 0 ? textOf(users[users.length - 1] as LLMMessage) : last
      const result = work(session, machine)
      let snapshot = stored?.orch?.snapshot
      if (used !== undefined || changed || stored === null) {
        const ran = used === undefined ? undefined : [used, ...(stored?.recentlyUsedTools ?? []).filter((t) => t !== used)]
        snapshot = await this.store(sessionId, session, machine, users.length, lastUser, stored, ran?.slice(0, RECENT_TOOLS))
      }
      if (snapshot !== undefined) this.keep(sessionId, { machine, session, snapshot, available: hosted })
      return result
    })
  }

  private async store(
    sessionId: string,
    session: Session,
    machine: Machine,
    userMessages: number,
    lastUserMessage: string | undefined,
    before: OrchestrationState | null,
    recent: string[] | undefined,
  ): Promise<string> {
    const where = this.position(session, machine)
    const state: OrchestrationState = {
      ...(before ?? {}),
      sessionId,
      activeStep: where.step,
      sequenceIndex: where.index,
      recentlyUsedTools: recent ?? before?.recentlyUsedTools ?? [],
      lastAccessed: Date.now(),
      ttl: this.ttlMs,
      orch: {
        snapshot: this.snapshot(session),
        fingerprint: this.fingerprint(machine),
        userMessages,
        lastUserMessage,
      },
    }
    await this.storage.set(this.key(sessionId), state, { ttlSeconds: Math.ceil(this.ttlMs / 1000) })
    return state.orch.snapshot
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
        await this.storage.set(this.key(sessionId), fresh, { ttlSeconds: Math.ceil(this.ttlMs / 1000) })
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
  async getAllowedTools(
    orchestration: OrchestrationConfig,
    messages: LLMMessage[],
    sessionId: string,
    allToolIds: string[],
  ): Promise<string[]> {
    if (!orchestration?.steps?.length) return allToolIds
    return this.withSession(orchestration, messages, sessionId, allToolIds, undefined, (s) => {
      // In the host's order, as AgentDock filters `allToolIds`.
      const allowed = s.allowed()
      if (allowed.length > 16) {
        const set = new Set(allowed)
        return allToolIds.filter((t) => set.has(t))
      }
      return allToolIds.filter((t) => allowed.includes(t))
    })
  }

  /** Not in AgentDock: `null` when `toolName` may run now, else why not (in the words
   * orch gives a model). Call it before running a tool. */
  async checkToolUsage(
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
  async processToolUsage(
    orchestration: OrchestrationConfig,
    messages: LLMMessage[],
    sessionId: string,
    toolName: string,
  ): Promise<void> {
    if (!orchestration?.steps?.length) return
    await this.withSession(orchestration, messages, sessionId, undefined, toolName, (s) => {
      s.record(toolName)
    })
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
      await this.storage.set(this.key(sessionId), next, { ttlSeconds: Math.ceil(this.ttlMs / 1000) })
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

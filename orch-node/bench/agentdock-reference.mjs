// AgentDock's orchestration logic, as its TypeScript source does it (agentdock-core's
// `OrchestrationManager`, `StepSequencer` and `OrchestrationStateManager`; AgentDock is
// not published on npm, so the benchmark carries this reimplementation): the state of a
// session lives in a storage provider and every method reads it back and writes it
// through (`await storage.get/set`, as AgentDock's `SessionManager` does);
// `getAllowedTools` finds the active step (the first non-default step whose conditions
// all hold, else the current one, else the default) and filters the host's tool ids by
// the step's sequence position or its allowed/denied lists; `processToolUsage` adds the
// tool to the recently used tools and advances the sequence, then evaluates the step
// again. Message conditions (`message_contains`, `message_regex`) and sequence groups,
// which AgentDock's types do not have, are added here so that both sides do the same
// work on the same template. AgentDock's `logger.debug` calls (which build their
// argument objects on every call, logged or not) and its `SessionManager` bookkeeping
// (a stored envelope per session, access times) are left out: this is a lower bound on
// what AgentDock's own code costs.

/** AgentDock's memory storage provider: values kept as given. */
export class SharedStorage {
  items = new Map()
  async get(key) {
    return this.items.get(key)?.value ?? null
  }
  async set(key, value, options = {}) {
    this.items.set(key, { value, expiresAt: options.ttlSeconds ? Date.now() + options.ttlSeconds * 1000 : undefined })
  }
  async delete(key) {
    return this.items.delete(key)
  }
}

/** A storage that serialises values, as any persistent store (Redis, a database) does. */
export class SerializingStorage {
  items = new Map()
  async get(key) {
    const text = this.items.get(key)
    return text === undefined ? null : JSON.parse(text)
  }
  async set(key, value) {
    this.items.set(key, JSON.stringify(value))
  }
  async delete(key) {
    return this.items.delete(key)
  }
}

const TTL = 24 * 60 * 60 * 1000

class StateManager {
  constructor(storage) {
    this.storage = storage
  }
  key(sessionId) {
    return `orchestration-state:${sessionId}`
  }
  async getOrCreateState(sessionId) {
    let state = await this.storage.get(this.key(sessionId))
    if (state === null) {
      state = { sessionId, recentlyUsedTools: [], sequenceIndex: 0, lastAccessed: Date.now(), ttl: TTL }
      await this.storage.set(this.key(sessionId), state, { ttlSeconds: TTL / 1000 })
    }
    return state
  }
  async updateState(sessionId, partial) {
    const state = await this.getOrCreateState(sessionId)
    const next = { ...state, ...partial, lastAccessed: Date.now() }
    await this.storage.set(this.key(sessionId), next, { ttlSeconds: TTL / 1000 })
    return next
  }
  async addUsedTool(sessionId, tool) {
    const state = await this.getOrCreateState(sessionId)
    const recent = [tool, ...state.recentlyUsedTools.filter((t) => t !== tool)].slice(0, 10)
    return this.updateState(sessionId, { recentlyUsedTools: recent })
  }
}

function position(step, index) {
  const sequence = step.sequence ?? []
  if (index >= sequence.length) return null
  const entry = sequence[index]
  return Array.isArray(entry) ? entry : [entry]
}

class StepSequencer {
  constructor(states) {
    this.states = states
  }
  async filterToolsBySequence(step, sessionId, allToolIds) {
    const state = await this.states.getOrCreateState(sessionId)
    const expected = position(step, state.sequenceIndex ?? 0)
    if (expected === null) return allToolIds
    return allToolIds.filter((t) => expected.includes(t))
  }
  async processTool(step, sessionId, tool) {
    await this.states.addUsedTool(sessionId, tool)
    const state = await this.states.getOrCreateState(sessionId)
    const expected = position(step, state.sequenceIndex ?? 0)
    if (expected !== null && expected.includes(tool)) {
      await this.states.updateState(sessionId, { sequenceIndex: (state.sequenceIndex ?? 0) + 1 })
      return true
    }
    return false
  }
}

/** The JavaScript `(?i)` flag is not a prefix: AgentDock-style templates use it. */
function regex(pattern) {
  return pattern.startsWith('(?i)') ? new RegExp(pattern.slice(4), 'i') : new RegExp(pattern)
}

export class ReferenceOrchestrationManager {
  constructor(storage) {
    this.states = new StateManager(storage)
    this.sequencer = new StepSequencer(this.states)
    this.regexes = new Map()
  }

  holds(condition, step, state, message) {
    const { type, value } = condition
    if (type === 'tool_used') return state.recentlyUsedTools.includes(value)
    if (type === 'sequence_match') {
      const sequence = step.sequence ?? []
      const recent = [...state.recentlyUsedTools].reverse().slice(-sequence.length)
      return recent.length === sequence.length && recent.every((t, i) => position(step, i).includes(t))
    }
    if (type === 'message_contains') return message.toLowerCase().includes(value.toLowerCase())
    if (type === 'message_regex') {
      let pattern = this.regexes.get(value)
      if (pattern === undefined) this.regexes.set(value, (pattern = regex(value)))
      return pattern.test(message)
    }
    return false
  }

  async getActiveStep(orchestration, messages, sessionId) {
    if (!orchestration?.steps?.length) return undefined
    const state = await this.states.getOrCreateState(sessionId)
    const last = messages.at(-1)
    const message = typeof last?.content === 'string' ? last.content : ''
    for (const step of orchestration.steps) {
      if (!step.conditions?.length || step.isDefault) continue
      if (step.conditions.every((c) => this.holds(c, step, state, message))) {
        if (state.activeStep !== step.name) {
          await this.states.updateState(sessionId, { activeStep: step.name, sequenceIndex: 0 })
        }
        return step
      }
    }
    if (state.activeStep) {
      const current = orchestration.steps.find((s) => s.name === state.activeStep)
      if (current) return current
    }
    const fallback = orchestration.steps.find((s) => s.isDefault)
    if (fallback && state.activeStep !== fallback.name) {
      await this.states.updateState(sessionId, { activeStep: fallback.name, sequenceIndex: 0 })
    }
    return fallback
  }

  async getAllowedTools(orchestration, messages, sessionId, allToolIds) {
    if (!orchestration?.steps?.length) return allToolIds
    const step = await this.getActiveStep(orchestration, messages, sessionId)
    if (!step) return allToolIds
    if (step.sequence?.length) return this.sequencer.filterToolsBySequence(step, sessionId, allToolIds)
    if (step.availableTools?.allowed?.length) return allToolIds.filter((t) => step.availableTools.allowed.includes(t))
    if (step.availableTools?.denied?.length) return allToolIds.filter((t) => !step.availableTools.denied.includes(t))
    return allToolIds
  }

  async processToolUsage(orchestration, messages, sessionId, toolName) {
    const step = await this.getActiveStep(orchestration, messages, sessionId)
    if (!step) return
    await this.sequencer.processTool(step, sessionId, toolName)
    await this.getActiveStep(orchestration, messages, sessionId)
  }
}

// The AgentDock drop-in (`@orch/core/agentdock`): AgentDock's manager shape and storage
// interface, backed by orch.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createOrchestrationManager, MemoryStorageProvider } from '@orch/core/agentdock'
import { SnapshotError, TemplateError } from '@orch/core'
import { COGNITIVE, NAMES, random } from './support.mjs'

const ORCHESTRATION = JSON.parse(COGNITIVE).orchestration

const user = (content) => ({ role: 'user', content })

test('allowed tools follow the step and its sequence, message conditions included', async () => {
  const manager = createOrchestrationManager()
  const messages = [user('Research how many moons Jupiter has')]
  assert.deepEqual(await manager.getAllowedTools(ORCHESTRATION, messages, 's', NAMES), ['search'])
  assert.equal((await manager.getActiveStep(ORCHESTRATION, messages, 's')).name, 'ResearchMode')
  const refusal = await manager.checkToolUsage(ORCHESTRATION, messages, 's', 'think')
  assert.equal(refusal.kind, 'out_of_sequence')
  assert.match(refusal.message, /expects `search` at position 0/)
  await manager.processToolUsage(ORCHESTRATION, messages, 's', 'search')
  assert.deepEqual(await manager.getAllowedTools(ORCHESTRATION, messages, 's', NAMES), ['think'])
  await manager.processToolUsage(ORCHESTRATION, messages, 's', 'think')
  const state = await manager.getState('s')
  assert.equal(state.activeStep, 'ResearchMode')
  assert.equal(state.sequenceIndex, 2)
  assert.deepEqual(state.recentlyUsedTools, ['think', 'search'])
  // The same messages again are not a new message: the sequence is kept.
  assert.deepEqual(await manager.getAllowedTools(ORCHESTRATION, messages, 's', NAMES), ['reflect'])
  // A new user message is.
  messages.push({ role: 'assistant', content: 'done' }, user([{ type: 'text', text: 'Compare Rust and Go' }]))
  assert.equal((await manager.getActiveStep(ORCHESTRATION, messages, 's')).name, 'ComparisonMode')
})

test('state lives in the storage provider: another manager carries the session on', async () => {
  const storageProvider = new MemoryStorageProvider()
  const first = createOrchestrationManager({ storageProvider })
  const messages = [user('Research the moons of Jupiter')]
  await first.processToolUsage(ORCHESTRATION, messages, 'run-1', 'search')
  const stored = await storageProvider.get('orchestration-state:run-1')
  assert.equal(stored.sessionId, 'run-1')
  assert.equal(stored.activeStep, 'ResearchMode')
  assert.match(stored.orch.snapshot, /^[A-Za-z0-9+/]+=*$/)
  const second = createOrchestrationManager({ storageProvider })
  assert.deepEqual(await second.getAllowedTools(ORCHESTRATION, messages, 'run-1', NAMES), ['think'])
  await second.resetState('run-1')
  assert.equal(await second.getState('run-1'), null)
})

test('concurrent tool usage on one session loses no update', async () => {
  // A storage that yields between reading and writing, as a networked store does.
  const inner = new MemoryStorageProvider()
  const slow = {
    get: async (k) => {
      await new Promise((r) => setTimeout(r, 2))
      return inner.get(k)
    },
    set: async (k, v, o) => {
      await new Promise((r) => setTimeout(r, 2))
      return inner.set(k, v, o)
    },
    delete: (k) => inner.delete(k),
  }
  const manager = createOrchestrationManager({ storageProvider: slow })
  const messages = [user('Let us brainstorm names')]
  const tools = ['brainstorm', 'critique', 'reflect', 'think', 'search', 'compare']
  await Promise.all(tools.map((t) => manager.processToolUsage(ORCHESTRATION, messages, 'c', t)))
  const state = await manager.getState('c')
  assert.deepEqual([...state.recentlyUsedTools].sort(), [...tools].sort())
})

test('a broken orchestration is an error with every diagnostic, not a silent fallback', async () => {
  const manager = createOrchestrationManager()
  const broken = { steps: [{ name: 'A', isDefault: true }, { name: 'A', isDefault: true }] }
  await assert.rejects(manager.getAllowedTools(broken, [], 'b', NAMES), (e) => e instanceof TemplateError && e.diagnostics.length > 0)
})

test("the workflow's own fields are not updated behind its back", async () => {
  const manager = createOrchestrationManager()
  await manager.processToolUsage(ORCHESTRATION, [user('research it')], 'u', 'search')
  await assert.rejects(manager.updateState('u', { sequenceIndex: 0 }), /orch owns `sequenceIndex`/)
  const usage = { promptTokens: 1, completionTokens: 2, totalTokens: 3 }
  assert.deepEqual((await manager.updateState('u', { cumulativeTokenUsage: usage })).cumulativeTokenUsage, usage)
  assert.equal((await manager.getState('u')).sequenceIndex, 1)
})

test('ensureStateExists creates the state a first call then carries on', async () => {
  const storageProvider = new MemoryStorageProvider()
  const manager = createOrchestrationManager({ storageProvider })
  const created = await manager.ensureStateExists('e')
  assert.equal(created.sessionId, 'e')
  assert.deepEqual(created.recentlyUsedTools, [])
  assert.ok(await storageProvider.get('orchestration-state:e'))
  assert.deepEqual(await manager.getAllowedTools(ORCHESTRATION, [user('research it')], 'e', NAMES), ['search'])
  assert.equal((await manager.ensureStateExists('e')).activeStep, 'ResearchMode')
})

test('a stored state that does not restore is an error, not a silent fresh start', async () => {
  const storageProvider = new MemoryStorageProvider()
  const manager = createOrchestrationManager({ storageProvider })
  await manager.processToolUsage(ORCHESTRATION, [user('research it')], 'x', 'search')
  const stored = await storageProvider.get('orchestration-state:x')
  await storageProvider.set('orchestration-state:x', { ...stored, orch: { ...stored.orch, snapshot: 'bm90IGEgc25hcHNob3Q=' } })
  const fresh = createOrchestrationManager({ storageProvider })
  await assert.rejects(
    fresh.getAllowedTools(ORCHESTRATION, [user('research it')], 'x', NAMES),
    (e) => e instanceof SnapshotError && /session `x` cannot be restored/.test(e.message) && /resetState/.test(e.message),
  )
  await fresh.resetState('x')
  assert.deepEqual(await fresh.getAllowedTools(ORCHESTRATION, [user('research it')], 'x', NAMES), ['search'])
  // The host's tools stored beside the snapshot are checked too.
  const good = await storageProvider.get('orchestration-state:x')
  await storageProvider.set('orchestration-state:x', { ...good, orch: { ...good.orch, available: ['search', 7] } })
  await assert.rejects(
    createOrchestrationManager({ storageProvider }).checkToolUsage(ORCHESTRATION, [user('research it')], 'x', 'search'),
    (e) => e instanceof SnapshotError && /`orch.available` is not a list of tool names/.test(e.message),
  )
})

test("the host's tools go with the stored state: a session restored elsewhere judges as the one that wrote it", async () => {
  const storageProvider = new MemoryStorageProvider()
  const first = createOrchestrationManager({ storageProvider })
  const messages = [user('Let us brainstorm names')]
  // The sequence expects `think`, which the host does not have this time.
  const host = NAMES.filter((t) => t !== 'think')
  assert.deepEqual(await first.getAllowedTools(ORCHESTRATION, messages, 'h', host), [])
  assert.deepEqual((await storageProvider.get('orchestration-state:h')).orch.available, host)
  const refused = await first.checkToolUsage(ORCHESTRATION, messages, 'h', 'think')
  assert.ok(refused !== null)
  const elsewhere = createOrchestrationManager({ storageProvider })
  assert.deepEqual(await elsewhere.checkToolUsage(ORCHESTRATION, messages, 'h', 'think'), refused)
  // Every tool again (in another order): nothing is stored for them.
  await first.getAllowedTools(ORCHESTRATION, messages, 'h', [...NAMES].reverse())
  assert.equal((await storageProvider.get('orchestration-state:h')).orch.available, undefined)
})

/** A storage that keeps values as JSON text, as Redis or a database does. */
class JsonStorage {
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

const REQUESTS = [
  'Research how many moons Jupiter has',
  'Critique this plan and give your opinion',
  'Compare Rust and Go for network services',
  'How can I solve this scheduling problem?',
  "Let's brainstorm names for the product",
  'Debate whether remote work is better',
  'thanks',
]

for (const [storageName, makeStorage] of [
  ['memory', () => new MemoryStorageProvider()],
  ['JSON', () => new JsonStorage()],
]) {
  test(`two managers over one ${storageName} storage answer as one session driven directly, event by event`, async () => {
    const { compile } = await import('@orch/core')
    for (let seed = 1; seed <= 12; seed++) {
      const next = random(seed * 7919)
      const storageProvider = makeStorage()
      const managers = [createOrchestrationManager({ storageProvider }), createOrchestrationManager({ storageProvider })]
      // The reference: one session, fed what the drop-in promises to feed it.
      const reference = compile(JSON.stringify({ name: 'agentdock', orchestration: ORCHESTRATION })).session()
      let hosted
      let seen = 0
      let last
      const messages = []
      const feed = () => {
        const users = messages.filter((m) => m.role === 'user').map((m) => m.content)
        if (users.length > seen) for (const text of users.slice(seen)) reference.onUserMessage(text)
        else if (users.length > 0 && users[users.length - 1] !== last) reference.onUserMessage(users[users.length - 1])
        seen = users.length
        if (users.length > 0) last = users[users.length - 1]
      }
      const usage = { promptTokens: seed, completionTokens: 1, totalTokens: seed + 1 }
      let usageSet = false
      for (let step = 0; step < 60; step++) {
        const manager = managers[next(2)]
        const what = next(10)
        const where = `seed ${seed}, event ${step}`
        if (what === 0) {
          messages.push(user(REQUESTS[next(REQUESTS.length)]), { role: 'assistant', content: 'ok' })
        } else if (what === 1 && messages.length > 0) {
          // The host edits the last user message.
          messages[messages.length - 2] = user(REQUESTS[next(REQUESTS.length)])
        } else if (what <= 4) {
          // Mostly every tool; sometimes some of them, or every tool in another order.
          const pick = next(6)
          const host =
            pick === 0
              ? NAMES.filter(() => next(3) > 0)
              : pick === 1
                ? [...NAMES].sort(() => next(3) - 1)
                : NAMES
          const got = await manager.getAllowedTools(ORCHESTRATION, messages, 's', host)
          feed()
          if (hosted === undefined || hosted.join() !== host.join()) reference.setAvailable([...host])
          hosted = host
          const allowed = reference.allowed()
          assert.deepEqual(got, host.filter((t) => allowed.includes(t)), where)
        } else if (what <= 6) {
          const tool = NAMES[next(NAMES.length)]
          const got = await manager.checkToolUsage(ORCHESTRATION, messages, 's', tool)
          feed()
          assert.deepEqual(got?.kind ?? null, reference.check(tool)?.kind ?? null, where)
        } else if (what <= 8) {
          const tool = NAMES[next(NAMES.length)]
          await manager.processToolUsage(ORCHESTRATION, messages, 's', tool)
          feed()
          reference.record(tool)
        } else {
          await manager.updateState('s', { cumulativeTokenUsage: usage })
          usageSet = (await storageProvider.get('orchestration-state:s')) !== null
        }
        const stored = await storageProvider.get('orchestration-state:s')
        if (stored?.orch) {
          assert.equal(stored.orch.snapshot, Buffer.from(reference.snapshot()).toString('base64'), where)
          assert.equal(stored.activeStep ?? null, reference.step ?? null, where)
          assert.equal(stored.sequenceIndex, reference.sequenceIndex, where)
          // The host's own field is kept by every write after it was set.
          assert.deepEqual(stored.cumulativeTokenUsage, usageSet ? usage : undefined, where)
        }
      }
    }
  })
}

test("the stored state has AgentDock's fields first, in AgentDock's order, then orch's", async () => {
  const storageProvider = new JsonStorage()
  const manager = createOrchestrationManager({ storageProvider })
  await manager.processToolUsage(ORCHESTRATION, [user('research it')], 'k', 'search')
  const keys = Object.keys(await storageProvider.get('orchestration-state:k'))
  assert.deepEqual(keys, ['sessionId', 'activeStep', 'sequenceIndex', 'recentlyUsedTools', 'lastAccessed', 'ttl', 'orch'])
  await manager.updateState('k', { cumulativeTokenUsage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 }, note: 'kept' })
  await manager.processToolUsage(ORCHESTRATION, [user('research it')], 'k', 'think')
  const after = await storageProvider.get('orchestration-state:k')
  assert.equal(after.note, 'kept')
  assert.deepEqual(after.recentlyUsedTools, ['think', 'search'])
})

test('a write the storage refuses changes nothing: the next call starts from what is stored', async () => {
  const inner = new MemoryStorageProvider()
  let refuse = false
  const storageProvider = {
    get: (k) => inner.get(k),
    set: async (k, v, o) => {
      if (refuse) throw new Error('the storage is down')
      return inner.set(k, v, o)
    },
    delete: (k) => inner.delete(k),
  }
  const manager = createOrchestrationManager({ storageProvider })
  const messages = [user('Research how many moons Jupiter has')]
  await manager.processToolUsage(ORCHESTRATION, messages, 'r', 'search')
  refuse = true
  await assert.rejects(manager.processToolUsage(ORCHESTRATION, messages, 'r', 'think'), /the storage is down/)
  refuse = false
  // `think` was not stored: the sequence still expects it.
  assert.deepEqual(await manager.getAllowedTools(ORCHESTRATION, messages, 'r', NAMES), ['think'])
})

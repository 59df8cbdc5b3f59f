// The AgentDock drop-in (`@orch/core/agentdock`): AgentDock's manager shape and storage
// interface, backed by orch.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createOrchestrationManager, MemoryStorageProvider } from '@orch/core/agentdock'
import { SnapshotError, TemplateError } from '@orch/core'
import { COGNITIVE, NAMES } from './support.mjs'

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
})

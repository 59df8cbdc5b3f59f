// The fast path (main.cjs: tools by index, allowed sets interned per machine, one
// crossing per event) answers exactly as the class's own methods do. Two sessions of each
// template take the same random events, one through the package's methods and one
// through the native methods the fast path stands in front of; after every event their
// allowed sets, every check and their snapshot bytes must be equal. Runs on the native
// addon and on WebAssembly like every test here.
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import * as orch from '@orch/core'
import { EXAMPLES, random, REPO } from './support.mjs'

const { native } = orch.Session.prototype.__orchFast
/** The module object itself: the fast functions are internal, not named exports. */
const engine = orch.default

/** The repository's example templates and test machines (gates, wide tool sets,
 * message conditions, foreign-tool patterns). */
function templates() {
  const found = readdirSync(EXAMPLES).map((name) => join(EXAMPLES, name, 'template.json'))
  const machines = join(REPO, 'tests', 'fixtures', 'machines')
  for (const name of readdirSync(machines)) found.push(join(machines, name))
  return found.map((path) => ({ path, text: readFileSync(path, 'utf8') }))
}

const MESSAGES = [
  'Research how many moons Jupiter has',
  'Critique this plan and give your opinion',
  'compare these two',
  'How can I solve this?',
  'brainstorm and debate',
  'refund order 7 please, it is urgent',
  'hello',
  '',
]

test('the fast path answers as the class methods do, event by event', () => {
  let events = 0
  for (const { path, text } of templates()) {
    const machine = orch.compile(text)
    const tools = machine.tools
    const names = [...tools, 'foreign_tool', 'mcp_lookup', 'search_web']
    const fast = machine.session()
    const slow = machine.session()
    const next = random(0x9e3779b9 ^ text.length)
    for (let i = 0; i < 400; i++) {
      const what = next(12)
      const where = `${path}, event ${i}`
      if (what < 5) {
        const tool = names[next(names.length)]
        assert.equal(fast.record(tool), native.record.call(slow, tool), where)
      } else if (what < 7) {
        const message = MESSAGES[next(MESSAGES.length)]
        fast.onUserMessage(message)
        native.onUserMessage.call(slow, message)
      } else if (what === 7) {
        const some = names.filter(() => next(3) > 0)
        fast.setAvailable(some)
        slow.setAvailable(some)
      } else if (what === 8) {
        const tool = names[next(names.length)]
        fast.approve(tool, '{}')
        slow.approve(tool, '{}')
      } else if (what >= 10) {
        // The run host: a call begun, then finished (it ran, or failed).
        const tool = names[next(names.length)]
        const id = `c${next(4)}`
        // One clock for both: a question's expiry is part of the state, and two reads of
        // the machine's clock a millisecond apart would make the snapshots differ.
        const now = Date.now()
        assert.deepEqual(fast.begin(id, tool, '{}', true, now), slow.begin(id, tool, '{}', true, now), where)
        const ran = next(2) === 0
        assert.equal(fast.finish(id, tool, ran), slow.finish(id, tool, ran), where)
      } else if (next(4) === 0) {
        fast.reset()
        slow.reset()
      }
      events++
      assert.deepEqual(fast.allowed(), native.allowed.call(slow), where)
      // The whole state is compared by the snapshot bytes and the allowed set after every
      // event; checks, which add the reason, for five tools drawn at random, and for every
      // tool each 50th event and at the end (the 200-tool machine would otherwise make
      // this test a minute of checks on WebAssembly).
      const every = i % 50 === 49
      const checked = every ? names : Array.from({ length: 5 }, () => names[next(names.length)])
      for (const tool of checked) assert.deepEqual(fast.check(tool), native.check.call(slow, tool), `${where}: check ${tool}`)
      assert.deepEqual(Buffer.from(fast.snapshot()), Buffer.from(slow.snapshot()), where)
    }
  }
  assert.ok(events > 4000)
})

test('a restored session takes the fast path, and allowed() hands out its own array', () => {
  const machine = orch.compile(readFileSync(join(EXAMPLES, 'cognitive-reasoner', 'template.json'), 'utf8'))
  const session = machine.session()
  session.onUserMessage('Research how many moons Jupiter has')
  assert.equal(session.record('search'), 'advanced')
  const restored = machine.restore(session.snapshot())
  assert.deepEqual(restored.allowed(), ['think'])
  const mine = restored.allowed()
  mine.push('teleport')
  assert.deepEqual(restored.allowed(), ['think'], 'a caller changing its array changes nothing')
  assert.equal(restored.record('think'), 'advanced')
  assert.equal(restored.record('reflect'), 'completed')
  assert.deepEqual(restored.allowed(), ['search', 'think', 'reflect'])
  // A result given: the class's own method (rules may read it), and the fast path after.
  assert.equal(restored.record('search', '{"ok":true}'), 'free')
  assert.deepEqual(restored.allowed(), ['search', 'think', 'reflect'])
})

test('the fast functions refuse what is not a live session or a tool', () => {
  const machine = orch.compile(readFileSync(join(EXAMPLES, 'cognitive-reasoner', 'template.json'), 'utf8'))
  const session = machine.session()
  const handle = session.__handle
  assert.equal(typeof handle, 'number')
  for (const forged of [handle + 1, -1, 0.5, Number.NaN, Infinity, 2 ** 60, 'x', undefined]) {
    assert.throws(() => engine.__orchState(forged), /handle/, String(forged))
  }
  for (const forged of [(handle + 1) * 16384, -16384, 0.5, Number.NaN, Infinity, 2 ** 60, 'x', undefined]) {
    assert.throws(() => engine.__orchRecord(forged), /handle|number/, String(forged))
  }
  assert.throws(() => engine.__orchRecord(handle * 16384 + 7), /no tool 7/)
  assert.throws(() => engine.__orchRecord(handle * 16384 + 16383), /no tool 16383/)
  assert.throws(() => engine.__orchRecord(-1), /handle/)
  assert.throws(() => engine.__orchMessage(handle, 42), /string/)
  assert.throws(() => engine.__orchSet(handle, 0), /no allowed set/)
  assert.equal(engine.__orchMessage(handle, 'x'.repeat(100_000)) > 0, true, 'a long message is read whole')
})

test('a message reaches the engine whole, however long, whatever its characters', () => {
  const machine = orch.compile(
    JSON.stringify({
      name: 'edge',
      tools: ['a', 'b'],
      orchestration: {
        steps: [
          { name: 'Found', conditions: [{ type: 'message_contains', value: '€z😀' }], availableTools: { allowed: ['b'] } },
          { name: 'Default', isDefault: true },
        ],
      },
    }),
  )
  // Around the 1 KiB the fast path reads at once, and far past it.
  for (const n of [0, 1, 1010, 1014, 1015, 1016, 1017, 1018, 1019, 1020, 1021, 1022, 1023, 1024, 5000, 300_000]) {
    for (const filler of ['a', 'é', '中']) {
      const session = machine.session()
      session.onUserMessage(filler.repeat(n) + '€z😀')
      assert.equal(session.step, 'Found', `${n} × ${filler}`)
      const other = machine.session()
      other.onUserMessage(filler.repeat(n) + '€z')
      assert.equal(other.step, 'Default', `${n} × ${filler}, cut`)
    }
  }
})

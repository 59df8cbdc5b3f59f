// Observe mode in the npm package: a machine compiled with `{ mode: 'observe' }` judges
// every call as enforce mode does and refuses and asks nothing — `check` answers null,
// `begin` answers `run`, every tool is offered, none is forced — and its runs stand where
// an enforcing run stands after the same calls.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import * as orch from '@orch/core'
import { REPO } from './support.mjs'

const REFUND = readFileSync(join(REPO, 'examples', 'agents', 'refund-desk', 'template.json'), 'utf8')

test('observe mode runs what enforce mode refuses, and stands where it would', () => {
  const observing = orch.compile(REFUND, { mode: 'observe' })
  const enforcing = orch.compile(REFUND)
  assert.equal(observing.mode, 'observe')
  assert.equal(enforcing.mode, 'enforce')
  assert.equal(observing.fingerprint, enforcing.fingerprint)
  const watched = observing.session()
  const strict = enforcing.session()
  assert.equal(watched.mode, 'observe')
  assert.notEqual(strict.check('issue_refund'), null)
  assert.equal(watched.check('issue_refund'), null)
  assert.deepEqual([...watched.allowed()].sort(), [...observing.tools].sort())
  const begun = watched.begin('c1', 'issue_refund', '{"order": 1}')
  assert.equal(begun.action, 'run')
  // Recorded though the step does not allow it: it ran.
  assert.equal(watched.finish('c1', 'issue_refund', true), 'not_allowed')
  strict.record('issue_refund')
  assert.deepEqual(watched.history, strict.history)
  for (const s of [watched, strict]) s.onUserMessage('please refund my order')
  assert.equal(strict.forcedTool, 'lookup_order')
  assert.equal(watched.forcedTool, null)
  assert.equal(watched.begin('c-look', 'lookup_order', '{"order": 2}').action, 'run')
  watched.finish('c-look', 'lookup_order', true)
  strict.record('lookup_order')
  // The refund is gated: enforcing asks a human, observing runs it.
  assert.equal(strict.begin('c-x', 'issue_refund', '{"order": 2}').action, 'ask')
  assert.equal(watched.begin('c-pay', 'issue_refund', '{"order": 2}').action, 'run')
  watched.finish('c-pay', 'issue_refund', true)
  strict.record('issue_refund')
  assert.deepEqual(
    [watched.step, watched.sequenceIndex, watched.history],
    [strict.step, strict.sequenceIndex, strict.history],
  )
  assert.equal(observing.restore(watched.snapshot()).mode, 'observe')
})

test('an unknown mode is refused', () => {
  assert.throws(() => orch.compile('{"tools": ["a"]}', { mode: 'watch' }), /does not match any variant of enum `Mode`/)
})

// The run protocol, the same in JavaScript (native and WebAssembly) as in Rust: the corpus
// that orch-agent/tests/protocol_corpus.rs writes (random templates and streams of
// messages, calls with results of every kind, questions, answers — replayed and late ones
// too —, approvals, rejections and resets, each with what the Rust reference decided and
// where the session stood after it) is replayed through the installed package, which must
// decide every step alike.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import * as orch from '@orch/core'
import { REPO } from './support.mjs'

const CORPUS = JSON.parse(readFileSync(join(REPO, 'orch-py', 'tests', 'fixtures', 'protocol.json'), 'utf8'))

function replay(c) {
  const session = orch.compile(c.template).session()
  const questions = []
  c.steps.forEach((step, i) => {
    let decision
    switch (step.op) {
      case 'message':
        session.onUserMessage(step.text)
        decision = 'ok'
        break
      case 'call': {
        const refusal = session.admit(step.tool, step.args)
        if (refusal) {
          decision = `refused:${refusal.kind}`
          if (refusal.rule != null) decision += `:${refusal.rule}: ${refusal.message}`
        } else {
          const kind = orch.resultKind(step.result)
          if (kind === 'ran') {
            // A success is recorded with its values, for rules that read them.
            session.record(step.tool, step.value)
            decision = 'ran'
          } else {
            decision = `not_run:${kind}`
          }
        }
        break
      }
      case 'ask': {
        const question = session.ask(step.tool, step.args)
        assert.equal(question.length, 16)
        questions.push([step.tool, step.args, question])
        decision = 'asked'
        break
      }
      case 'answer': {
        if (questions.length === 0) {
          decision = 'no_question'
        } else {
          const [tool, args, question] = step.which === 'first' ? questions[0] : questions[questions.length - 1]
          decision = session.answer(tool, args, question, step.approved) ? 'applied' : 'stale'
        }
        break
      }
      case 'approve':
        session.approve(step.tool, step.args)
        decision = 'held'
        break
      case 'reject':
        session.reject(step.tool, step.args)
        decision = 'held'
        break
      case 'reset':
        session.reset()
        decision = 'ok'
        break
      default:
        throw new Error(`unknown op ${step.op}`)
    }
    const seen = {
      decision,
      allowed: [...session.allowed()].sort(),
      forced: session.forcedTool ?? null,
      step: session.step ?? null,
      index: session.sequenceIndex,
      verdict: session.approval?.verdict ?? null,
    }
    assert.deepEqual(seen, step.expect, `step ${i} (${JSON.stringify(step)}) of ${c.template}`)
  })
}

test('every step of the corpus is decided as Rust decides it', () => {
  assert.ok(CORPUS.cases.length >= 50)
  for (const c of CORPUS.cases) replay(c)
})

test('result kinds: only a complete, successful result counts as run', () => {
  assert.equal(orch.resultKind('{"content": []}'), 'ran')
  assert.equal(orch.resultKind('{"content": [], "isError": true}'), 'error')
  assert.equal(orch.resultKind('{"resultType": "input_required"}'), 'input_required')
  assert.equal(orch.resultKind('{}'), 'malformed')
  assert.equal(orch.resultKind('not json'), 'malformed')
})

test('an answer applies once, to its own question', () => {
  const session = orch
    .compile('{"name": "shop", "tools": ["pay"], "orchestration": {"approve": ["pay"], "steps": [{"name": "Shop", "isDefault": true}]}}')
    .session()
  const args = '{"order": 7}'
  const first = session.ask('pay', args)
  assert.equal(session.answer('pay', args, first, true), true)
  assert.equal(session.answer('pay', args, first, true), false)
  assert.equal(session.admit('pay', args), null)
  const second = session.ask('pay', args)
  assert.notEqual(second, first)
  assert.equal(session.answer('pay', args, first, true), false)
  assert.equal(session.admit('pay', args).kind, 'needs_approval')
  assert.equal(session.answer('pay', args, second, true), true)
  assert.equal(session.admit('pay', args), null)
})

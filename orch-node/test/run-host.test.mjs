// The run host, the same in JavaScript (native and WebAssembly) as in Rust, under faults:
// the corpus that orch-agent/tests/run_host_corpus.rs writes — random templates and
// streams of calls on two runs of each, begun, answered and finished, with the faults a
// framework or a network inflicts (the same call delivered again after it ran, was
// refused or while it runs; an approval replayed, answered twice, after its expiry, for
// the same id with other arguments, on the other run; a result delivered twice or for a
// call never begun; the host restored from its snapshot between any two phases) — is
// replayed through the installed package, which must decide every step alike and leave
// each run where Rust left it.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import * as orch from '@orch/core'
import { REPO } from './support.mjs'

const CORPUS = JSON.parse(readFileSync(join(REPO, 'orch-py', 'tests', 'fixtures', 'run-host.json'), 'utf8'))

function replay(c, ttl) {
  const machine = orch.compile(c.template)
  const runs = [machine.session(), machine.session()]
  for (const run of runs) run.setQuestionTtl(ttl)
  c.steps.forEach((step, i) => {
    const at = step.run ?? 0
    let session = runs[at]
    let decision
    switch (step.op) {
      case 'begin': {
        const begun = session.begin(step.id, step.tool, step.args, step.ask, step.now)
        decision = `${begun.action}:${begun.refusal?.kind ?? ''}`
        break
      }
      case 'answer': {
        const answered = session.answerCall(step.id, step.tool, step.args, step.approved, step.now)
        decision = `${answered.outcome}:${answered.refusal?.kind ?? ''}`
        break
      }
      case 'finish':
        decision = session.finish(step.id, step.tool, true, step.result ?? undefined)
        break
      case 'restore':
        // A process killed and started again: the run comes back from its snapshot.
        session = machine.restore(session.snapshot())
        session.setQuestionTtl(ttl)
        runs[at] = session
        decision = 'ok'
        break
      case 'message':
        session.onUserMessage(step.text)
        decision = 'ok'
        break
      case 'wait':
        decision = 'ok'
        break
      default:
        throw new Error(`unknown op ${step.op}`)
    }
    const seen = {
      decision,
      allowed: [...session.allowed()].sort(),
      history: session.history.map((t) => t ?? null),
      step: session.step ?? null,
    }
    const want = {
      decision: step.decision,
      allowed: [...step.after.allowed].sort(),
      history: step.after.history,
      step: step.after.step,
    }
    assert.deepEqual(seen, want, `step ${i} (${JSON.stringify(step)}) of ${c.template}`)
  })
}

test('every step of the run host corpus is decided as Rust decides it', () => {
  assert.ok(CORPUS.cases.length >= 40)
  for (const c of CORPUS.cases) replay(c, CORPUS.questionTtlSeconds)
})

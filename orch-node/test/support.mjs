// What the tests share: where the repository's example templates are, the cognitive
// reasoner's tools, and the scripted scenarios every adapter of orch is tested on (the
// Rust and Python adapters pass the same ones).
import { readFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { call, calls } from '@orch/core/testing'

const here = dirname(fileURLToPath(import.meta.url))
/** The repository (the tests run from a copy in a fresh directory: `ORCH_REPO` says where). */
export const REPO = process.env.ORCH_REPO ?? resolve(here, '..', '..')
export const EXAMPLES = join(REPO, 'examples', 'agents')
export const COGNITIVE = readFileSync(join(EXAMPLES, 'cognitive-reasoner', 'template.json'), 'utf8')
export const REFUND = readFileSync(join(EXAMPLES, 'refund-desk', 'template.json'), 'utf8')
export const SNAPSHOT = join(REPO, 'orch-py', 'tests', 'fixtures', 'cognitive-reasoner.snapshot')

/** A small deterministic generator (xorshift32), so a failure replays: `next(n)` is in
 * `0..n`. */
export function random(seed) {
  let x = seed >>> 0 || 1
  return (n) => {
    x ^= x << 13
    x >>>= 0
    x ^= x >>> 17
    x ^= x << 5
    x >>>= 0
    return x % n
  }
}

/** The cognitive reasoner's tools. */
export const NAMES = ['search', 'think', 'reflect', 'compare', 'critique', 'brainstorm', 'debate']

/** A misbehaving research turn: a call out of order, text while `search` is forced, a
 * call the sequence does not expect, an unknown tool, the sequence, a tool the step does
 * not allow, the answer. */
export const MISBEHAVING = [
  call('think', '{"input": "too early"}'),
  'I think the answer is obvious.',
  call('debate', '{}'),
  call('teleport', '{}'),
  call('search', '{"input": "AI jobs"}'),
  call('think', '{"input": "analysis"}'),
  call('reflect', '{"input": "summary"}'),
  call('debate', '{"input": "jobs"}'),
  'AI changes jobs: see the analysis.',
]
export const MISBEHAVING_QUESTION = 'Research the impact of AI on jobs'

/** Bad JSON arguments, then two calls in one turn twice (the second of each out of order). */
export const SEVERAL_CALLS = [
  call('search', '{not json'),
  calls(['search', '{"input": "a"}'], ['reflect', '{"input": "b"}']),
  calls(['think', '{"input": "c"}'], ['think', '{"input": "d"}']),
  call('reflect', '{"input": "e"}'),
  'done',
]
export const SEVERAL_CALLS_QUESTION = 'Research the moons of Jupiter'

/** The refund desk: a lookup, the gated refund, the confirmation. */
export const REFUND_APPROVED = [
  call('lookup_order', '{"order": 7}'),
  call('issue_refund', '{"order": 7}'),
  call('send_email', '{"order": 7}'),
  'Refunded order 7.',
]
export const REFUND_DENIED = [call('lookup_order', '{"order": 8}'), call('issue_refund', '{"order": 8}'), 'I could not refund it.']

// The runnable example (examples/research-agent.mjs) runs as a program, offline.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { dirname, join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { EXAMPLES } from './support.mjs'

const here = dirname(fileURLToPath(import.meta.url))

test('the research agent example runs offline and keeps to the sequence', () => {
  const env = { ...process.env, ORCH_TEMPLATE: join(EXAMPLES, 'cognitive-reasoner', 'template.json') }
  delete env.OPENAI_API_KEY
  const out = execFileSync(process.execPath, [join(here, '..', 'examples', 'research-agent.mjs')], { env, encoding: 'utf8' })
  assert.match(out, /refused think: error: `think` was not run/)
  assert.match(out, /ran: search → think → reflect/)
  assert.match(out, /answer: Jupiter has 95 confirmed moons/)
})

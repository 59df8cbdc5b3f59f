// The AI SDK adapter (`@orch/core/ai-sdk`) against the real SDK (`ai` 7, pinned) and its
// real OpenAI provider, talking to a scripted OpenAI-compatible server: the
// misbehaving-model scenarios the Rust and Python adapters pass — a call out of order,
// text while a tool is forced, a call the sequence does not expect, an unknown tool, a
// tool the step does not allow, bad JSON arguments, several calls in one turn — and
// approvals. Nothing disallowed executes.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { generateText, stepCountIs, streamText, tool } from 'ai'
import { createOpenAI } from '@ai-sdk/openai'
import { z } from 'zod'
import { compile } from '@orch/core'
import { orchestrate, OrchRefusalError } from '@orch/core/ai-sdk'
import { ScriptedOpenAI } from '@orch/core/testing'
import {
  COGNITIVE,
  MISBEHAVING,
  MISBEHAVING_QUESTION,
  NAMES,
  REFUND,
  REFUND_APPROVED,
  REFUND_DENIED,
  SEVERAL_CALLS,
  SEVERAL_CALLS_QUESTION,
} from './support.mjs'

/** The cognitive reasoner's tools, logging what actually ran. */
function researchTools(ran) {
  return Object.fromEntries(
    NAMES.map((name) => [
      name,
      tool({
        description: `The ${name} tool.`,
        inputSchema: z.object({ input: z.string().optional() }),
        execute: async ({ input }) => {
          ran.push(name)
          return `${name}(${input ?? ''})`
        },
      }),
    ]),
  )
}

async function turn(fake, template, tools, question, extra = {}) {
  const run = orchestrate(compile(template).session(), tools)
  const openai = createOpenAI({ baseURL: fake.baseURL, apiKey: 'not-a-key' })
  run.onUserMessage(question)
  const result = await generateText({
    model: run.model(openai.chat('fake')),
    prompt: question,
    stopWhen: stepCountIs(20),
    ...run.settings(),
    ...extra,
  })
  return { run, result }
}

test('a misbehaving model cannot break the sequence', async () => {
  const fake = await ScriptedOpenAI.start(MISBEHAVING)
  const ran = []
  try {
    const { run, result } = await turn(fake, COGNITIVE, researchTools(ran), MISBEHAVING_QUESTION)
    assert.equal(result.text, 'AI changes jobs: see the analysis.')
    // Nothing disallowed ran; the sequence completed within the turn.
    assert.deepEqual(ran, ['search', 'think', 'reflect'])
    assert.deepEqual(run.executed, ['search', 'think', 'reflect'])
    assert.equal(run.session.sequenceIndex, 3)
    // Every model call offered only the allowed tools and forced the expected one.
    assert.deepEqual(fake.offered(0), ['search'])
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6].map((i) => fake.toolChoice(i)),
      ['search', 'search', 'search', 'search', 'search', 'think', 'reflect'],
    )
    assert.deepEqual(fake.offered(7), ['search', 'think', 'reflect'])
    assert.ok([undefined, 'auto'].includes(fake.toolChoice(7)))
    // The text answer while `search` was forced was met with the reminder.
    assert.match(JSON.stringify(fake.requests[2].messages), /requires calling `search` now/)
    // Each refusal reached the model in orch's words before it was asked again.
    assert.match(fake.toolResults(1)[0], /error: `think` was not run: the sequence of step `ResearchMode` expects `search` at position 0. Allowed now: search./)
    assert.match(fake.toolResults(3)[1], /error: `debate` was not run: the sequence of step `ResearchMode` expects `search` at position 0/)
    assert.match(fake.toolResults(4)[2], /error: there is no tool `teleport`. Allowed now: search./)
    // After the sequence, a tool the step does not offer is refused by the SDK itself
    // (it is not among the step's active tools) and never runs.
    assert.match(fake.toolResults(8)[3], /unavailable tool 'debate'/)
  } finally {
    await fake.close()
  }
})

test('bad arguments and several calls in one turn: judged one at a time, in order', async () => {
  const fake = await ScriptedOpenAI.start(SEVERAL_CALLS)
  const ran = []
  try {
    const { run, result } = await turn(fake, COGNITIVE, researchTools(ran), SEVERAL_CALLS_QUESTION)
    assert.equal(result.text, 'done')
    assert.deepEqual(ran, ['search', 'think', 'reflect'])
    assert.deepEqual(run.executed, ['search', 'think', 'reflect'])
    assert.equal(run.session.sequenceIndex, 3)
    // Bad JSON never reached `execute`; the SDK told the model.
    assert.match(fake.toolResults(1)[0], /search/i)
    // [search, reflect] while only `search` is active: search ran; the SDK refused
    // reflect (not among the step's active tools), which never ran.
    const second = fake.toolResults(2)
    assert.equal(second[1], 'search(a)')
    assert.match(second[2], /unavailable tool 'reflect'/)
    // [think, think], both active: the SDK runs them at once; orch admits one at a time,
    // so the first ran and the second was refused in orch's words (reflect comes next).
    const third = fake.toolResults(3)
    assert.equal(third[3], 'think(c)')
    assert.match(third[4], /`think` was not run: the sequence of step `ResearchMode` expects `reflect` at position 2/)
  } finally {
    await fake.close()
  }
})

/** The refund desk's tools, logging what actually ran. */
function refundTools(ran) {
  return Object.fromEntries(
    ['lookup_order', 'issue_refund', 'send_email'].map((name) => [
      name,
      tool({
        description: `The ${name} tool.`,
        inputSchema: z.object({ order: z.number() }),
        execute: async ({ order }) => {
          ran.push(`${name}(${order})`)
          return `${name} done for ${order}`
        },
      }),
    ]),
  )
}

async function refundRun(script, approved) {
  const fake = await ScriptedOpenAI.start(script)
  const ran = []
  try {
    const tools = refundTools(ran)
    const question = 'Please refund order'
    const { run, result } = await turn(fake, REFUND, tools, question)
    // The gated call paused the run as an approval request; nothing ran past the lookup.
    assert.deepEqual(ran, [`lookup_order(${approved ? 7 : 8})`])
    const requests = result.content.filter((p) => p.type === 'tool-approval-request')
    assert.equal(requests.length, 1)
    assert.equal(requests[0].toolCall.toolName, 'issue_refund')
    assert.equal(run.session.approval?.verdict, 'pending')
    // A human answers; the conversation goes on with the answer.
    const openai = createOpenAI({ baseURL: fake.baseURL, apiKey: 'not-a-key' })
    const messages = [
      { role: 'user', content: question },
      ...result.response.messages,
      {
        role: 'tool',
        content: [{ type: 'tool-approval-response', approvalId: requests[0].approvalId, approved, reason: approved ? undefined : 'no' }],
      },
    ]
    const next = await generateText({
      model: run.model(openai.chat('fake')),
      messages,
      stopWhen: stepCountIs(20),
      ...run.settings(),
    })
    return { run, ran, next, fake }
  } finally {
    await fake.close()
  }
}

test('an approved refund runs once, then the sequence goes on', async () => {
  const { run, ran, next } = await refundRun(REFUND_APPROVED, true)
  assert.deepEqual(ran, ['lookup_order(7)', 'issue_refund(7)', 'send_email(7)'])
  assert.deepEqual(run.executed, ['lookup_order', 'issue_refund', 'send_email'])
  assert.equal(next.text, 'Refunded order 7.')
  assert.equal(run.session.sequenceIndex, 3)
})

test('a denied refund never runs', async () => {
  const { run, ran, next } = await refundRun(REFUND_DENIED, false)
  assert.deepEqual(ran, ['lookup_order(8)'])
  assert.deepEqual(run.executed, ['lookup_order'])
  assert.equal(next.text, 'I could not refund it.')
  assert.equal(run.session.sequenceIndex, 1)
})

test('an approval is for one exact call: other arguments are asked again, never run', async () => {
  const session = compile(REFUND).session()
  const ran = []
  const run = orchestrate(session, refundTools(ran))
  run.onUserMessage('refund order 7')
  assert.equal(session.record('lookup_order'), 'advanced')
  session.approve('issue_refund', JSON.stringify({ order: 7 }))
  await assert.rejects(
    run.tools.issue_refund.execute({ order: 9 }, { toolCallId: 'x', messages: [] }),
    (e) => e instanceof OrchRefusalError && e.refusal.kind === 'needs_approval',
  )
  assert.deepEqual(ran, [])
  assert.equal(await run.tools.issue_refund.execute({ order: 7 }, { toolCallId: 'y', messages: [] }), 'issue_refund done for 7')
  assert.deepEqual(ran, ['issue_refund(7)'])
})

test('an approval is of the call the human saw: a second call under the same id never runs on it', async () => {
  const ran = []
  const run = orchestrate(compile(REFUND).session(), refundTools(ran))
  run.onUserMessage('refund order 7')
  assert.equal(run.session.record('lookup_order'), 'advanced')
  // The SDK asked about the call it showed (order 7 under the id c1).
  const status = await run.toolApproval({ toolCall: { toolName: 'issue_refund', input: { order: 7 }, toolCallId: 'c1' } })
  assert.equal(status, 'user-approval')
  assert.equal(run.session.approval?.verdict, 'pending')
  // The human's answer comes with the next request.
  run.settings()
  // The model gave two calls one id; the human was shown (and approved) order 7.
  const shown = (order) => ({ type: 'tool-call', toolCallId: 'c1', toolName: 'issue_refund', input: { order } })
  const approval = [
    { type: 'tool-approval-request', approvalId: 'a1', toolCallId: 'c1' },
  ]
  const answer = { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: 'a1', approved: true }] }
  const twice = [
    { role: 'user', content: 'refund order 7' },
    { role: 'assistant', content: [shown(7), shown(9999), ...approval] },
    answer,
  ]
  for (const order of [9999, 7]) {
    await assert.rejects(
      run.tools.issue_refund.execute({ order }, { toolCallId: 'c1', messages: twice }),
      (e) => e instanceof OrchRefusalError && /same id `c1`/.test(e.message),
    )
  }
  // One call under the id, but not the one executed: not approved, never run.
  const once = [{ role: 'user', content: 'refund order 7' }, { role: 'assistant', content: [shown(7), ...approval] }, answer]
  await assert.rejects(
    run.tools.issue_refund.execute({ order: 9999 }, { toolCallId: 'c1', messages: once }),
    (e) => e instanceof OrchRefusalError,
  )
  assert.deepEqual(ran, [])
  // The call the human saw runs, once.
  assert.equal(await run.tools.issue_refund.execute({ order: 7 }, { toolCallId: 'c1', messages: once }), 'issue_refund done for 7')
  assert.deepEqual(ran, ['issue_refund(7)'])
  // Delivered again (a retried POST, a second tab): it ran already.
  await assert.rejects(
    run.tools.issue_refund.execute({ order: 7 }, { toolCallId: 'c1', messages: once }),
    (e) => e instanceof OrchRefusalError && e.refusal.kind === 'already_ran',
  )
  assert.deepEqual(ran, ['issue_refund(7)'])
})

test('the same approved messages sent twice run the refund once, on the same run or one restored from its snapshot', async () => {
  const fake = await ScriptedOpenAI.start([...REFUND_APPROVED, '(again)', '(again, restored)'])
  const ran = []
  try {
    const tools = refundTools(ran)
    const question = 'Please refund order'
    const { run, result } = await turn(fake, REFUND, tools, question)
    const requests = result.content.filter((p) => p.type === 'tool-approval-request')
    // The app keeps only the snapshot between the two requests.
    const paused = run.session.snapshot()
    const machine = compile(REFUND)
    const resumed = orchestrate(machine.restore(paused), tools)
    const openai = createOpenAI({ baseURL: fake.baseURL, apiKey: 'not-a-key' })
    const messages = [
      { role: 'user', content: question },
      ...result.response.messages,
      { role: 'tool', content: [{ type: 'tool-approval-response', approvalId: requests[0].approvalId, approved: true }] },
    ]
    const send = (r) => generateText({ model: r.model(openai.chat('fake')), messages, stopWhen: stepCountIs(20), ...r.settings() })
    await send(resumed)
    assert.deepEqual(ran, ['lookup_order(7)', 'issue_refund(7)', 'send_email(7)'])
    // The same POST again, on the same run…
    await send(resumed)
    // …and on a run restored from the snapshot saved after it.
    await send(orchestrate(machine.restore(resumed.session.snapshot()), tools))
    assert.deepEqual(ran, ['lookup_order(7)', 'issue_refund(7)', 'send_email(7)'])
  } finally {
    await fake.close()
  }
})

test('streamText: the same guarantees while streaming', async () => {
  const fake = await ScriptedOpenAI.start(MISBEHAVING)
  const ran = []
  try {
    const run = orchestrate(compile(COGNITIVE).session(), researchTools(ran))
    const openai = createOpenAI({ baseURL: fake.baseURL, apiKey: 'not-a-key' })
    run.onUserMessage(MISBEHAVING_QUESTION)
    const result = streamText({
      model: run.model(openai.chat('fake')),
      prompt: MISBEHAVING_QUESTION,
      stopWhen: stepCountIs(20),
      ...run.settings(),
    })
    let streamed = ''
    for await (const delta of result.textStream) streamed += delta
    assert.equal(streamed, 'AI changes jobs: see the analysis.')
    assert.deepEqual(ran, ['search', 'think', 'reflect'])
    assert.equal(run.session.sequenceIndex, 3)
    // Forced steps were asked plainly (and corrected); the free ones streamed.
    assert.deepEqual(
      fake.requests.map((r, i) => [fake.toolChoice(i) ?? 'auto', r.stream === true]),
      [
        ['search', false], ['search', false], ['search', false], ['search', false], ['search', false],
        ['think', false], ['reflect', false], ['auto', true], ['auto', true],
      ],
    )
    assert.match(fake.toolResults(1)[0], /`think` was not run/)
  } finally {
    await fake.close()
  }
})

// A research agent on the Vercel AI SDK under orch: the cognitive reasoner's template
// decides which tools each model call is offered, forces the one its sequence expects,
// and refuses what the workflow does not allow before it runs.
//
//   node examples/research-agent.mjs ["your question"]
//
// With OPENAI_API_KEY set it talks to OpenAI (OPENAI_MODEL, default gpt-4.1-mini);
// without, to a scripted model on a loopback port that misbehaves on purpose (a tool out
// of order, text while a tool is forced), so the run shows orch correcting it.
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createOpenAI } from '@ai-sdk/openai'
import { generateText, stepCountIs, tool } from 'ai'
import { z } from 'zod'
import { compile } from '@orch/core'
import { orchestrate } from '@orch/core/ai-sdk'
import { call, ScriptedOpenAI } from '@orch/core/testing'

const here = dirname(fileURLToPath(import.meta.url))
const templatePath =
  process.env.ORCH_TEMPLATE ?? join(here, '..', '..', 'examples', 'agents', 'cognitive-reasoner', 'template.json')
const question = process.argv[2] ?? 'Research how many moons Jupiter has'

// The host's tools (a real agent would search the web, call a model to think, ...).
const say = (name) =>
  tool({
    description: `The ${name} tool: ${name}s about the input.`,
    inputSchema: z.object({ input: z.string() }),
    execute: async ({ input }) => {
      console.log(`  ran ${name}(${JSON.stringify(input)})`)
      return `${name} result for ${input}`
    },
  })
const tools = Object.fromEntries(
  ['search', 'think', 'reflect', 'compare', 'critique', 'brainstorm', 'debate'].map((n) => [n, say(n)]),
)

let fake
let model
if (process.env.OPENAI_API_KEY) {
  model = createOpenAI()(process.env.OPENAI_MODEL ?? 'gpt-4.1-mini')
} else {
  fake = await ScriptedOpenAI.start([
    call('think', '{"input": "before searching"}'),
    call('search', '{"input": "moons of Jupiter"}'),
    'Jupiter has many moons.',
    call('think', '{"input": "how many are confirmed"}'),
    call('reflect', '{"input": "95 confirmed moons"}'),
    'Jupiter has 95 confirmed moons (search, think, reflect).',
  ])
  model = createOpenAI({ baseURL: fake.baseURL, apiKey: 'offline' }).chat('scripted')
  console.log('(no OPENAI_API_KEY: a scripted model that misbehaves on purpose)')
}

const machine = compile(readFileSync(templatePath, 'utf8'), { path: templatePath })
const run = orchestrate(machine.session(), tools, {
  onRefusal: (refusal) => console.log(`  refused ${refusal.tool}: ${refusal.message}`),
})
run.onUserMessage(question)
console.log(`question: ${question}\nstep: ${run.session.step}; allowed: ${run.session.allowed().join(', ')}`)
try {
  const result = await generateText({
    model: run.model(model),
    system: 'Answer with the tools you are offered.',
    prompt: question,
    stopWhen: stepCountIs(12),
    ...run.settings(),
  })
  console.log(`ran: ${run.executed.join(' → ')}`)
  console.log(`step: ${run.session.step}, sequence at ${run.session.sequenceIndex}`)
  console.log(`answer: ${result.text}`)
} finally {
  await fake?.close()
}

// The workloads both benchmarks run (agentdock_compare.mjs against AgentDock's logic in
// this directory, agentdock_own.mjs against AgentDock's own code), on the cognitive
// reasoner (examples/agents/cognitive-reasoner):
//   - the research turn: a user message (cycling through six requests that select six
//     modes) and three tool calls, each preceded by the allowed-tools query a host makes
//     before a model call and followed by recording it;
//   - the plain turn: the allowed tools, then recording the first of them, over 10,000
//     sessions taken in turn, after one user message each (not timed).
// A manager side (AgentDock's, or orch's drop-in) does `getAllowedTools` and
// `processToolUsage`; a sessions side `allowed()`, `check` and `record`.
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
export const TEMPLATE = readFileSync(join(here, '..', '..', 'examples', 'agents', 'cognitive-reasoner', 'template.json'), 'utf8')
export const { orchestration: ORCHESTRATION, tools: TOOLS } = JSON.parse(TEMPLATE)
export const MESSAGES = [
  'Research how many moons Jupiter has',
  'Critique this plan and give your opinion',
  'Compare Rust and Go for network services',
  'How can I solve this scheduling problem?',
  "Let's brainstorm names for the product",
  'Debate whether remote work is better',
]
/** How many sessions the plain turn takes in turn. */
export const SESSIONS = 10_000
const PLAIN_MESSAGE = "Let's think about it"

/** The research turn on a manager; `offered` collects the first turns' allowed tools. */
export async function researchManager(manager, turns, offered) {
  // Compiling the template is once per process, not per turn: done before the clock.
  manager.machine?.(ORCHESTRATION)
  const start = process.hrtime.bigint()
  for (let turn = 0; turn < turns; turn++) {
    const messages = [{ role: 'user', content: MESSAGES[turn % MESSAGES.length] }]
    for (let i = 0; i < 3; i++) {
      const allowed = await manager.getAllowedTools(ORCHESTRATION, messages, 's', TOOLS)
      await manager.processToolUsage(ORCHESTRATION, messages, 's', allowed[0])
      if (offered && turn < MESSAGES.length) offered.push(allowed)
    }
  }
  return Number(process.hrtime.bigint() - start) / turns
}

/** The research turn on orch's sessions: message, then allowed / check / record. */
export function researchSessions(engine, turns, offered) {
  const session = engine.compile(TEMPLATE).session()
  const start = process.hrtime.bigint()
  for (let turn = 0; turn < turns; turn++) {
    session.onUserMessage(MESSAGES[turn % MESSAGES.length])
    for (let i = 0; i < 3; i++) {
      const allowed = session.allowed()
      const tool = allowed[0]
      if (session.check(tool) === null) session.record(tool)
      if (offered && turn < MESSAGES.length) offered.push(allowed)
    }
  }
  return Number(process.hrtime.bigint() - start) / turns
}

/** The plain turn on a manager: `getAllowedTools`, then `processToolUsage` of the first. */
export async function plainManager(manager, turns) {
  manager.machine?.(ORCHESTRATION)
  const messages = [{ role: 'user', content: PLAIN_MESSAGE }]
  for (let s = 0; s < SESSIONS; s++) await manager.getAllowedTools(ORCHESTRATION, messages, `s${s}`, TOOLS)
  const start = process.hrtime.bigint()
  for (let turn = 0; turn < turns; turn++) {
    const id = `s${turn % SESSIONS}`
    const allowed = await manager.getAllowedTools(ORCHESTRATION, messages, id, TOOLS)
    await manager.processToolUsage(ORCHESTRATION, messages, id, allowed[0])
  }
  return Number(process.hrtime.bigint() - start) / turns
}

/** The plain turn on orch's sessions: `allowed()`, then `record()` of the first. */
export function plainSessions(engine, turns) {
  const machine = engine.compile(TEMPLATE)
  const sessions = []
  for (let s = 0; s < SESSIONS; s++) {
    const session = machine.session()
    session.onUserMessage(PLAIN_MESSAGE)
    sessions.push(session)
  }
  const start = process.hrtime.bigint()
  for (let turn = 0; turn < turns; turn++) {
    const session = sessions[turn % SESSIONS]
    session.record(session.allowed()[0])
  }
  return Number(process.hrtime.bigint() - start) / turns
}

/** The fastest of `runs` runs of `run` (nanoseconds per turn). */
export async function best(run, runs = 5) {
  let ns = Infinity
  for (let r = 0; r < runs; r++) ns = Math.min(ns, await run())
  return ns
}

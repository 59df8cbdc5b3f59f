// Per-turn cost of orch's npm package — the native addon and the WebAssembly build, in
// one run — against AgentDock's orchestration logic in TypeScript (agentdock-reference.mjs)
// on the same workload (docs/typescript.md, "Performance").
//
// The workload is the cognitive reasoner (examples/agents/cognitive-reasoner): each turn
// is a user message (cycling through six requests that select six modes) and three tool
// calls, each preceded by the allowed-tools query a host makes before a model call and
// followed by recording it. Sides:
//   - AgentDock's manager over its memory storage (state objects kept as given), and over
//     a storage that serialises (as Redis or a database does);
//   - orch's AgentDock drop-in (`@orch/core/agentdock`), same calls, same storages;
//   - orch's session API directly (`allowed`, `check`, `record`): what the AI SDK adapter
//     uses.
// Run after a release build of both (orch-node/): `npm run build && npm run build:wasm`,
// then `node bench/agentdock_compare.mjs [turns]`.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createOrchestrationManager } from '../dist/agentdock.mjs'
import { ReferenceOrchestrationManager, SerializingStorage, SharedStorage } from './agentdock-reference.mjs'

const here = dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const TEMPLATE = readFileSync(join(here, '..', '..', 'examples', 'agents', 'cognitive-reasoner', 'template.json'), 'utf8')
const { orchestration: ORCHESTRATION, tools: TOOLS } = JSON.parse(TEMPLATE)
const MESSAGES = [
  'Research how many moons Jupiter has',
  'Critique this plan and give your opinion',
  'Compare Rust and Go for network services',
  'How can I solve this scheduling problem?',
  'Let\'s brainstorm names for the product',
  'Debate whether remote work is better',
]

// Each engine as the package hands it out: with the fast path of `main.cjs`.
const { installFastPath } = require('../main.cjs')
const engines = { native: installFastPath(require('../index.js')) }
try {
  engines.wasm = installFastPath(require('../orch.wasi.cjs'))
} catch (e) {
  console.error(`the WebAssembly build is missing (npm run build:wasm): ${e.message}`)
  process.exit(1)
}

/** A manager-shaped side: `getAllowedTools` then `processToolUsage`, three times a turn. */
async function managerTurns(manager, turns, offered) {
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

/** orch's session API: message, then allowed / check / record three times a turn. */
function sessionTurns(engine, turns, offered) {
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

async function bestOf(run, turns, runs = 5) {
  const offered = []
  let best = Infinity
  for (let r = 0; r < runs; r++) best = Math.min(best, await run(turns, r === 0 ? offered : undefined))
  return { ns: best, offered }
}

const turns = Number(process.argv[2] ?? 20000)
const rows = []
const add = async (name, run) => rows.push({ name, ...(await bestOf(run, turns)) })

await add('AgentDock logic, memory storage', (n, o) => managerTurns(new ReferenceOrchestrationManager(new SharedStorage()), n, o))
await add('AgentDock logic, serialising storage', (n, o) =>
  managerTurns(new ReferenceOrchestrationManager(new SerializingStorage()), n, o),
)
for (const [name, engine] of Object.entries(engines)) {
  await add(`orch drop-in (${name}), memory storage`, (n, o) =>
    managerTurns(createOrchestrationManager({ engine, storageProvider: new SharedStorage() }), n, o),
  )
  await add(`orch drop-in (${name}), serialising storage`, (n, o) =>
    managerTurns(createOrchestrationManager({ engine, storageProvider: new SerializingStorage() }), n, o),
  )
  await add(`orch sessions (${name})`, (n, o) => sessionTurns(engine, n, o))
}

// The plainest turn: the allowed tools, then recording the first of them — over 10,000
// sessions taken in turn, after one user message each (not timed).
const SESSIONS = 10_000
async function plainManagerTurns(manager, turns) {
  manager.machine?.(ORCHESTRATION)
  const messages = [{ role: 'user', content: 'Let\'s think about it' }]
  for (let s = 0; s < SESSIONS; s++) await manager.getAllowedTools(ORCHESTRATION, messages, `s${s}`, TOOLS)
  const start = process.hrtime.bigint()
  for (let turn = 0; turn < turns; turn++) {
    const id = `s${turn % SESSIONS}`
    const allowed = await manager.getAllowedTools(ORCHESTRATION, messages, id, TOOLS)
    await manager.processToolUsage(ORCHESTRATION, messages, id, allowed[0])
  }
  return Number(process.hrtime.bigint() - start) / turns
}
function plainSessionTurns(engine, turns) {
  const machine = engine.compile(TEMPLATE)
  const sessions = []
  for (let s = 0; s < SESSIONS; s++) {
    const session = machine.session()
    session.onUserMessage('Let\'s think about it')
    sessions.push(session)
  }
  const start = process.hrtime.bigint()
  for (let turn = 0; turn < turns; turn++) {
    const session = sessions[turn % SESSIONS]
    session.record(session.allowed()[0])
  }
  return Number(process.hrtime.bigint() - start) / turns
}
const plain = []
const best = async (run, n) => {
  let ns = Infinity
  for (let r = 0; r < 5; r++) ns = Math.min(ns, await run(n))
  return ns
}
plain.push({ name: 'AgentDock logic, memory storage', ns: await best((n) => plainManagerTurns(new ReferenceOrchestrationManager(new SharedStorage()), n), turns) })
for (const [name, engine] of Object.entries(engines)) {
  plain.push({ name: `orch sessions (${name})`, ns: await best((n) => plainSessionTurns(engine, n), turns * 10) })
}

const base = rows[0]
console.log(`workload: the cognitive reasoner, ${turns} turns of a message and 3 tool calls (best of 5), node ${process.version}`)
console.log(`${''.padEnd(42)} ${'µs/turn'.padStart(8)}  cost vs AgentDock (memory)`)
for (const row of rows) {
  const agrees = row.offered.every((a, i) => JSON.stringify(a) === JSON.stringify(base.offered[i]))
  console.log(
    `${row.name.padEnd(42)} ${(row.ns / 1000).toFixed(2).padStart(8)}  ${(row.ns / base.ns).toFixed(2).padStart(5)}×  offered tools ${agrees ? 'agree' : 'DIFFER'}`,
  )
}

console.log(`\nthe plain turn: allowed tools, then record the first; ${SESSIONS} sessions in turn (best of 5)`)
console.log(`${''.padEnd(42)} ${'µs/turn'.padStart(8)}  AgentDock's time / this side's`)
for (const row of plain) {
  console.log(`${row.name.padEnd(42)} ${(row.ns / 1000).toFixed(3).padStart(8)}  ${(plain[0].ns / row.ns).toFixed(1).padStart(6)}×`)
}

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
import { createRequire } from 'node:module'
import { createOrchestrationManager } from '../dist/agentdock.mjs'
import { ReferenceOrchestrationManager, SerializingStorage, SharedStorage } from './agentdock-reference.mjs'
import { best, plainManager, plainSessions, researchManager, researchSessions, SESSIONS } from './workloads.mjs'

const require = createRequire(import.meta.url)

// Each engine as the package hands it out: with the fast path of `main.cjs`.
const { installFastPath } = require('../main.cjs')
const engines = { native: installFastPath(require('../index.js')) }
try {
  engines.wasm = installFastPath(require('../orch.wasi.cjs'))
} catch (e) {
  console.error(`the WebAssembly build is missing (npm run build:wasm): ${e.message}`)
  process.exit(1)
}

async function bestOf(run, turns, runs = 5) {
  const offered = []
  let fastest = Infinity
  for (let r = 0; r < runs; r++) fastest = Math.min(fastest, await run(turns, r === 0 ? offered : undefined))
  return { ns: fastest, offered }
}

const turns = Number(process.argv[2] ?? 20000)
const rows = []
const add = async (name, run) => rows.push({ name, ...(await bestOf(run, turns)) })

await add('AgentDock logic, memory storage', (n, o) => researchManager(new ReferenceOrchestrationManager(new SharedStorage()), n, o))
await add('AgentDock logic, serialising storage', (n, o) =>
  researchManager(new ReferenceOrchestrationManager(new SerializingStorage()), n, o),
)
for (const [name, engine] of Object.entries(engines)) {
  await add(`orch drop-in (${name}), memory storage`, (n, o) =>
    researchManager(createOrchestrationManager({ engine, storageProvider: new SharedStorage() }), n, o),
  )
  await add(`orch drop-in (${name}), serialising storage`, (n, o) =>
    researchManager(createOrchestrationManager({ engine, storageProvider: new SerializingStorage() }), n, o),
  )
  await add(`orch sessions (${name})`, (n, o) => researchSessions(engine, n, o))
}

// The plainest turn (workloads.mjs): over 10,000 sessions taken in turn.
const plain = []
plain.push({ name: 'AgentDock logic, memory storage', ns: await best(() => plainManager(new ReferenceOrchestrationManager(new SharedStorage()), turns)) })
for (const [name, engine] of Object.entries(engines)) {
  plain.push({ name: `orch sessions (${name})`, ns: await best(() => plainSessions(engine, turns * 10)) })
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

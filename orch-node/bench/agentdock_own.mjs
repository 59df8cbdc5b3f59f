// orch against AgentDock's own orchestration code, built from its repository (not
// shipped here: AgentDock is not published on npm, and its code is its own). Build it
// once, outside this repository (docs/typescript.md, "Against AgentDock's own code"):
//
//   git clone https://github.com/AgentDock/AgentDock && cd AgentDock
//   printf '%s\n' "export * from './agentdock-core/src/orchestration'" \
//     "export { MemoryStorageProvider } from './agentdock-core/src/storage/providers/memory-provider'" \
//     "export { logger, LogLevel } from './agentdock-core/src/logging'" > orch-bench-entry.ts
//   npm install esbuild@0.25 @upstash/redis@1 @vercel/kv@1 @ai-sdk/anthropic@1 @ai-sdk/google@1 \
//     @ai-sdk/groq@1 @ai-sdk/openai@1 @anthropic-ai/sdk@0.36.3 @google/generative-ai@0.24 ai@4.2.0 openai@4 zod@3
//   npx esbuild orch-bench-entry.ts --bundle --platform=node --format=esm --packages=external \
//     --outfile=orch-bench-agentdock.mjs
//
// then, after a release build here (`npm run build && npm run build:wasm`):
//
//   node bench/agentdock_own.mjs /path/to/AgentDock/orch-bench-agentdock.mjs [turns]
//
// Workloads, on the cognitive reasoner (examples/agents/cognitive-reasoner):
//   - the plain turn: the allowed tools, then recording the first of them, over 10,000
//     sessions taken in turn after one user message each (not timed). AgentDock:
//     `getAllowedTools` then `processToolUsage` on its manager over its own
//     `MemoryStorageProvider`; orch: `allowed()` then `record()` on a session (native and
//     WebAssembly), and the same two calls on orch's AgentDock drop-in over the same
//     storage class.
//   - the research turn of `agentdock_compare.mjs`: a user message and three tool calls,
//     each after an allowed-tools query.
// AgentDock's logger prints every `debug` call by default; the bench sets it to errors
// only (what a deployment would do), which is the cheapest AgentDock gets.
// AgentDock's own code knows neither message conditions nor sequence groups: it does
// less work than orch on this template (it stays in its default step where orch follows
// the user's request), so its figure is a lower bound of what the same work costs it.
import { createRequire } from 'node:module'
import { resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { createOrchestrationManager } from '../dist/agentdock.mjs'
import { best, plainManager, plainSessions, researchManager, researchSessions, SESSIONS } from './workloads.mjs'

const require = createRequire(import.meta.url)
const built = process.argv[2]
if (!built) {
  console.error('usage: node bench/agentdock_own.mjs <AgentDock built as one module (see the header)> [turns]')
  process.exit(2)
}
const agentdock = await import(pathToFileURL(resolve(built)).href)
agentdock.logger.setLogLevel(agentdock.LogLevel.ERROR)

const { installFastPath } = require('../main.cjs')
const engines = { native: installFastPath(require('../index.js')), wasm: installFastPath(require('../orch.wasi.cjs')) }

const agentdockManager = () =>
  agentdock.createOrchestrationManager({ storageProvider: new agentdock.MemoryStorageProvider({ namespace: 'bench' }) })
const dropIn = (engine) =>
  createOrchestrationManager({ engine, storageProvider: new agentdock.MemoryStorageProvider({ namespace: 'bench' }) })

const turns = Number(process.argv[3] ?? 20000)
const ROWS = {
  'plain:agentdock': () => best(() => plainManager(agentdockManager(), turns)),
  'plain:drop-in:native': () => best(() => plainManager(dropIn(engines.native), turns)),
  'plain:sessions:native': () => best(() => plainSessions(engines.native, turns * 10)),
  'plain:drop-in:wasm': () => best(() => plainManager(dropIn(engines.wasm), turns)),
  'plain:sessions:wasm': () => best(() => plainSessions(engines.wasm, turns * 10)),
  'research:agentdock': () => best(() => researchManager(agentdockManager(), turns)),
  'research:drop-in:native': () => best(() => researchManager(dropIn(engines.native), turns)),
  'research:sessions:native': () => best(() => researchSessions(engines.native, turns)),
  'research:drop-in:wasm': () => best(() => researchManager(dropIn(engines.wasm), turns)),
  'research:sessions:wasm': () => best(() => researchSessions(engines.wasm, turns)),
}
const NAMES = {
  agentdock: "AgentDock's own code, its memory storage",
  'drop-in:native': 'orch drop-in (native), the same storage',
  'sessions:native': 'orch sessions (native)',
  'drop-in:wasm': 'orch drop-in (wasm), the same storage',
  'sessions:wasm': 'orch sessions (wasm)',
}

const row = process.argv[4]
if (row !== undefined) {
  // One side in this process (a fresh heap: AgentDock's storages keep cleanup timers,
  // so their sessions would stay alive and slow the sides measured after them).
  console.log(JSON.stringify({ ns: await ROWS[row]() }))
  process.exit(0)
}
const { execFileSync } = await import('node:child_process')
const measure = (name) => {
  const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), built, String(turns), name], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  return JSON.parse(out.trim().split('\n').pop()).ns
}
console.log(`node ${process.version}; best of 5, each side in a process of its own`)
for (const workload of ['plain', 'research']) {
  console.log(
    workload === 'plain'
      ? `\nthe plain turn: allowed tools, then record the first; ${SESSIONS} sessions in turn`
      : '\nthe research turn: a message and three tool calls',
  )
  console.log(`${''.padEnd(44)} ${'µs/turn'.padStart(8)}  AgentDock's time / this side's`)
  let base
  for (const side of Object.keys(NAMES)) {
    const ns = measure(`${workload}:${side}`)
    base ??= ns
    console.log(`${NAMES[side].padEnd(44)} ${(ns / 1000).toFixed(3).padStart(8)}  ${(base / ns).toFixed(1).padStart(6)}×`)
  }
}
// AgentDock's storage and state managers keep cleanup timers: the process ends here.
process.exit(0)

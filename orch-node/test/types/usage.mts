// Type-checked (not run) against the installed package by scripts/ci.mjs: the
// generated declarations and the adapters' declarations describe the API as used.
import { generateText, stepCountIs, tool } from 'ai'
import { z } from 'zod'
import { check, compile, resultKind, SnapshotError, TemplateError, type Diagnostic, type Finding, type Machine, type Outcome, type Refusal, type RefusalKind, type ResultKind, type Session, type Verdict } from '@orch/core'
import { orchestrate, OrchRefusalError } from '@orch/core/ai-sdk'
import { createOrchestrationManager, MemoryStorageProvider } from '@orch/core/agentdock'
import { ScriptedOpenAI, call } from '@orch/core/testing'

const machine: Machine = compile('{}', { path: 'a.json', proveProperties: false })
const observing: 'enforce' | 'observe' = compile('{}', { mode: 'observe' }).mode
const found: Diagnostic[] = check('{}')
const line: number | undefined = found[0]?.line ?? undefined
const session: Session = machine.session(['search'])
const sessionMode: 'enforce' | 'observe' = session.mode
const refusal: Refusal | null = session.check('search')
const kind:
  | 'not_allowed'
  | 'out_of_sequence'
  | 'broken_rule'
  | 'unknown_tool'
  | 'unavailable'
  | 'needs_approval'
  | 'rejected'
  | 'stale_answer'
  | 'busy'
  | 'outcome_unknown'
  | 'already_ran'
  | undefined = refusal?.kind
const question: string = session.ask('search', '{}')
const applied: boolean = session.answer('search', '{}', question, true)
const begun: { action: 'run' | 'refused' | 'ask' | 'again'; refusal?: Refusal | null; question?: string | null } = session.begin('c1', 'search', '{}')
const answeredCall: 'applied' | 'repeated' | 'late' | 'foreign' | 'unknown' = session.answerCall('c1', 'search', '{}', true).outcome
const finished: string = session.finish('c1', 'search', true)
const told: string = session.reminder('search')
session.setQuestionTtl(60)
const own: Refusal[] = [session.sharedId('search', 'c1'), session.noSuchTool('x'), session.malformedArguments('search', 'bad')]
const forced: string | null | undefined = session.forcedTool
const ran: 'ran' | 'error' | 'input_required' | 'task' | 'other' | 'malformed' = resultKind('{}')
// The kinds are named string unions (napi string enums): compared with plain strings.
const named: RefusalKind | undefined = refusal?.kind
const isHeld: boolean = named === 'outcome_unknown'
const kindOfResult: ResultKind = ran
const verdict: Verdict | undefined = session.approval?.verdict
const outcome: 'advanced' | 'completed' | 'free' | 'out_of_sequence' | 'not_allowed' = session.record('search')
const typedOutcome: Outcome = outcome
const withResult: Outcome = session.record('search', '{"hits": []}')
const brokenRule: string | null | undefined = refusal?.rule
const bytes: Uint8Array = session.snapshot()
const again: Session = machine.restore(bytes)
const findings: Finding[] = machine.verify({ maxStates: 10 })
const reachable: boolean | null | undefined = findings[0]?.reachable

const tools = { search: tool({ inputSchema: z.object({ q: z.string() }), execute: async ({ q }) => q }) }
const run = orchestrate(again, tools, { onRefusal: (r: Refusal) => void r.message })
const fake = await ScriptedOpenAI.start([call('search', '{"q":"x"}'), 'done'])
void generateText({ model: run.model(null as never), prompt: 'x', stopWhen: stepCountIs(3), ...run.settings() })
const err: Error = new OrchRefusalError({ tool: 't', kind: 'not_allowed', message: 'm' })
const manager = createOrchestrationManager({ storageProvider: new MemoryStorageProvider() })
const allowed: Promise<string[]> = manager.getAllowedTools({ steps: [] }, [], 's', ['search'])
let caught: Diagnostic[] = []
try {
  compile('{')
} catch (e) {
  if (e instanceof TemplateError) caught = e.diagnostics
  else if (e instanceof SnapshotError) caught = []
}
void [line, kind, outcome, reachable, fake, err, allowed, applied, forced, ran, caught, named, isHeld, kindOfResult, verdict, typedOutcome, withResult, brokenRule, begun, answeredCall, finished, told, own]

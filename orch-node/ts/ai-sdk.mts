/**
 * orch for the Vercel AI SDK (`ai` 7): a workflow session decides, at every step of
 * `generateText` / `streamText`, which tools the model is offered and whether one is
 * forced, and judges every call before its `execute` runs.
 *
 * ```ts
 * import { compile } from '@orch/core'
 * import { orchestrate } from '@orch/core/ai-sdk'
 *
 * const run = orchestrate(compile(templateJson).session(), tools)
 * run.onUserMessage(prompt)
 * const result = await generateText({
 *   model: run.model(openai('gpt-4.1')),
 *   prompt,
 *   stopWhen: stepCountIs(20),
 *   ...run.settings(),   // tools, prepareStep, toolApproval
 * })
 * ```
 *
 * - `prepareStep` returns the step's allowed tools as `activeTools`, and forces
 *   `toolChoice` to the one tool a sequence expects when it is the only one allowed.
 * - Every tool's `execute` is wrapped: the call is admitted by the session first (one
 *   call of a run at a time, in the order the model made them), refused calls never run
 *   and the model gets orch's words as the tool's error, and a call that ran is
 *   recorded.
 * - The AI SDK fails a step whose reply does not call the tool `toolChoice` forces
 *   (`ToolChoiceViolationError`). `run.model(m)` keeps a model to the forced tool: a call
 *   of another tool is answered with its refusal in orch's words, text with a reminder,
 *   and the model is asked again within the same step.
 * - Tools the template gates behind a human's approval map onto the SDK's tool
 *   approvals (`toolApproval`): the call pauses as a `tool-approval-request` and the
 *   session holds a question bound to the call's id; when the next call brings an
 *   approving `tool-approval-response`, it answers that question, and the call runs
 *   once; a denied one never runs; the same approval sent again (a retried POST, a
 *   second tab) runs nothing: the call ran already.
 * - Every call's life — judged, asked, answered, run, recorded, delivered again — is
 *   orch's run host (`Session.begin`, `answerCall`, `finish`); this module only maps
 *   the AI SDK's objects onto it.
 *
 * @module
 */
import { simulateStreamingMiddleware, wrapLanguageModel } from 'ai'
import type {
  LanguageModel,
  LanguageModelMiddleware,
  ModelMessage,
  PrepareStepFunction,
  PrepareStepResult,
  ToolApprovalStatus,
  ToolSet,
} from 'ai'
import type { Refusal, Session } from '../index.js'
import { Serial } from './serial.mjs'

/** How many times a model that answers with text while a tool is forced is reminded. */
export const REMINDERS = 1

/** How many extra model calls one step may spend on replies that do not call the forced
 * tool (refusals and reminders) before the SDK gets the last reply. */
export const CORRECTIONS = 8

/** The error a refused call's `execute` throws: the model receives its message (orch's
 * words: what was refused, what is expected, what is allowed now). */
export class OrchRefusalError extends Error {
  /** The refusal, as the session gave it. */
  readonly refusal: Refusal

  constructor(refusal: Refusal) {
    super(refusal.message)
    this.name = 'OrchRefusalError'
    this.refusal = refusal
  }
}

/** The text a model gets when it answered while `tool` was forced: orch's own words,
 * the same on every surface (`Session.reminder`). */
export function reminder(session: Session, tool: string): string {
  return session.reminder(tool)
}

/** Does this exact call wait for a human's answer (a gated tool, no verdict on it)? An
 * approval the conversation carries is orch's to apply only then. */
function gated(session: Session, tool: string, args: string): boolean {
  return session.checkCall(tool, args)?.kind === 'needs_approval'
}

/** The approval function `generateText` accepts (`toolApproval`). */
export type ToolApproval = (options: {
  toolCall: { toolName: string; input: unknown; toolCallId: string }
}) => ToolApprovalStatus | PromiseLike<ToolApprovalStatus>

/** What a middleware's `wrapGenerate` is given. */
type Generate = Parameters<NonNullable<LanguageModelMiddleware['wrapGenerate']>>[0]
/** A model call's reply. */
type Generated = Awaited<ReturnType<Generate['doGenerate']>>

/** What to spread into `generateText` / `streamText` / `ToolLoopAgent`. */
export type Settings<TOOLS extends ToolSet> = {
  tools: TOOLS
  prepareStep: PrepareStepFunction<TOOLS>
  toolApproval: ToolApproval
}

/** Options of {@link orchestrate}. */
export type OrchestrateOptions = {
  /** Consulted for calls the template does not gate (default: none need approval). */
  toolApproval?: ToolApproval
  /** Told of every call orch refuses (to log or count them), before the model is. */
  onRefusal?: (refusal: Refusal) => void
}

/** The arguments of a call as the session digests them. */
function argsText(input: unknown): string {
  return JSON.stringify(input ?? {})
}

/** JSON with object keys sorted: two inputs that are the same call print the same. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value as object).sort()
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`
  }
  return JSON.stringify(value ?? null)
}

/** The tool calls in the conversation that carry the id `toolCallId` (more than one when
 * a model reused an id). */
export function callsNamed(
  messages: readonly ModelMessage[],
  toolCallId: string,
): { toolName: string; input: unknown }[] {
  const calls: { toolName: string; input: unknown }[] = []
  for (const m of messages) {
    if (m.role !== 'assistant' || typeof m.content === 'string') continue
    for (const part of m.content) {
      if (part.type === 'tool-call' && part.toolCallId === toolCallId) {
        calls.push({ toolName: part.toolName, input: part.input })
      }
    }
  }
  return calls
}

/** Did the conversation approve this very call — `toolName` with `input`, under the id
 * `toolCallId` (an approving `tool-approval-response` to the `tool-approval-request` that
 * names it)? Only when the id names exactly one call in the conversation, and that call
 * is this one: a human's approval is of the call they were shown, never of another
 * call that reuses its id. */
export function approvedIn(
  messages: readonly ModelMessage[],
  toolCallId: string,
  toolName?: string,
  input?: unknown,
): boolean {
  const calls = callsNamed(messages, toolCallId)
  if (toolName !== undefined) {
    const shown = calls.length === 1 ? calls[0] : undefined
    if (shown === undefined) return false
    if (shown.toolName !== toolName || canonical(shown.input) !== canonical(input ?? {})) return false
  }
  const requests = new Set<string>()
  for (const m of messages) {
    if (m.role !== 'assistant' || typeof m.content === 'string') continue
    for (const part of m.content) {
      if (part.type === 'tool-approval-request' && part.toolCallId === toolCallId) {
        requests.add(part.approvalId)
      }
    }
  }
  if (requests.size === 0) return false
  for (const m of messages) {
    if (m.role !== 'tool') continue
    for (const part of m.content) {
      if (part.type === 'tool-approval-response' && requests.has(part.approvalId)) {
        return part.approved
      }
    }
  }
  return false
}

/** One workflow run driven through the AI SDK. */
export class Orchestration<TOOLS extends ToolSet> {
  /** The session: the workflow's state. Snapshot it between turns to keep a run. */
  readonly session: Session
  /** The wrapped tools: pass these (not the originals) to the SDK. */
  readonly tools: TOOLS
  /** The tools that ran, in order (what the session recorded). */
  readonly executed: string[] = []
  private readonly options: OrchestrateOptions
  private readonly turns = new Serial()
  /** Which request (`settings()` call) this is: an answer the conversation carried into
   * a request can only be of a question asked in an earlier one. */
  private request = 0
  /** The request in which each call (by id) was asked about here. */
  private readonly askedIn = new Map<string, number>()

  constructor(session: Session, tools: TOOLS, options: OrchestrateOptions = {}) {
    this.session = session
    this.options = options
    // The SDK's tools are the host's: names the template does not declare are foreign
    // tools, judged by the step's patterns.
    session.setAvailable(Object.keys(tools))
    const wrapped: Record<string, unknown> = {}
    for (const [name, tool] of Object.entries(tools)) {
      const original = tool.execute
      if (original === undefined) {
        wrapped[name] = tool
        continue
      }
      wrapped[name] = {
        ...tool,
        execute: (input: unknown, options: { toolCallId: string; messages: ModelMessage[] }) =>
          // One call of the run at a time: admitted, run and recorded before the next.
          this.turns.run(async () => {
            const args = argsText(input)
            if (callsNamed(options.messages, options.toolCallId).length > 1) {
              // Two calls under one id: an approval or a result could be taken for the
              // other one. Neither runs.
              const duplicate: Refusal = this.session.sharedId(name, options.toolCallId)
              this.options.onRefusal?.(duplicate)
              throw new OrchRefusalError(duplicate)
            }
            if (
              gated(this.session, name, args) &&
              approvedIn(options.messages, options.toolCallId, name, input)
            ) {
              // The human's answer, as the conversation carries it: it applies once, to
              // the question the session asked about this very call (a replayed request
              // finds it answered, and nothing runs twice). The SDK checks an approved
              // call with `toolApproval` again before it executes it; a question that
              // check had to ask anew (the run had none: the call ran already, or the run
              // was restored from a later state) was asked in this very request, after
              // the answer was written: the answer is not of it.
              const stale = this.askedIn.get(options.toolCallId) === this.request
              // Once answered (or refused), the session and its ledger know the call.
              this.askedIn.delete(options.toolCallId)
              const answered = stale
                ? { refusal: this.session.staleAnswer(name) }
                : this.session.answerCall(options.toolCallId, name, args, true)
              if (answered.refusal) {
                this.options.onRefusal?.(answered.refusal)
                throw new OrchRefusalError(answered.refusal)
              }
            }
            // The SDK asks (`toolApproval`) before it executes: nothing is asked here.
            const begun = this.session.begin(options.toolCallId, name, args, false)
            if (begun.refusal) {
              this.options.onRefusal?.(begun.refusal)
              throw new OrchRefusalError(begun.refusal)
            }
            let output: unknown
            try {
              output = await (original as (i: unknown, o: unknown) => unknown)(input, options)
            } catch (e) {
              this.session.finish(options.toolCallId, name, false)
              throw e
            }
            this.session.finish(options.toolCallId, name)
            this.executed.push(name)
            return output
          }),
      }
    }
    this.tools = wrapped as TOOLS
  }

  /** Tells the session about the user's message (message conditions, sequence resets). */
  onUserMessage(text: string): void {
    this.session.onUserMessage(text)
  }

  /** The tool the next model call must call: the one a sequence expects, when it is the
   * only tool allowed now — and no human's question or rejection is held (the model must
   * then be free to answer). */
  forcedTool(): string | undefined {
    // The rule is orch's own (`Session.forcedTool`), the same on every surface.
    return this.session.forcedTool ?? undefined
  }


  /** `prepareStep`: the allowed tools as `activeTools`, and the forced tool, if any. */
  readonly prepareStep: PrepareStepFunction<TOOLS> = () => {
    const allowed = this.session.allowed()
    const activeTools = allowed.filter((t) => Object.hasOwn(this.tools, t))
    const forced = this.forcedTool()
    const step = forced === undefined ? { activeTools } : { activeTools, toolChoice: { type: 'tool', toolName: forced } }
    return step as PrepareStepResult<TOOLS>
  }

  /** `toolApproval`: a call of a tool the template gates asks a human (the session
   * holds the question); others are left to `options.toolApproval`, if any. */
  readonly toolApproval: ToolApproval = (options) => {
    const { toolName, input, toolCallId } = options.toolCall
    const args = argsText(input)
    if (gated(this.session, toolName, args)) {
      // The session holds a question bound to this call's id (a call asked about
      // already is not asked again).
      if (this.session.begin(toolCallId, toolName, args).action === 'ask') this.askedIn.set(toolCallId, this.request)
      return 'user-approval'
    }
    return this.options.toolApproval ? this.options.toolApproval(options) : 'not-applicable'
  }

  /** Everything `generateText` needs from orch: `tools`, `prepareStep`, `toolApproval`. */
  settings(): Settings<TOOLS> {
    // Call it once per request (each `generateText` / `streamText`).
    this.request += 1
    return { tools: this.tools, prepareStep: this.prepareStep, toolApproval: this.toolApproval }
  }

  /** `model`, kept to the forced tool inside each model call. The SDK treats a reply
   * that does not call the tool `toolChoice` forces as a `ToolChoiceViolationError`; this
   * wrapper answers such a reply before the SDK sees it and asks again: a call of
   * another tool gets that tool's refusal in orch's words (as its tool result), text
   * gets a reminder (at most `REMINDERS` times), all within `CORRECTIONS` extra model
   * calls. Only the reply that calls the forced tool reaches the SDK's steps. */
  model(model: Exclude<LanguageModel, string>): Exclude<LanguageModel, string> {
    const middleware: LanguageModelMiddleware = {
      specificationVersion: 'v4',
      wrapGenerate: ({ doGenerate, params, model: inner }) => this.corrected(doGenerate, params, inner),
      // A step that forces a tool has nothing to show a user while it streams (its reply
      // is a tool call): it is generated, corrected, then replayed as a stream.
      wrapStream: (options) => {
        const choice = options.params.toolChoice
        if (choice?.type !== 'tool') return options.doStream()
        const replay = simulateStreamingMiddleware()
        const doGenerate = () => this.corrected(options.doGenerate, options.params, options.model)
        if (replay.wrapStream === undefined) return options.doStream()
        return replay.wrapStream({ ...options, doGenerate })
      },
    }
    return wrapLanguageModel({ model: model as Parameters<typeof wrapLanguageModel>[0]['model'], middleware })
  }

  /** Why a call made while `forced` is forced does not run, in orch's words. */
  private refusalText(tool: string, forced: string): string {
    const refused = this.session.check(tool)
    if (refused === null) return reminder(this.session, forced)
    this.options.onRefusal?.(refused)
    return refused.message
  }

  /** The reply of a model call, kept to the tool it forces (see {@link model}). */
  private async corrected(
    doGenerate: Generate['doGenerate'],
    params: Generate['params'],
    inner: Generate['model'],
  ): Promise<Generated> {
    let result = await doGenerate()
    const choice = params.toolChoice
    const forced = choice?.type === 'tool' ? choice.toolName : undefined
    if (forced === undefined) return result
    let prompt = params.prompt
    let reminded = 0
    for (let i = 0; i < CORRECTIONS; i++) {
      const called = result.content.flatMap((part) => (part.type === 'tool-call' ? [part] : []))
      if (called.some((c) => c.toolName === forced)) break
      if (called.length === 0) {
        if (reminded >= REMINDERS) break
        reminded += 1
        const text = result.content.flatMap((part) =>
          part.type === 'text' ? [{ type: 'text' as const, text: part.text }] : [],
        )
        prompt = [
          ...prompt,
          { role: 'assistant', content: text },
          { role: 'user', content: [{ type: 'text', text: reminder(this.session, forced) }] },
        ]
      } else {
        prompt = [
          ...prompt,
          {
            role: 'assistant',
            content: called.map((c) => ({
              type: 'tool-call' as const,
              toolCallId: c.toolCallId,
              toolName: c.toolName,
              input: parsedOr(c.input),
            })),
          },
          {
            role: 'tool',
            content: called.map((c) => ({
              type: 'tool-result' as const,
              toolCallId: c.toolCallId,
              toolName: c.toolName,
              output: { type: 'error-text' as const, value: this.refusalText(c.toolName, forced) },
            })),
          },
        ]
      }
      result = await inner.doGenerate({ ...params, prompt })
    }
    return result
  }
}

/** A tool call's arguments as a value (the text itself when it is not JSON). */
function parsedOr(text: string): unknown {
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}

/** Drives `session` through the AI SDK with `tools` (the host's tools, by name). */
export function orchestrate<TOOLS extends ToolSet>(
  session: Session,
  tools: TOOLS,
  options: OrchestrateOptions = {},
): Orchestration<TOOLS> {
  return new Orchestration(session, tools, options)
}

/**
 * A scripted OpenAI-compatible chat-completions server on a loopback port (plain or
 * streamed replies), for testing
 * agents offline (orch's adapter tests and example use it): it answers each request
 * with the next scripted reply — tool calls or text — and keeps every request body, so
 * a test can check what each model call offered, forced and was told.
 *
 * ```ts
 * import { ScriptedOpenAI, call } from '@orch/core/testing'
 * const fake = await ScriptedOpenAI.start([call('search', '{"q":"moons"}'), 'Jupiter has 95 moons.'])
 * const openai = createOpenAI({ baseURL: fake.baseURL, apiKey: 'unused' })
 * // ... generateText({ model: openai.chat('fake'), ... })
 * fake.offered(0); fake.toolChoice(0); fake.toolResults(1)
 * await fake.close()
 * ```
 *
 * @module
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** One tool call of a scripted reply: the tool's name and its arguments as JSON text. */
export type ScriptedCall = readonly [name: string, args: string]

/** A scripted reply: text, or the tool calls of one model turn. */
export type Reply = string | readonly ScriptedCall[]

/** A reply that calls one tool (`args`: JSON text, default `{}`). */
export function call(name: string, args = '{}'): ScriptedCall[] {
  return [[name, args]]
}

/** A reply that calls several tools in one turn. */
export function calls(...pairs: ScriptedCall[]): ScriptedCall[] {
  return pairs
}

/** A chat-completions request body as the server received it. */
export type RequestBody = {
  messages?: Array<{ role: string; content?: unknown; tool_call_id?: string }>
  tools?: Array<{ function: { name: string } }>
  tool_choice?: string | { type: string; function?: { name: string } }
  [key: string]: unknown
}

/** A tool call as the API returns it. */
type ToolCallOut = { id: string; type: string; function: { name: string; arguments: string } }

/** The server. */
export class ScriptedOpenAI {
  /** Every request body, in order. */
  readonly requests: RequestBody[] = []
  /** What a client's `baseURL` must be (ends in `/v1`). */
  readonly baseURL: string
  private readonly replies: Reply[]
  private readonly server: Server

  private constructor(server: Server, replies: Reply[]) {
    this.server = server
    this.replies = replies
    const { port } = server.address() as AddressInfo
    this.baseURL = `http://127.0.0.1:${port}/v1`
  }

  /** Starts a server that answers with `replies`, in order ("(the script has ended)"
   * after the last). */
  static async start(replies: Reply[]): Promise<ScriptedOpenAI> {
    let fake: ScriptedOpenAI | undefined
    const server = createServer((req, res) => {
      if (fake !== undefined) fake.handle(req, res)
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, '127.0.0.1', () => resolve())
    })
    fake = new ScriptedOpenAI(server, [...replies])
    return fake
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      let body: RequestBody
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as RequestBody
      } catch {
        res.writeHead(400, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ error: { message: 'the request body is not JSON' } }))
        return
      }
      this.requests.push(body)
      const n = this.requests.length
      const reply = this.replies.shift() ?? '(the script has ended)'
      const message: { role: string; content: string | null; tool_calls?: ToolCallOut[] } =
        typeof reply === 'string'
          ? { role: 'assistant', content: reply }
          : {
              role: 'assistant',
              content: null,
              tool_calls: reply.map(([name, args], i) => ({
                id: `call_${n}_${i}`,
                type: 'function',
                function: { name, arguments: args },
              })),
            }
      const finish = typeof reply === 'string' ? 'stop' : 'tool_calls'
      const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }
      if (body.stream === true) {
        // Server-sent events, as the API streams: the reply in one delta, then the end.
        const chunk = (delta: unknown, finishReason: string | null, extra = {}) =>
          `data: ${JSON.stringify({
            id: `chatcmpl-${n}`,
            object: 'chat.completion.chunk',
            created: 0,
            model: 'fake',
            choices: [{ index: 0, delta, finish_reason: finishReason }],
            ...extra,
          })}\n\n`
        const delta =
          typeof reply === 'string'
            ? { role: 'assistant', content: reply }
            : { role: 'assistant', tool_calls: message.tool_calls?.map((c, index) => ({ index, ...c })) }
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.write(chunk(delta, null))
        res.write(chunk({}, finish, { usage }))
        res.end('data: [DONE]\n\n')
        return
      }
      const payload = JSON.stringify({
        id: `chatcmpl-${n}`,
        object: 'chat.completion',
        created: 0,
        model: 'fake',
        choices: [{ index: 0, message, finish_reason: finish }],
        usage,
      })
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(payload)
    })
  }

  /** The tool names request `i` offered. */
  offered(i: number): string[] {
    return (this.requests[i]?.tools ?? []).map((t) => t.function.name)
  }

  /** Request `i`'s `tool_choice`: the tool's name when forced, else as sent. */
  toolChoice(i: number): string | undefined {
    const choice = this.requests[i]?.tool_choice
    if (choice !== undefined && typeof choice === 'object') return choice.function?.name
    return choice
  }

  /** The tool results request `i` sends back, in order (as text). */
  toolResults(i: number): string[] {
    return (this.requests[i]?.messages ?? [])
      .filter((m) => m.role === 'tool')
      .map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)))
  }

  /** Stops the server. */
  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()))
  }
}

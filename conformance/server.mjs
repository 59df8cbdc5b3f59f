// The server the conformance test runs the MCP conformance suite's server scenarios
// against, directly and behind `orch mcp`: every tool, resource and prompt the
// scenarios name, written here from the scenarios' own requirements (each scenario's
// description in the suite says what it calls and what it expects back).
//
// One process serves both families of MCP revisions on one URL:
//
// - the revisions with a handshake (2025-03-26, 2025-06-18, 2025-11-25): a session per
//   `initialize`, through the official TypeScript SDK's `Server` and Streamable HTTP
//   transport; questions to the client (sampling, elicitation) and what a call says on
//   the way (log lines, progress) travel on that call's own response stream;
// - 2026-07-28, without a handshake: every request stands alone and carries its
//   revision, client capabilities and client name in `_meta`; a call that needs
//   something from the client answers with an `input_required` result and a signed
//   `requestState`, and the client calls again with the answers.
//
// A request goes to the second family when its `MCP-Protocol-Version` header names a
// revision that is not one of the first (so an unknown revision gets the 2026-07-28
// "unsupported version" answer); everything else is the SDK's.
//
//     node server.mjs            # PORT from the environment, or 3000
//
// It listens on 127.0.0.1 and answers only requests whose Host (and Origin, when sent)
// is the local machine, as a server on localhost without authentication must.
//
// With ORCH_CONFORMANCE_HANDSHAKE_ONLY=1 it is a server of the handshake revisions
// alone, as the SDK's own transport is: `server/discover` and any request that names
// 2026-07-28 are refused as the SDK refuses them.

import { createServer } from 'node:http';
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { crc32, deflateSync } from 'node:zlib';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  CompleteRequestSchema,
  CreateMessageResultSchema,
  ElicitResultSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListRootsResultSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  UnsubscribeRequestSchema,
  isInitializeRequest,
} from '@modelcontextprotocol/sdk/types.js';

const SERVER_INFO = { name: 'orch-conformance-server', version: '1.0.0' };
/** The revisions served through the handshake (the SDK's). */
const HANDSHAKE_REVISIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];
/** The revision served without one. */
const STATELESS = '2026-07-28';
const SUPPORTED = [STATELESS, ...HANDSHAKE_REVISIONS];
/** Serve the handshake revisions only (see the top of the file). */
const HANDSHAKE_ONLY = process.env.ORCH_CONFORMANCE_HANDSHAKE_ONLY === '1';
const META = 'io.modelcontextprotocol/';
/** The largest request body read (a conformance request is a few kilobytes). */
const MAX_BODY = 4 * 1024 * 1024;

// ---------------------------------------------------------------- content

/** A PNG of `width`×`height` pixels of one colour, built here (no image files). */
function png(width, height, [r, g, b]) {
  const chunk = (type, data) => {
    const out = Buffer.alloc(12 + data.length);
    out.writeUInt32BE(data.length, 0);
    out.write(type, 4, 'ascii');
    data.copy(out, 8);
    out.writeUInt32BE(crc32(Buffer.concat([Buffer.from(type, 'ascii'), data])), 8 + data.length);
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header.set([8, 2, 0, 0, 0], 8); // 8 bits, truecolour, no interlace
  const row = Buffer.concat([Buffer.from([0]), Buffer.from(Array(width).fill([r, g, b]).flat())]);
  const pixels = Buffer.concat(Array(height).fill(row));
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', header),
    chunk('IDAT', deflateSync(pixels)),
    chunk('IEND', Buffer.alloc(0)),
  ]).toString('base64');
}

/** A WAV of `samples` samples of silence, 8 kHz mono 8-bit. */
function wav(samples) {
  const out = Buffer.alloc(44 + samples);
  out.write('RIFF', 0, 'ascii');
  out.writeUInt32LE(36 + samples, 4);
  out.write('WAVEfmt ', 8, 'ascii');
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(1, 20); // PCM
  out.writeUInt16LE(1, 22); // mono
  out.writeUInt32LE(8000, 24);
  out.writeUInt32LE(8000, 28);
  out.writeUInt16LE(1, 32);
  out.writeUInt16LE(8, 34);
  out.write('data', 36, 'ascii');
  out.writeUInt32LE(samples, 40);
  out.fill(128, 44);
  return out.toString('base64');
}

const RED_PIXEL = png(1, 1, [255, 0, 0]);
const SILENCE = wav(800);
const text = (t) => ({ type: 'text', text: t });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------- resources

const RESOURCES = [
  {
    uri: 'test://static-text',
    name: 'static-text',
    description: 'A text resource whose content never changes',
    mimeType: 'text/plain',
    read: () => ({ text: 'This is the content of the static text resource.' }),
  },
  {
    uri: 'test://static-binary',
    name: 'static-binary',
    description: 'A binary resource: a one-pixel PNG',
    mimeType: 'image/png',
    read: () => ({ blob: RED_PIXEL }),
  },
  {
    uri: 'test://watched-resource',
    name: 'watched-resource',
    description: 'A resource a client can subscribe to',
    mimeType: 'text/plain',
    read: () => ({ text: 'This resource can be watched for updates.' }),
  },
];
const TEMPLATE = {
  uriTemplate: 'test://template/{id}/data',
  name: 'template-data',
  description: 'The data of the item whose id is in the URI',
  mimeType: 'application/json',
};

/** The contents of `uri`, or `undefined` when there is no such resource. */
function readResource(uri) {
  const fixed = RESOURCES.find((r) => r.uri === uri);
  if (fixed) return [{ uri, mimeType: fixed.mimeType, ...fixed.read() }];
  const match = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
  if (match) {
    const id = decodeURIComponent(match[1]);
    const data = { id, templateTest: true, data: `Data for ID: ${id}` };
    return [{ uri, mimeType: TEMPLATE.mimeType, text: JSON.stringify(data) }];
  }
  return undefined;
}

// ---------------------------------------------------------------- prompts

const PROMPTS = [
  {
    name: 'test_simple_prompt',
    description: 'A prompt without arguments',
    get: () => [{ role: 'user', content: text('This is a simple prompt for testing.') }],
  },
  {
    name: 'test_prompt_with_arguments',
    description: 'A prompt with two required arguments',
    arguments: [
      { name: 'arg1', description: 'First test argument', required: true },
      { name: 'arg2', description: 'Second test argument', required: true },
    ],
    get: (args) => [
      {
        role: 'user',
        content: text(`Prompt with arguments: arg1='${args.arg1}', arg2='${args.arg2}'`),
      },
    ],
  },
  {
    name: 'test_prompt_with_embedded_resource',
    description: 'A prompt that embeds the resource it is given',
    arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }],
    get: (args) => [
      {
        role: 'user',
        content: {
          type: 'resource',
          resource: {
            uri: args.resourceUri,
            mimeType: 'text/plain',
            text: 'Embedded resource content for testing.',
          },
        },
      },
      { role: 'user', content: text('Please process the embedded resource above.') },
    ],
  },
  {
    name: 'test_prompt_with_image',
    description: 'A prompt with an image',
    get: () => [
      { role: 'user', content: { type: 'image', data: RED_PIXEL, mimeType: 'image/png' } },
      { role: 'user', content: text('Please analyze the image above.') },
    ],
  },
  {
    name: 'test_input_required_result_prompt',
    description: 'A prompt that first asks the user for its context',
    needs: (inputs) =>
      accepted(inputs.user_context)
        ? undefined
        : {
            user_context: elicit('What context should the prompt use?', {
              context: { type: 'string' },
            }),
          },
    get: (args, inputs) => [
      {
        role: 'user',
        content: text(`Use this context: ${inputs.user_context.content.context}`),
      },
    ],
  },
];

/** Completion values for an argument of a prompt or of the resource template. */
function complete(ref, argument) {
  const words = {
    arg1: ['paris', 'park', 'party'],
    arg2: ['world', 'wonder', 'work'],
    id: ['123', '124', '200'],
  }[argument?.name] ?? [];
  const known =
    (ref?.type === 'ref/prompt' && PROMPTS.some((p) => p.name === ref.name)) ||
    (ref?.type === 'ref/resource' && ref.uri === TEMPLATE.uriTemplate);
  const values = known ? words.filter((w) => w.startsWith(argument?.value ?? '')) : [];
  return { completion: { values, total: values.length, hasMore: false } };
}

// ---------------------------------------------------------------- questions

/** A question for the user: `elicitation/create` with a flat object schema. */
function elicit(message, properties, required = Object.keys(properties)) {
  return {
    method: 'elicitation/create',
    params: { message, requestedSchema: { type: 'object', properties, required } },
  };
}

/** A question for the client's model: `sampling/createMessage`. */
function sample(prompt, maxTokens = 100) {
  return {
    method: 'sampling/createMessage',
    params: { messages: [{ role: 'user', content: text(prompt) }], maxTokens },
  };
}

const LIST_ROOTS = { method: 'roots/list', params: {} };
/** Which client capability each kind of question needs. */
const CAPABILITY = {
  'elicitation/create': 'elicitation',
  'sampling/createMessage': 'sampling',
  'roots/list': 'roots',
};

/** Is `answer` an accepted elicitation? */
const accepted = (answer) =>
  answer?.action === 'accept' && typeof answer.content === 'object' && answer.content !== null;
/** The text of a sampling answer. */
const sampled = (answer) =>
  answer?.content?.type === 'text' ? answer.content.text : JSON.stringify(answer?.content);
/** A one-line account of an elicitation answer. */
const elicited = (answer) =>
  `action=${answer?.action}, content=${JSON.stringify(answer?.content ?? {})}`;

// ---------------------------------------------------------------- tools

const JSON_SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  $defs: {
    address: {
      $anchor: 'addressDef',
      type: 'object',
      properties: { street: { type: 'string' }, city: { type: 'string' } },
    },
  },
  properties: {
    name: { type: 'string' },
    address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] },
    phone: { type: 'string' },
    email: { type: 'string' },
  },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] },
  else: { required: ['email'] },
  additionalProperties: false,
};

const NO_ARGUMENTS = { type: 'object', properties: {} };

/**
 * The tools. A tool's `needs(inputs, args, context)` names the questions it still has
 * for the client (by key), or nothing once `inputs` holds every answer; `run` then
 * makes the result. `context` carries `capabilities` (the client's), `state` (what an
 * earlier round of the same call left, on the revision without a handshake),
 * `log(level, data)`, `progress(done, total)` and `closeStream()`.
 */
const TOOLS = [
  {
    name: 'test_simple_text',
    description: 'Returns one text block',
    run: () => ({ content: [text('This is a simple text response for testing.')] }),
  },
  {
    name: 'test_image_content',
    description: 'Returns an image: a one-pixel PNG',
    run: () => ({ content: [{ type: 'image', data: RED_PIXEL, mimeType: 'image/png' }] }),
  },
  {
    name: 'test_audio_content',
    description: 'Returns audio: a tenth of a second of silence',
    run: () => ({ content: [{ type: 'audio', data: SILENCE, mimeType: 'audio/wav' }] }),
  },
  {
    name: 'test_embedded_resource',
    description: 'Returns an embedded text resource',
    run: () => ({
      content: [
        {
          type: 'resource',
          resource: {
            uri: 'test://embedded-resource',
            mimeType: 'text/plain',
            text: 'This is an embedded resource content.',
          },
        },
      ],
    }),
  },
  {
    name: 'test_multiple_content_types',
    description: 'Returns text, an image and an embedded resource',
    run: () => ({
      content: [
        text('Multiple content types test:'),
        { type: 'image', data: RED_PIXEL, mimeType: 'image/png' },
        {
          type: 'resource',
          resource: {
            uri: 'test://mixed-content-resource',
            mimeType: 'application/json',
            text: JSON.stringify({ test: 'data', value: 123 }),
          },
        },
      ],
    }),
  },
  {
    name: 'test_tool_with_logging',
    description: 'Sends three log lines while it runs',
    run: async (args, inputs, context) => {
      await context.log('info', 'Tool execution started');
      await sleep(50);
      await context.log('info', 'Tool processing data');
      await sleep(50);
      await context.log('info', 'Tool execution completed');
      return { content: [text('Tool with logging executed successfully')] };
    },
  },
  {
    name: 'test_logging_tool',
    description: 'Sends a log line (only to a client that asked for log lines)',
    run: async (args, inputs, context) => {
      await context.log('info', 'A log line from test_logging_tool');
      return { content: [text('Logged')] };
    },
  },
  {
    name: 'test_tool_with_progress',
    description: 'Reports progress 0, 50 and 100 of 100 while it runs',
    run: async (args, inputs, context) => {
      await context.progress(0, 100);
      await sleep(50);
      await context.progress(50, 100);
      await sleep(50);
      await context.progress(100, 100);
      return { content: [text('Tool with progress executed successfully')] };
    },
  },
  {
    name: 'test_error_handling',
    description: 'Always fails, as a tool error',
    run: () => ({
      isError: true,
      content: [text('This tool intentionally returns an error for testing')],
    }),
  },
  {
    name: 'test_sampling',
    description: "Asks the client's model to answer a prompt",
    inputSchema: {
      type: 'object',
      properties: { prompt: { type: 'string', description: 'The prompt to send to the LLM' } },
      required: ['prompt'],
    },
    needs: (inputs, args) => (inputs.answer ? undefined : { answer: sample(String(args.prompt)) }),
    run: (args, inputs) => ({ content: [text(`LLM response: ${sampled(inputs.answer)}`)] }),
  },
  {
    name: 'test_elicitation',
    description: 'Asks the user for a username and an email address',
    inputSchema: {
      type: 'object',
      properties: { message: { type: 'string', description: 'The message to show the user' } },
      required: ['message'],
    },
    needs: (inputs, args) =>
      inputs.user
        ? undefined
        : {
            user: elicit(String(args.message), {
              username: { type: 'string', description: "User's response" },
              email: { type: 'string', description: "User's email address" },
            }),
          },
    run: (args, inputs) => ({
      content: [
        text(
          `User response: action=${inputs.user.action}, content=${JSON.stringify(inputs.user.content ?? {})}`,
        ),
      ],
    }),
  },
  {
    name: 'test_elicitation_sep1034_defaults',
    description: 'Asks the user with a default for every primitive type',
    needs: (inputs) =>
      inputs.profile
        ? undefined
        : {
            profile: elicit(
              'Please review and update the form fields with defaults',
              {
                name: { type: 'string', description: 'User name', default: 'John Doe' },
                age: { type: 'integer', description: 'User age', default: 30 },
                score: { type: 'number', description: 'User score', default: 95.5 },
                status: {
                  type: 'string',
                  description: 'User status',
                  enum: ['active', 'inactive', 'pending'],
                  default: 'active',
                },
                verified: { type: 'boolean', description: 'Verified user', default: true },
              },
              [],
            ),
          },
    run: (args, inputs) => ({
      content: [text(`Elicitation completed: ${elicited(inputs.profile)}`)],
    }),
  },
  {
    name: 'test_elicitation_sep1330_enums',
    description: 'Asks the user with each kind of enumeration',
    needs: (inputs) =>
      inputs.choices
        ? undefined
        : {
            choices: elicit(
              'Please pick from each kind of list',
              {
                untitledSingle: {
                  type: 'string',
                  description: 'Untitled single-select',
                  enum: ['option1', 'option2', 'option3'],
                },
                titledSingle: {
                  type: 'string',
                  description: 'Titled single-select',
                  oneOf: [
                    { const: 'value1', title: 'First Option' },
                    { const: 'value2', title: 'Second Option' },
                    { const: 'value3', title: 'Third Option' },
                  ],
                },
                legacyEnum: {
                  type: 'string',
                  description: 'Titled single-select, the older way',
                  enum: ['opt1', 'opt2', 'opt3'],
                  enumNames: ['Option One', 'Option Two', 'Option Three'],
                },
                untitledMulti: {
                  type: 'array',
                  description: 'Untitled multi-select',
                  items: { type: 'string', enum: ['option1', 'option2', 'option3'] },
                },
                titledMulti: {
                  type: 'array',
                  description: 'Titled multi-select',
                  items: {
                    anyOf: [
                      { const: 'value1', title: 'First Choice' },
                      { const: 'value2', title: 'Second Choice' },
                      { const: 'value3', title: 'Third Choice' },
                    ],
                  },
                },
              },
              [],
            ),
          },
    run: (args, inputs) => ({
      content: [text(`Elicitation completed: ${elicited(inputs.choices)}`)],
    }),
  },
  {
    name: 'json_schema_2020_12_tool',
    description: 'Tool with JSON Schema 2020-12 features',
    inputSchema: JSON_SCHEMA_2020_12,
    run: (args) => ({ content: [text(`Received: ${JSON.stringify(args)}`)] }),
  },
  {
    name: 'test_reconnection',
    description: 'Closes its response stream mid-call; the result comes on the resumed stream',
    run: async (args, inputs, context) => {
      await sleep(100);
      context.closeStream();
      await sleep(200);
      return { content: [text('Reconnection test completed')] };
    },
  },
  {
    name: 'test_trigger_tool_change',
    description: 'Tells every listener that the tool list changed',
    run: (args, inputs, context) => {
      context.changed('tools');
      return { content: [text('Tool list change announced')] };
    },
  },
  {
    name: 'test_trigger_prompt_change',
    description: 'Tells every listener that the prompt list changed',
    run: (args, inputs, context) => {
      context.changed('prompts');
      return { content: [text('Prompt list change announced')] };
    },
  },
  {
    name: 'test_header_param',
    description: 'Echoes a region the request also names in its Mcp-Param-Region header',
    inputSchema: {
      type: 'object',
      properties: {
        region: { type: 'string', description: 'Where to act', 'x-mcp-header': 'Region' },
      },
      required: ['region'],
    },
    run: (args) => ({ content: [text(`Region: ${args.region}`)] }),
  },
  {
    name: 'test_missing_capability',
    description: "Needs the client's sampling capability, and refuses without it",
    requires: { sampling: {} },
    run: () => ({ content: [text('The client can sample')] }),
  },
  {
    name: 'test_streaming_elicitation',
    description: 'Asks the user a question as an input_required result on a response stream',
    needs: (inputs) =>
      accepted(inputs.answer) ? undefined : { answer: elicit('Anything to add?', { note: { type: 'string' } }) },
    run: (args, inputs) => ({ content: [text(`Noted: ${inputs.answer.content.note}`)] }),
    streams: true,
  },
  {
    name: 'test_input_required_result_elicitation',
    description: "Asks the user's name, then greets them",
    needs: (inputs) =>
      accepted(inputs.user_name) && typeof inputs.user_name.content.name === 'string'
        ? undefined
        : { user_name: elicit('What is your name?', { name: { type: 'string' } }) },
    run: (args, inputs) => ({ content: [text(`Hello, ${inputs.user_name.content.name}!`)] }),
  },
  {
    name: 'test_input_required_result_sampling',
    description: "Asks the client's model a question",
    needs: (inputs) =>
      inputs.capital_question ? undefined : { capital_question: sample('What is the capital of France?') },
    run: (args, inputs) => ({ content: [text(`The model said: ${sampled(inputs.capital_question)}`)] }),
  },
  {
    name: 'test_input_required_result_list_roots',
    description: "Asks the client for its roots",
    needs: (inputs) =>
      Array.isArray(inputs.client_roots?.roots) ? undefined : { client_roots: LIST_ROOTS },
    run: (args, inputs) => ({
      content: [text(`Roots: ${inputs.client_roots.roots.map((r) => r.uri).join(', ')}`)],
    }),
  },
  {
    name: 'test_input_required_result_request_state',
    description: 'Asks for a confirmation and checks the state it left comes back',
    needs: (inputs) =>
      accepted(inputs.confirm)
        ? undefined
        : {
            confirm: elicit('Please confirm', { ok: { type: 'boolean' } }),
          },
    run: (args, inputs, context) => ({
      content: [text(context.stateVerified ? 'state-ok: confirmed' : 'confirmed')],
    }),
  },
  {
    name: 'test_input_required_result_tampered_state',
    description: 'Asks for a confirmation; a changed requestState is refused',
    needs: (inputs) =>
      accepted(inputs.confirm) ? undefined : { confirm: elicit('Please confirm', { ok: { type: 'boolean' } }) },
    run: () => ({ content: [text('confirmed')] }),
  },
  {
    name: 'test_input_required_result_multiple_inputs',
    description: 'Asks the user, the model and the client at once',
    needs: (inputs) => {
      const missing = {};
      if (!accepted(inputs.user_name))
        missing.user_name = elicit('What is your name?', { name: { type: 'string' } });
      if (!inputs.greeting) missing.greeting = sample('Generate a greeting', 50);
      if (!Array.isArray(inputs.client_roots?.roots)) missing.client_roots = LIST_ROOTS;
      return Object.keys(missing).length ? missing : undefined;
    },
    run: (args, inputs) => ({
      content: [
        text(
          `${sampled(inputs.greeting)} ${inputs.user_name.content.name} ` +
            `(${inputs.client_roots.roots.length} roots)`,
        ),
      ],
    }),
  },
  {
    name: 'test_input_required_result_multi_round',
    description: 'Asks two questions, one round after the other',
    needs: (inputs, args, context) => {
      if (!context.state?.name) {
        if (accepted(inputs.step1)) return undefined;
        return { step1: elicit('Step 1: What is your name?', { name: { type: 'string' } }) };
      }
      if (accepted(inputs.step2)) return undefined;
      return { step2: elicit('Step 2: What is your favorite color?', { color: { type: 'string' } }) };
    },
    // Round one's answer is kept in the state and the second question asked; round
    // two's completes the call.
    rounds: (inputs, context) =>
      context.state?.name ? undefined : { name: inputs.step1.content.name },
    run: (args, inputs, context) => ({
      content: [text(`${context.state.name} likes ${inputs.step2.content.color}`)],
    }),
  },
  {
    name: 'test_input_required_result_capabilities',
    description: 'Asks only what the client said it can answer',
    needs: (inputs, args, context) => {
      if (inputs.answer) return undefined;
      if (context.capabilities.sampling) return { answer: sample('Say something') };
      if (context.capabilities.elicitation) return { answer: elicit('Say something', { text: { type: 'string' } }) };
      return undefined;
    },
    run: (args, inputs) =>
      inputs.answer
        ? { content: [text('Answered')] }
        : { content: [text('The client can answer no question')] },
  },
];

for (const tool of TOOLS) tool.inputSchema ??= NO_ARGUMENTS;
const toolList = () =>
  TOOLS.map(({ name, description, inputSchema }) => ({ name, description, inputSchema }));

/** A JSON-RPC error to answer with: code, message, data, and the HTTP status. */
class Refusal extends Error {
  constructor(code, message, data, status = 400) {
    super(message);
    this.code = code;
    this.data = data;
    this.status = status;
  }
}

/** The capabilities declared to clients (both families). */
const CAPABILITIES = {
  tools: { listChanged: true },
  prompts: { listChanged: true },
  resources: { subscribe: true, listChanged: true },
  completions: {},
  logging: {},
};

// ---------------------------------------------------------------- listeners

/** Open `subscriptions/listen` streams: what each asked for and how to write to it. */
const listeners = new Set();
/** Sessions of the handshake revisions: id → { transport, server }. */
const sessions = new Map();

/** Tells everyone who listens that the `kind` list (`tools` or `prompts`) changed. */
function announce(kind) {
  const method = `notifications/${kind}/list_changed`;
  for (const listener of listeners) {
    if (listener.wants[`${kind}ListChanged`]) {
      listener.write({ jsonrpc: '2.0', method, params: { _meta: { [`${META}subscriptionId`]: listener.id } } });
    }
  }
  for (const { server } of sessions.values()) {
    server.notification({ method }).catch(() => {});
  }
}

// ---------------------------------------------------------------- the handshake family

/**
 * Asks the questions `needs` names on the request's own response stream, round after
 * round (`rounds` moves `context.state` on), until nothing is missing: the answers, or
 * a `Refusal` when the client cannot answer a question.
 */
async function askInSession(needs, rounds, context, extra) {
  const inputs = {};
  for (;;) {
    const missing = needs(inputs);
    if (!missing) {
      const next = rounds(inputs);
      if (!next) return inputs;
      context.state = next;
      context.stateVerified = true;
      continue;
    }
    for (const [key, question] of Object.entries(missing)) {
      const capability = CAPABILITY[question.method];
      if (!context.capabilities[capability])
        return new Refusal(-32021, `The client cannot answer ${question.method}: it did not declare ${capability}`);
      const schema = {
        'elicitation/create': ElicitResultSchema,
        'sampling/createMessage': CreateMessageResultSchema,
        'roots/list': ListRootsResultSchema,
      }[question.method];
      inputs[key] = await extra.sendRequest(question, schema);
    }
  }
}

/** A new SDK server for one session, with every handler. */
function sessionServer() {
  const server = new Server(SERVER_INFO, { capabilities: CAPABILITIES });
  const levels = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];
  let level = 'debug';
  server.setRequestHandler(SetLevelRequestSchema, async (request) => {
    level = request.params.level;
    return {};
  });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: toolList() }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const tool = TOOLS.find((t) => t.name === request.params.name);
    if (!tool) throw new Refusal(-32602, `Unknown tool: ${request.params.name}`);
    const args = request.params.arguments ?? {};
    const capabilities = server.getClientCapabilities() ?? {};
    for (const needed of Object.keys(tool.requires ?? {})) {
      if (!capabilities[needed])
        return { isError: true, content: [text(`This tool needs the client's ${needed} capability`)] };
    }
    const token = request.params._meta?.progressToken;
    const context = {
      capabilities,
      state: undefined,
      log: async (at, data) => {
        if (levels.indexOf(at) < levels.indexOf(level)) return;
        await extra.sendNotification({ method: 'notifications/message', params: { level: at, data } });
      },
      progress: async (progress, total) => {
        if (token === undefined) return;
        await extra.sendNotification({
          method: 'notifications/progress',
          params: { progressToken: token, progress, total },
        });
      },
      closeStream: () => extra.closeSSEStream?.(),
      changed: announce,
    };
    const inputs = await askInSession(
      (got) => tool.needs?.(got, args, context),
      (got) => tool.rounds?.(got, context),
      context,
      extra,
    );
    if (inputs instanceof Refusal) return { isError: true, content: [text(inputs.message)] };
    return tool.run(args, inputs, context);
  });
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: RESOURCES.map(({ uri, name, description, mimeType }) => ({ uri, name, description, mimeType })),
  }));
  server.setRequestHandler(ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: [TEMPLATE] }));
  server.setRequestHandler(ReadResourceRequestSchema, async (request) => {
    const contents = readResource(request.params.uri);
    if (!contents) throw new Refusal(-32602, 'Resource not found', { uri: request.params.uri });
    return { contents };
  });
  const subscribed = new Set();
  server.setRequestHandler(SubscribeRequestSchema, async (request) => {
    subscribed.add(request.params.uri);
    return {};
  });
  server.setRequestHandler(UnsubscribeRequestSchema, async (request) => {
    subscribed.delete(request.params.uri);
    return {};
  });
  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: PROMPTS.map(({ name, description, arguments: a }) => ({
      name,
      description,
      ...(a ? { arguments: a } : {}),
    })),
  }));
  server.setRequestHandler(GetPromptRequestSchema, async (request, extra) => {
    const prompt = PROMPTS.find((p) => p.name === request.params.name);
    if (!prompt) throw new Refusal(-32602, `Unknown prompt: ${request.params.name}`);
    const args = request.params.arguments ?? {};
    for (const a of prompt.arguments ?? []) {
      if (a.required && typeof args[a.name] !== 'string')
        throw new Refusal(-32602, `Missing required argument: ${a.name}`);
    }
    const context = { capabilities: server.getClientCapabilities() ?? {} };
    const inputs = await askInSession((got) => prompt.needs?.(got), () => undefined, context, extra);
    if (inputs instanceof Refusal) throw inputs;
    return { messages: prompt.get(args, inputs) };
  });
  server.setRequestHandler(CompleteRequestSchema, async (request) =>
    complete(request.params.ref, request.params.argument),
  );
  return server;
}

/** Events kept for resuming a response stream (`Last-Event-ID`), per session. */
class Events {
  #events = [];
  async storeEvent(streamId, message) {
    const eventId = `${streamId}_${this.#events.length}`;
    this.#events.push({ eventId, streamId, message });
    if (this.#events.length > 10_000) this.#events.splice(0, 1_000);
    return eventId;
  }
  async getStreamIdForEventId(eventId) {
    return this.#events.find((e) => e.eventId === eventId)?.streamId;
  }
  async replayEventsAfter(lastEventId, { send }) {
    const at = this.#events.findIndex((e) => e.eventId === lastEventId);
    if (at < 0) return '';
    const { streamId } = this.#events[at];
    for (const e of this.#events.slice(at + 1)) {
      if (e.streamId === streamId) await send(e.eventId, e.message);
    }
    return streamId;
  }
}

async function handshake(req, res, body) {
  const id = req.headers['mcp-session-id'];
  if (id !== undefined) {
    const session = sessions.get(id);
    if (!session) return reply(res, 404, error(body?.id ?? null, -32001, 'Session not found'));
    return session.transport.handleRequest(req, res, body);
  }
  if (req.method === 'POST' && isInitializeRequest(body)) {
    const server = sessionServer();
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: new Events(),
      retryInterval: 500,
      onsessioninitialized: (sessionId) => sessions.set(sessionId, { transport, server }),
      onsessionclosed: (sessionId) => sessions.delete(sessionId),
    });
    transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
    await server.connect(transport);
    return transport.handleRequest(req, res, body);
  }
  return reply(res, 400, error(body?.id ?? null, -32000, 'Bad Request: no session; start one with initialize'));
}

// ---------------------------------------------------------------- 2026-07-28

/** The key that signs `requestState` (new each start: a state outlives no restart). */
const KEY = randomBytes(32);
const sign = (value) => {
  const payload = Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${payload}.${createHmac('sha256', KEY).update(payload).digest('base64url')}`;
};
/** What `state` signed, or a refusal when it was not signed here or was changed. */
function verify(state) {
  const [payload, mac] = typeof state === 'string' ? state.split('.') : [];
  const expected = payload ? createHmac('sha256', KEY).update(payload).digest() : undefined;
  const given = mac ? Buffer.from(mac, 'base64url') : undefined;
  if (!expected || !given || given.length !== expected.length || !timingSafeEqual(given, expected))
    throw new Refusal(-32602, 'Invalid params: requestState failed its integrity check');
  return JSON.parse(Buffer.from(payload, 'base64url').toString());
}

/** A complete result on this revision: its type, and who answered. */
const complete2026 = (result) => ({
  ...result,
  resultType: 'complete',
  _meta: { ...result._meta, [`${META}serverInfo`]: SERVER_INFO },
});
const cached = (result) => complete2026({ ...result, ttlMs: 0, cacheScope: 'public' });

/**
 * Runs a request that may need input (`tools/call` of a tool with questions,
 * `prompts/get` of such a prompt): an `input_required` result naming what is still
 * missing, or what `finish` makes once everything is there.
 */
async function withInputs(name, params, capabilities, needs, rounds, finish) {
  if ('inputResponses' in params && (typeof params.inputResponses !== 'object' || params.inputResponses === null || Array.isArray(params.inputResponses)))
    throw new Refusal(-32602, 'Invalid params: inputResponses must be an object');
  const inputs = params.inputResponses ?? {};
  for (const [key, answer] of Object.entries(inputs)) {
    if (typeof answer !== 'object' || answer === null || Array.isArray(answer))
      throw new Refusal(-32602, `Invalid params: inputResponses.${key} must be an object`);
  }
  let state;
  if (params.requestState !== undefined) {
    const signed = verify(params.requestState);
    if (signed.name !== name || signed.args !== JSON.stringify(params.arguments ?? {}))
      throw new Refusal(-32602, 'Invalid params: requestState belongs to another request');
    state = signed.state;
  }
  const context = { capabilities, state, stateVerified: params.requestState !== undefined };
  for (;;) {
    const missing = needs?.(inputs, context);
    if (missing) {
      for (const question of Object.values(missing)) {
        const capability = CAPABILITY[question.method];
        if (!capabilities[capability])
          throw new Refusal(-32021, `The client did not declare the ${capability} capability`, {
            requiredCapabilities: { [capability]: {} },
          });
      }
      return {
        resultType: 'input_required',
        inputRequests: missing,
        requestState: sign({ name, args: JSON.stringify(params.arguments ?? {}), state: context.state ?? null }),
        _meta: { [`${META}serverInfo`]: SERVER_INFO },
      };
    }
    const next = rounds?.(inputs, context);
    if (!next) return complete2026(await finish(inputs, context));
    // A new round: what was answered so far lives on in the state, not in the inputs.
    context.state = next;
    for (const key of Object.keys(inputs)) delete inputs[key];
  }
}

/** Answers one 2026-07-28 request: its result, or throws a `Refusal`. */
async function serve(method, params, meta, stream) {
  const capabilities = meta[`${META}clientCapabilities`];
  switch (method) {
    case 'server/discover':
      return cached({ supportedVersions: SUPPORTED, capabilities: CAPABILITIES });
    case 'tools/list':
      return cached({ tools: toolList() });
    case 'tools/call': {
      const tool = TOOLS.find((t) => t.name === params.name);
      if (!tool) throw new Refusal(-32602, `Unknown tool: ${params.name}`, undefined, 200);
      const args = params.arguments ?? {};
      for (const needed of Object.keys(tool.requires ?? {})) {
        if (!capabilities[needed])
          throw new Refusal(-32021, `The client did not declare the ${needed} capability`, {
            requiredCapabilities: { [needed]: {} },
          });
      }
      const logLevel = meta[`${META}logLevel`];
      const token = params._meta?.progressToken;
      const run = {
        capabilities,
        log: async (level, data) => {
          if (logLevel !== undefined) await stream.notify('notifications/message', { level, data });
        },
        progress: async (progress, total) => {
          if (token !== undefined)
            await stream.notify('notifications/progress', { progressToken: token, progress, total });
        },
        closeStream: () => {},
        changed: announce,
      };
      if (tool.streams) await stream.open();
      return withInputs(
        `tools/call:${tool.name}`,
        params,
        capabilities,
        tool.needs && ((inputs, context) => tool.needs(inputs, args, { ...run, ...context })),
        tool.rounds,
        (inputs, context) => tool.run(args, inputs, { ...run, ...context }),
      );
    }
    case 'prompts/list':
      return cached({
        prompts: PROMPTS.map(({ name, description, arguments: a }) => ({
          name,
          description,
          ...(a ? { arguments: a } : {}),
        })),
      });
    case 'prompts/get': {
      const prompt = PROMPTS.find((p) => p.name === params.name);
      if (!prompt) throw new Refusal(-32602, `Unknown prompt: ${params.name}`, undefined, 200);
      const args = params.arguments ?? {};
      for (const a of prompt.arguments ?? []) {
        if (a.required && typeof args[a.name] !== 'string')
          throw new Refusal(-32602, `Missing required argument: ${a.name}`, undefined, 200);
      }
      return withInputs(`prompts/get:${prompt.name}`, params, capabilities, prompt.needs, undefined, (inputs) => ({
        messages: prompt.get(args, inputs),
      }));
    }
    case 'resources/list':
      return cached({
        resources: RESOURCES.map(({ uri, name, description, mimeType }) => ({ uri, name, description, mimeType })),
      });
    case 'resources/templates/list':
      return cached({ resourceTemplates: [TEMPLATE] });
    case 'resources/read': {
      const contents = readResource(params.uri);
      if (!contents) throw new Refusal(-32602, 'Resource not found', { uri: params.uri }, 200);
      return cached({ contents });
    }
    case 'completion/complete':
      return complete2026(complete(params.ref, params.argument));
    default:
      throw new Refusal(-32601, `Method not found: ${method}`, undefined, 404);
  }
}

/** The response of a 2026-07-28 request, as JSON or (once something streams) SSE. */
class Answer {
  constructor(res) {
    this.res = res;
    this.streaming = false;
  }
  async open() {
    if (this.streaming) return;
    this.streaming = true;
    this.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  }
  async notify(method, params) {
    await this.open();
    this.res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method, params })}\n\n`);
  }
  finish(status, message) {
    if (this.streaming) this.res.end(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
    else reply(this.res, status, message);
  }
}

async function stateless(req, res, body) {
  const header = req.headers['mcp-protocol-version'];
  const id = body?.id ?? null;
  const refuse = (status, code, message, data) => reply(res, status, error(id, code, message, data));
  if (req.method !== 'POST') return refuse(405, -32600, `${req.method} is not served on ${STATELESS}`);
  if (typeof body !== 'object' || body === null || typeof body.method !== 'string')
    return refuse(400, -32600, 'Invalid Request');
  const params = body.params ?? {};
  const meta = params._meta ?? {};
  if (body.id === undefined) return reply(res, 202); // a notification: nothing to answer
  const missing = [`${META}protocolVersion`, `${META}clientCapabilities`].filter((k) => meta[k] === undefined);
  if (missing.length) return refuse(400, -32602, `Invalid params: _meta is missing ${missing.join(', ')}`);
  const declared = meta[`${META}clientCapabilities`];
  if (typeof declared !== 'object' || declared === null || Array.isArray(declared))
    return refuse(400, -32602, `Invalid params: _meta's ${META}clientCapabilities must be an object`);
  if (meta[`${META}protocolVersion`] !== header)
    return refuse(400, -32020, 'The MCP-Protocol-Version header does not match _meta');
  if (header !== STATELESS)
    return refuse(400, -32022, 'Unsupported protocol version', { supported: [STATELESS], requested: header });
  // The standard headers say what the body says, so that what sits between client and
  // server can route on them; a request where they disagree is refused.
  const said = (name) => (typeof req.headers[name] === 'string' ? req.headers[name].trim() : undefined);
  if (said('mcp-method') !== body.method)
    return refuse(400, -32020, `The Mcp-Method header (${said('mcp-method') ?? 'missing'}) does not match the request's method ${body.method}`);
  const named = { 'tools/call': params.name, 'prompts/get': params.name, 'resources/read': params.uri }[body.method];
  if (named !== undefined && said('mcp-name') !== named)
    return refuse(400, -32020, `The Mcp-Name header (${said('mcp-name') ?? 'missing'}) does not match the request's ${named}`);
  if (body.method === 'tools/call') {
    const mismatch = headerParamMismatch(req, params);
    if (mismatch) return refuse(400, -32020, mismatch);
  }
  if (body.method === 'subscriptions/listen') return listen(res, params);
  const answer = new Answer(res);
  try {
    const result = await serve(body.method, params, meta, answer);
    answer.finish(200, { jsonrpc: '2.0', id, result });
  } catch (e) {
    if (e instanceof Refusal) answer.finish(e.status, error(id, e.code, e.message, e.data));
    else answer.finish(500, error(id, -32603, e instanceof Error ? e.message : String(e)));
  }
}

/**
 * Does every argument of the called tool that its schema marks `x-mcp-header` arrive
 * in its `Mcp-Param-<name>` header too, with the same value? A header value is taken
 * literally unless it is wrapped as `=?base64?…?=`, which must then be well-formed
 * Base64 (alphabet and padding). What is wrong, or nothing.
 */
function headerParamMismatch(req, params) {
  const tool = TOOLS.find((t) => t.name === params.name);
  const args = params.arguments ?? {};
  for (const [param, schema] of Object.entries(tool?.inputSchema.properties ?? {})) {
    const header = schema['x-mcp-header'];
    if (header === undefined) continue;
    const raw = req.headers[`mcp-param-${header.toLowerCase()}`];
    const given = typeof raw === 'string' ? raw.trim() : undefined;
    const value = args[param];
    if (value === undefined || value === null) {
      if (given !== undefined) return `Mcp-Param-${header} is sent but ${param} is not in the arguments`;
      continue;
    }
    if (given === undefined) return `Mcp-Param-${header} is missing, and ${param} is in the arguments`;
    let decoded = given;
    const wrapped = /^=\?base64\?(.*)\?=$/.exec(given);
    if (wrapped) {
      if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(wrapped[1]))
        return `Mcp-Param-${header} is not valid Base64`;
      decoded = Buffer.from(wrapped[1], 'base64').toString('utf8');
    }
    if (decoded !== String(value)) return `Mcp-Param-${header} does not match ${param} in the arguments`;
  }
  return undefined;
}

/** A `subscriptions/listen` stream: acknowledged first, then what it asked for. */
function listen(res, params) {
  const asked = params.notifications ?? {};
  const honored = {};
  for (const kind of ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged']) {
    if (asked[kind] === true) honored[kind] = true;
  }
  const listener = {
    id: randomUUID(),
    wants: honored,
    write: (message) => res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`),
  };
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  listener.write({
    jsonrpc: '2.0',
    method: 'notifications/subscriptions/acknowledged',
    params: { notifications: honored, _meta: { [`${META}subscriptionId`]: listener.id } },
  });
  listeners.add(listener);
  res.on('close', () => listeners.delete(listener));
}

// ---------------------------------------------------------------- HTTP

const error = (id, code, message, data) => ({
  jsonrpc: '2.0',
  id,
  error: { code, message, ...(data === undefined ? {} : { data }) },
});

function reply(res, status, message) {
  if (message === undefined) return res.writeHead(status).end();
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(message));
}

/** Is this Host or Origin the local machine? */
function local(value, origin) {
  if (value === undefined) return origin; // no Host: refused; no Origin: not a browser
  let host;
  try {
    host = new URL(origin ? value : `http://${value}`).hostname;
  } catch {
    return false;
  }
  return ['localhost', '127.0.0.1', '[::1]', '::1'].includes(host.toLowerCase());
}

/** The request's body as JSON: `undefined` when empty, a refusal when not JSON or too big. */
async function readBody(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY) throw new Refusal(-32600, 'Request body too large', undefined, 413);
    chunks.push(chunk);
  }
  if (size === 0) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new Refusal(-32700, 'Parse error: the body is not JSON');
  }
}

const http = createServer(async (req, res) => {
  try {
    if (!local(req.headers.host, false) || !local(req.headers.origin, true))
      return reply(res, 403, error(null, -32000, 'Forbidden: Host and Origin must be the local machine'));
    if (new URL(req.url, 'http://localhost').pathname !== '/mcp') return reply(res, 404, error(null, -32601, 'Not found'));
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    const revision = req.headers['mcp-protocol-version'];
    if (HANDSHAKE_ONLY) return await handshake(req, res, body);
    if (req.method === 'POST' && revision !== undefined && !HANDSHAKE_REVISIONS.includes(revision))
      return await stateless(req, res, body);
    return await handshake(req, res, body);
  } catch (e) {
    if (res.headersSent) return res.end();
    if (e instanceof Refusal) return reply(res, e.status, error(null, e.code, e.message, e.data));
    return reply(res, 500, error(null, -32603, e instanceof Error ? e.message : String(e)));
  }
});

// `localhost` may name either loopback address: listen on both (IPv6 where the machine
// has it).
const port = Number(process.env.PORT ?? 3000);
http.listen(port, '127.0.0.1', () => {
  console.error(`conformance server on http://localhost:${port}/mcp`);
  const v6 = createServer(http.listeners('request')[0]);
  v6.on('error', () => {});
  v6.listen(port, '::1');
});

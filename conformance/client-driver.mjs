// The client the suite's client scenarios test, ours: it does what each scenario asks
// of a client (`MCP_CONFORMANCE_SCENARIO`, at `MCP_CONFORMANCE_PROTOCOL_VERSION`), on
// the official TypeScript SDK for the revisions with a handshake and with plain
// requests for 2026-07-28 (that SDK has no stateless client yet).
//
//     node client-driver.mjs SERVER_URL
//     node client-driver.mjs --via ORCH TEMPLATE SERVER_URL
//
// With `--via`, the client reaches the scenario's server through `orch mcp TEMPLATE
// --listen 127.0.0.1:0 --anonymous-run --upstream-url SERVER_URL`, so `orch mcp` is the
// client the scenario sees (orch-cli/tests/conformance.rs runs both and compares).

import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const args = process.argv.slice(2);
const scenario = process.env.MCP_CONFORMANCE_SCENARIO;
const revision = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION ?? '2025-11-25';
/** Revisions without the `initialize` handshake. */
const STATELESS = ['2026-07-28'];
const stateless = STATELESS.includes(revision);

// ---------------------------------------------------------------------------------------
// Through orch mcp

/** Starts `orch mcp` fronting `upstream`; resolves to its URL and the child. */
function startOrch(orch, template, upstream) {
  const child = spawn(
    orch,
    ['mcp', template, '--listen', '127.0.0.1:0', '--anonymous-run', '--upstream-url', upstream],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let said = '';
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stderr });
    lines.on('line', (line) => {
      said += `${line}\n`;
      process.stderr.write(`orch mcp: ${line}\n`);
      const at = line.indexOf('http://');
      if (at >= 0) resolve({ url: line.slice(at).split(/\s/)[0], child });
    });
    child.on('exit', (code) => reject(new Error(`orch mcp exited (${code}) before serving:\n${said}`)));
    child.on('error', reject);
  });
}

// ---------------------------------------------------------------------------------------
// 2026-07-28: plain requests

const CLIENT_INFO = { name: 'orch-conformance-driver', version: '1.0.0' };
const CAPABILITIES = { elicitation: {}, sampling: {}, roots: {} };
let nextId = 1;
/** The revision 2026-07-28 requests name (until a server asks for another it speaks). */
let active = revision;

/** A header value as SEP-2243 has it: plain printable ASCII, else `=?base64?…?=`. */
function headerValue(value) {
  const text = String(value);
  const plain = /^[\x20-\x7e]*$/.test(text) && text === text.trim();
  return plain ? text : `=?base64?${Buffer.from(text, 'utf8').toString('base64')}?=`;
}

/** Is `tool`'s `x-mcp-header` use valid (SEP-2243)? Invalid tools are not used. */
function validHeaders(tool) {
  const seen = new Set();
  for (const schema of Object.values(tool.inputSchema?.properties ?? {})) {
    if (!schema || !('x-mcp-header' in schema)) continue;
    const name = schema['x-mcp-header'];
    if (typeof name !== 'string' || name === '') return false;
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) return false;
    if (seen.has(name.toLowerCase())) return false;
    seen.add(name.toLowerCase());
    if (!['string', 'number', 'integer', 'boolean'].includes(schema.type)) return false;
  }
  return true;
}

/** The `Mcp-Param-*` headers a call to `tool` with `args` carries. */
function paramHeaders(tool, args) {
  const headers = {};
  for (const [key, schema] of Object.entries(tool?.inputSchema?.properties ?? {})) {
    const name = schema?.['x-mcp-header'];
    const value = args?.[key];
    if (typeof name !== 'string' || value === undefined || value === null) continue;
    if (typeof value === 'object') continue;
    headers[`Mcp-Param-${name}`] = headerValue(value);
  }
  return headers;
}

/** One 2026-07-28 request: its JSON-RPC answer (`result` or `error`). */
async function request(url, method, params = {}, headers = {}) {
  const name = params.name ?? params.uri;
  const body = {
    jsonrpc: '2.0',
    id: nextId++,
    method,
    params: {
      ...params,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': active,
        'io.modelcontextprotocol/clientInfo': CLIENT_INFO,
        'io.modelcontextprotocol/clientCapabilities': CAPABILITIES,
        ...(params._meta ?? {}),
      },
    },
  };
  const send = () => fetch(url, {
    method: 'POST',
    headers: {
      'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
      'MCP-Protocol-Version': active,
      'Mcp-Method': method,
      ...(typeof name === 'string' ? { 'Mcp-Name': headerValue(name) } : {}),
      ...headers,
    },
    body: JSON.stringify(body),
  });
  let response = await send();
  let text = await response.text();
  // A revision the server does not take: again with one both speak (SEP-2575).
  if (response.status === 400) {
    const error = JSON.parse(text)?.error;
    const supported = error?.code === -32022 ? error.data?.supported ?? [] : [];
    const common = STATELESS.find((r) => supported.includes(r));
    if (common !== undefined) {
      active = common;
      body.params._meta['io.modelcontextprotocol/protocolVersion'] = active;
      response = await send();
      text = await response.text();
    }
  }
  if (!response.ok) throw new Error(`${method}: HTTP ${response.status}: ${text}`);
  // An answer as JSON or as the last `data:` event of a stream.
  if ((response.headers.get('content-type') ?? '').includes('text/event-stream')) {
    const events = text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim());
    const answers = events.filter(Boolean).map((e) => JSON.parse(e)).filter((m) => m.id === body.id);
    if (answers.length === 0) throw new Error(`${method}: no answer in the stream: ${text}`);
    return answers[answers.length - 1];
  }
  return JSON.parse(text);
}

/** `result` of a 2026-07-28 request, or throws with its error. */
async function call(url, method, params, headers) {
  const answer = await request(url, method, params, headers);
  if (answer.error) throw new Error(`${method}: ${answer.error.code} ${answer.error.message}`);
  return answer.result;
}

/** Answers every `elicitation/create` of an input-required result with an accept. */
function accepting(inputRequests) {
  const responses = {};
  for (const [key, asked] of Object.entries(inputRequests ?? {})) {
    if (asked.method === 'elicitation/create') {
      responses[key] = { action: 'accept', content: { confirmed: true } };
    }
  }
  return responses;
}

// ---------------------------------------------------------------------------------------
// The handshake revisions: the official SDK

async function connected(url, capabilities = {}, options = {}) {
  const client = new Client({ name: 'orch-conformance-driver', version: '1.0.0' }, { capabilities });
  const transport = new StreamableHTTPClientTransport(new URL(url), options);
  await client.connect(transport);
  return { client, transport };
}

// ---------------------------------------------------------------------------------------
// The scenarios

const scenarios = {
  async initialize(url) {
    const { client, transport } = await connected(url);
    await client.listTools();
    await transport.close();
  },

  async tools_call(url) {
    if (stateless) {
      const { tools } = await call(url, 'tools/list');
      if (tools[0]) await call(url, 'tools/call', { name: tools[0].name, arguments: { a: 2, b: 3 } });
      return;
    }
    const { client, transport } = await connected(url);
    const { tools } = await client.listTools();
    if (tools[0]) await client.callTool({ name: tools[0].name, arguments: { a: 2, b: 3 } });
    await transport.close();
  },

  async 'elicitation-sep1034-client-defaults'(url) {
    const { client, transport } = await (async () => {
      const client = new Client(
        { name: 'orch-conformance-driver', version: '1.0.0' },
        { capabilities: { elicitation: { form: { applyDefaults: true } } } },
      );
      // Accept with nothing filled in: the SDK applies the schema's defaults.
      client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: {} }));
      const transport = new StreamableHTTPClientTransport(new URL(url));
      await client.connect(transport);
      return { client, transport };
    })();
    await client.callTool({ name: 'test_client_elicitation_defaults', arguments: {} });
    await transport.close();
  },

  async 'sse-retry'(url) {
    const { client, transport } = await connected(url, {}, {
      reconnectionOptions: {
        initialReconnectionDelay: 1000,
        maxReconnectionDelay: 10000,
        reconnectionDelayGrowFactor: 1.5,
        maxRetries: 3,
      },
    });
    await client.request(
      { method: 'tools/call', params: { name: 'test_reconnection', arguments: {} } },
      CallToolResultSchema,
    );
    await transport.close();
  },

  async 'request-metadata'(url) {
    await call(url, 'server/discover');
    await call(url, 'tools/list');
  },

  async 'sep-2322-client-request-state'(url) {
    await call(url, 'tools/list');
    const first = await call(url, 'tools/call', { name: 'test_mrtr_echo_state', arguments: {} });
    if (first?.resultType === 'input_required') {
      const inputResponses = accepting(first.inputRequests);
      // Another call in between carries none of the first call's state.
      await call(url, 'tools/call', { name: 'test_mrtr_unrelated', arguments: {} });
      await call(url, 'tools/call', {
        name: 'test_mrtr_echo_state',
        arguments: {},
        inputResponses,
        ...(first.requestState !== undefined ? { requestState: first.requestState } : {}),
      });
    }
    const second = await call(url, 'tools/call', { name: 'test_mrtr_no_state', arguments: {} });
    if (second?.resultType === 'input_required') {
      await call(url, 'tools/call', {
        name: 'test_mrtr_no_state',
        arguments: {},
        inputResponses: accepting(second.inputRequests),
      });
    }
    // No `resultType` is a complete result: nothing is retried.
    await call(url, 'tools/call', { name: 'test_mrtr_no_result_type', arguments: {} });
  },

  async 'http-standard-headers'(url) {
    const { tools } = await call(url, 'tools/list');
    for (const tool of tools) await call(url, 'tools/call', { name: tool.name, arguments: {} });
    const { resources } = await call(url, 'resources/list');
    for (const resource of resources) await call(url, 'resources/read', { uri: resource.uri });
    const { prompts } = await call(url, 'prompts/list');
    for (const prompt of prompts) await call(url, 'prompts/get', { name: prompt.name, arguments: {} });
  },

  async 'http-custom-headers'(url) {
    const { tools } = await call(url, 'tools/list');
    const byName = Object.fromEntries(tools.filter(validHeaders).map((t) => [t.name, t]));
    const full = {
      region: 'us-west1',
      priority: 42,
      verbose: false,
      debug: true,
      empty_val: '',
      method_val: 'custom',
      float_val: 3.14,
      non_ascii_val: 'Grüße',
      whitespace_val: '  padded  ',
      leading_space_val: ' leading',
      trailing_space_val: 'trailing ',
      internal_space_val: 'a b c',
      control_char_val: 'bell\u0007',
      crlf_val: 'line\r\nbreak',
      tab_val: '\tindented',
      query: 'not mirrored',
    };
    const calls = [
      ['test_custom_headers', full],
      ['test_custom_headers_null', { region: 'eu', priority: 1, verbose: null, query: 'q' }],
    ];
    for (const [name, args] of calls) {
      const tool = byName[name];
      if (tool) await call(url, 'tools/call', { name, arguments: args }, paramHeaders(tool, args));
    }
  },

  async 'http-invalid-tool-headers'(url) {
    const { tools } = await call(url, 'tools/list');
    for (const tool of tools.filter(validHeaders)) {
      await call(url, 'tools/call', { name: tool.name, arguments: {} }, paramHeaders(tool, {}));
    }
  },

  async 'json-schema-ref-no-deref'(url) {
    if (stateless) return void (await call(url, 'tools/list'));
    const { client, transport } = await connected(url);
    await client.listTools();
    await transport.close();
  },

  async 'json-schema-2020-12-preservation'(url) {
    const focal = (tools) => {
      const tool = tools.find((t) => t.name === 'json_schema_2020_12_tool');
      if (!tool) throw new Error('json_schema_2020_12_tool is not listed');
      return tool;
    };
    if (stateless) {
      const { tools } = await call(url, 'tools/list');
      await call(url, 'tools/call', { name: 'json_schema_echo', arguments: { schema: focal(tools).inputSchema } });
      return;
    }
    const { client, transport } = await connected(url);
    const { tools } = await client.listTools();
    await client.callTool({ name: 'json_schema_echo', arguments: { schema: focal(tools).inputSchema } });
    await transport.close();
  },
};

// ---------------------------------------------------------------------------------------

let orch;
try {
  let url = args[args.length - 1];
  if (args[0] === '--via') {
    const started = await startOrch(args[1], args[2], url);
    orch = started.child;
    url = started.url;
  }
  const run = scenarios[scenario];
  if (!run) {
    console.error(`client-driver: no scenario ${scenario} (known: ${Object.keys(scenarios).join(', ')})`);
    process.exitCode = 2;
  } else {
    await run(url);
  }
} catch (error) {
  console.error(`client-driver: ${scenario} failed: ${error?.stack ?? error}`);
  process.exitCode = 1;
} finally {
  orch?.kill('SIGTERM');
}
process.exit(process.exitCode ?? 0);

// An MCP server over stdio that is the conformance server over Streamable HTTP: every
// message read on standard input goes to the URL given, every message from there goes
// to standard output, unchanged, through the official TypeScript SDK's two transports.
// The conformance test runs `orch mcp -- node stdio-bridge.mjs URL` to front the
// server as a stdio upstream (one bridge, and one server session, per
// gateway session).
//
//     node stdio-bridge.mjs http://127.0.0.1:PORT/mcp

import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const url = process.argv[2];
if (!url) {
  console.error('usage: node stdio-bridge.mjs URL');
  process.exit(2);
}
// A server says what is not about one request (a tool-list change, say) on its
// standalone stream, the GET the transport opens after `notifications/initialized`, and
// drops it while that stream is not open. Over
// stdio nothing is dropped, so the bridge holds every later message until the GET has
// been answered (opened or refused): otherwise a request could reach the server first
// and what it says there be lost.
let standaloneAnswered = () => {};
// A request of the revision without a handshake also says over HTTP what its body says:
// `Mcp-Method`, `Mcp-Name`, and an `Mcp-Param-<name>` header for each argument its
// tool's schema marks `x-mcp-header` (learned from the tool lists the server sends).
const headerParams = new Map();
const withStandardHeaders = (init) => {
  let message;
  try {
    message = typeof init?.body === 'string' ? JSON.parse(init.body) : undefined;
  } catch {
    return init;
  }
  if (typeof message?.method !== 'string' || !message.params?._meta?.['io.modelcontextprotocol/protocolVersion'])
    return init;
  const headers = new Headers(init.headers);
  headers.set('Mcp-Method', message.method);
  const name = { 'tools/call': message.params.name, 'prompts/get': message.params.name, 'resources/read': message.params.uri }[
    message.method
  ];
  if (typeof name === 'string') headers.set('Mcp-Name', name);
  if (message.method === 'tools/call') {
    for (const [param, header] of headerParams.get(message.params.name) ?? []) {
      const value = message.params.arguments?.[param];
      if (value === undefined || value === null) continue;
      const text = String(value);
      headers.set(
        `Mcp-Param-${header}`,
        /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(text) ? text : `=?base64?${Buffer.from(text).toString('base64')}?=`,
      );
    }
  }
  return { ...init, headers };
};
const learnHeaderParams = (result) => {
  for (const tool of Array.isArray(result?.tools) ? result.tools : []) {
    const params = Object.entries(tool?.inputSchema?.properties ?? {})
      .filter(([, schema]) => typeof schema?.['x-mcp-header'] === 'string')
      .map(([param, schema]) => [param, schema['x-mcp-header']]);
    headerParams.set(tool.name, params);
  }
};
// Over HTTP a 2026-07-28 server refuses a request with an HTTP status as well as a
// JSON-RPC error; over stdio there is no status, and the error is the answer. The SDK's
// client transport takes a non-2xx status for a failed POST, so an error answer is
// handed to it as a 200.
const errorAsAnswer = async (response) => {
  if (response.ok || !response.headers.get('content-type')?.includes('application/json')) return response;
  const body = await response.text();
  let message;
  try {
    message = JSON.parse(body);
  } catch {
    message = undefined;
  }
  const answer = message?.jsonrpc === '2.0' && message.error && message.id !== undefined && message.id !== null;
  return new Response(body, answer ? { status: 200, headers: response.headers } : response);
};
const watchedFetch = async (input, init) => {
  try {
    const response = await fetch(input, withStandardHeaders(init));
    return init?.method === 'POST' ? await errorAsAnswer(response) : response;
  } finally {
    if (init?.method === 'GET') standaloneAnswered();
  }
};
const up = new StreamableHTTPClientTransport(new URL(url), { fetch: watchedFetch });
const down = new StdioServerTransport();
// The initialize request's id: its answer names the revision the HTTP requests carry.
let initializeId;
// Messages wait for this in order (the standalone stream, once initialized is sent).
let ready = Promise.resolve();

const forward = (message) => {
  // A request of a revision without the handshake names its revision in `_meta`; the
  // HTTP request carries it in the MCP-Protocol-Version header.
  const revision = message.params?._meta?.['io.modelcontextprotocol/protocolVersion'];
  if (typeof revision === 'string') up.setProtocolVersion(revision);
  up.send(message).catch((error) => {
    console.error(`stdio-bridge: ${error}`);
    if (message.id !== undefined && message.method !== undefined) {
      down.send({ jsonrpc: '2.0', id: message.id, error: { code: -32603, message: String(error) } });
    }
  });
};

down.onmessage = (message) => {
  if (message.method === 'initialize') initializeId = message.id;
  ready = ready.then(() => forward(message));
  if (message.method === 'notifications/initialized') {
    const opened = new Promise((resolve) => {
      standaloneAnswered = resolve;
    });
    // A server that never answers the GET holds nothing up for longer than this.
    ready = ready.then(() => Promise.race([opened, new Promise((r) => setTimeout(r, 10000))]));
  }
};
up.onmessage = (message) => {
  learnHeaderParams(message.result);
  if (initializeId !== undefined && message.id === initializeId && message.result) {
    up.setProtocolVersion(message.result.protocolVersion);
  }
  down.send(message);
};
up.onerror = (error) => console.error(`stdio-bridge: ${error}`);
const quit = async () => {
  await up.terminateSession().catch(() => {});
  process.exit(0);
};
down.onclose = quit;
process.stdin.on('end', quit);

await up.start();
await down.start();

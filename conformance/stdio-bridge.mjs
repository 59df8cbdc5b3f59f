// An MCP server over stdio that is the reference server over Streamable HTTP: every
// message read on standard input goes to the URL given, every message from there goes
// to standard output, unchanged, through the official TypeScript SDK's two transports.
// The conformance test runs `orch mcp -- node stdio-bridge.mjs URL` to front the
// reference server as a stdio upstream (one bridge, and one reference session, per
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
// The server says what is not about one request (the reference's elicitation and
// sampling tools ask that way) on its standalone stream, the GET the transport opens
// after `notifications/initialized`, and drops it while that stream is not open. Over
// stdio nothing is dropped, so the bridge holds every later message until the GET has
// been answered (opened or refused): otherwise a tool call could reach the server first
// and its question be lost.
let standaloneAnswered = () => {};
const watchedFetch = async (input, init) => {
  try {
    return await fetch(input, init);
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

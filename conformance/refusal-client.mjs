// A client of `orch mcp` on the official TypeScript SDK: it lists the tools once (the
// SDK keeps their output schemas and checks results against them), makes the calls
// given, and prints what `callTool` returned for each as one JSON array — or, when a
// `callTool` throws (as it does for a result that breaks the tool's declared
// `outputSchema`), the error, with exit status 1. orch-cli/tests/mcp_relay.rs uses it to
// check that a refusal of a tool with an output schema reaches the client as a result.
//
//     node refusal-client.mjs http://127.0.0.1:PORT/mcp '[["pay", {"run": "r1"}], ["pay", {"run": "r1"}]]'

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, calls] = process.argv.slice(2);
const client = new Client({ name: 'refusal-client', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const { tools } = await client.listTools();
const seen = [];
for (const [name, args] of JSON.parse(calls)) {
  const tool = tools.find((t) => t.name === name);
  try {
    const result = await client.callTool({ name, arguments: args });
    seen.push({
      tool: name,
      hasOutputSchema: Boolean(tool?.outputSchema),
      isError: result.isError ?? false,
      structuredContent: result.structuredContent ?? null,
      refusal: result._meta?.['orch/refusal'] ?? null,
    });
  } catch (error) {
    console.log(JSON.stringify({ tool: name, threw: String(error), before: seen }));
    await client.close();
    process.exit(1);
  }
}
console.log(JSON.stringify(seen));
await client.close();

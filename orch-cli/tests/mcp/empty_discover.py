"""An MCP server over stdio, written by hand (no SDK, which would not send this), that
answers `server/discover` with an empty result `{}` — neither a DiscoverResult nor an
error — and otherwise speaks the 2025-11-25 handshake: `initialize`, `tools/list` with
one tool `echo`, `tools/call` of it. A client must fall back to `initialize` rather
than give up (orch-cli/tests/mcp_revisions.rs).

    python empty_discover.py
"""

import json
import sys

TOOLS = [{"name": "echo", "description": "Echo the text.", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]


def reply(id, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    method, id = message.get("method"), message.get("id")
    if id is None:
        continue  # notifications
    if method == "server/discover":
        reply(id, {})
    elif method == "initialize":
        reply(id, {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "empty-discover", "version": "1.0.0"},
        })
    elif method == "tools/list":
        reply(id, {"tools": TOOLS})
    elif method == "tools/call":
        text = message.get("params", {}).get("arguments", {}).get("text", "")
        reply(id, {"content": [{"type": "text", "text": text}], "isError": False})
    elif method == "ping":
        reply(id, {})
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": f"Method not found: {method}"}}) + "\n")
        sys.stdout.flush()

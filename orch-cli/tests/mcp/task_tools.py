"""A raw MCP tool server (no SDK) whose `pay` answers with `content` *and* a `task`:
the call has started, not finished. Over stdio, or over Streamable HTTP answering every
request with a JSON body (`--http PORT json`) or an event stream (`--http PORT sse`).
Over HTTP, `browse` is refused as a server refuses a request it did not read: HTTP 400
and a JSON-RPC error whose `id` is null. Every `tools/call` it receives is logged to
`--log` as a JSON line."""

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOLS = ["pay", "receipt", "browse", "slow", "change_tools"]
VERSIONS = ["2025-03-26", "2025-06-18", "2025-11-25"]


def answer(message, log):
    """The response to `message`, or None for a notification."""
    if "id" not in message or "method" not in message:
        return None
    method, params = message["method"], message.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        result = {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[-1],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "task-tools", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": [{"name": t, "inputSchema": {"type": "object"}} for t in TOOLS]}
    elif method == "tools/call":
        name = params.get("name")
        with open(log, "a") as f:
            f.write(json.dumps({"tool": name}) + "\n")
        if name == "pay":
            result = {
                "content": [{"type": "text", "text": "payment started"}],
                "task": {
                    "taskId": "task-1",
                    "status": "working",
                    "createdAt": "2026-11-28T00:00:00Z",
                    "lastUpdatedAt": "2026-11-28T00:00:00Z",
                    "ttl": 60000,
                },
            }
        else:
            result = {"content": [{"type": "text", "text": f"{name} done"}]}
    elif method == "ping":
        result = {}
    else:
        return {
            "jsonrpc": "2.0",
            "id": message["id"],
            "error": {"code": -32601, "message": f"Method not found: {method}"},
        }
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def stdio(log):
    for line in sys.stdin:
        if not line.strip():
            continue
        response = answer(json.loads(line), log)
        if response is not None:
            sys.stdout.write(json.dumps(response) + "\n")
            sys.stdout.flush()


def http(port, style, log):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, kind=None, body=b""):
            self.send_response(status)
            if kind:
                self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            message = json.loads(self.rfile.read(length))
            if message.get("method") == "tools/call" and (message.get("params") or {}).get("name") == "browse":
                refused = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "browse is refused unread"}}
                self.reply(400, "application/json", json.dumps(refused).encode())
                return
            response = answer(message, log)
            if response is None:
                self.reply(202)
            elif style == "json":
                self.reply(200, "application/json", json.dumps(response).encode())
            else:
                event = f"event: message\ndata: {json.dumps(response)}\n\n"
                self.reply(200, "text/event-stream", event.encode())

        def do_GET(self):
            self.reply(405)

        def do_DELETE(self):
            self.reply(405)

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--log", required=True)
    parser.add_argument("--http", nargs=2, metavar=("PORT", "STYLE"))
    args = parser.parse_args()
    if args.http:
        http(int(args.http[0]), args.http[1], args.log)
    else:
        stdio(args.log)

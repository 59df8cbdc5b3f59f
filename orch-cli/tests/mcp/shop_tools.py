"""A controllable MCP tool server for the gateway's hostile-client tests, written with
the official Python SDK (PyPI `mcp`). Every tool it starts is appended, one JSON line
per event, to the file given by --log (opened for appending on every write, so several
server processes can share one log and its order is the order of execution):

    {"tool": "pay", "run": "r1", "event": "start", "pid": 123, "version": "2026-07-28"}

(`version`: the MCP revision the call came on.)

- `pay`, `receipt`, `browse`: log and answer (`pay` takes a moment, which widens any
  race between two admissions of it);
- `slow`: logs, sleeps for `seconds`, logs `done` (or `cancelled` when the gateway
  cancels it);
- `change_tools`: from now on `tools/list` never answers, and the server tells its
  client that its tool list changed.

    python shop_tools.py --log FILE              # stdio
    python shop_tools.py --log FILE --http PORT  # Streamable HTTP at /mcp
    ... --legacy   # a handshake-only server: `server/discover` is an unknown method,
                   # so clients fall back to `initialize` (2025-11-25)
"""

import argparse
import json
import os

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.runner import serve_loop
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND, RequestParams

parser = argparse.ArgumentParser()
parser.add_argument("--log", required=True)
parser.add_argument("--http", type=int)
parser.add_argument("--legacy", action="store_true")
args = parser.parse_args()

hang_tools_list = False


class Shop(MCPServer):
    async def list_tools(self):
        if hang_tools_list:
            await anyio.sleep_forever()
        return await super().list_tools()


server = Shop("shop-tools")

if args.legacy:

    async def no_discover(ctx, params):
        raise MCPError(METHOD_NOT_FOUND, "Method not found: server/discover (this server speaks 2025-11-25)")

    server._lowlevel_server.add_request_handler("server/discover", RequestParams, no_discover)

version = None


def log(tool, run, event="start", **extra):
    with open(args.log, "a", encoding="utf-8") as f:
        line = {"tool": tool, "run": run, "event": event, "pid": os.getpid(), "version": version}
        line.update(extra)
        f.write(json.dumps(line) + "\n")


def seen(ctx):
    global version
    version = ctx.protocol_version


@server.tool()
async def pay(run: str, ctx: Context, amount: int = 0) -> str:
    """Pay `amount` (allowed once per run)."""
    seen(ctx)
    log("pay", run, amount=amount)
    await anyio.sleep(0.3)
    return "paid"


@server.tool()
async def receipt(run: str, ctx: Context) -> str:
    """Print the receipt (only after paying)."""
    seen(ctx)
    log("receipt", run)
    return "receipt"


@server.tool()
async def browse(run: str, ctx: Context) -> str:
    """Look around."""
    seen(ctx)
    log("browse", run)
    return "browsed"


@server.tool()
async def slow(run: str, seconds: float) -> str:
    """Take `seconds` to answer."""
    log("slow", run)
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        log("slow", run, "cancelled")
        raise
    log("slow", run, "done")
    return "slow done"


@server.tool()
async def change_tools(run: str, ctx: Context) -> str:
    """From now on, tools/list hangs; tells the client the list changed."""
    global hang_tools_list
    seen(ctx)
    log("change_tools", run)
    hang_tools_list = True
    if version is not None and version >= "2026-07-28":
        await ctx.notify_tools_changed()  # on the client's subscriptions/listen stream
    else:
        await ctx.session.send_tool_list_changed()
    return "changed"


async def legacy_stdio():
    # The SDK's handshake-only loop: `server.run()` would serve whichever era the
    # client opens with.
    low = server._lowlevel_server
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(low, read, write, lifespan_state=state, init_options=low.create_initialization_options())


if args.http:
    server.run("streamable-http", host="127.0.0.1", port=args.http)
elif args.legacy:
    anyio.run(legacy_stdio)
else:
    server.run()

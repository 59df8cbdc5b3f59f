"""A controllable MCP tool server for the gateway's hostile-client tests, written with
the official Python SDK (PyPI `mcp`). Every tool it starts is appended, one JSON line
per event, to the file given by --log (opened for appending on every write, so several
server processes can share one log and its order is the order of execution):

    {"tool": "pay", "run": "r1", "event": "start", "pid": 123}

- `pay`, `receipt`, `browse`: log and answer (`pay` takes a moment, which widens any
  race between two admissions of it);
- `slow`: logs, sleeps for `seconds`, logs `done` (or `cancelled` when the gateway
  cancels it);
- `change_tools`: from now on `tools/list` never answers, and the server tells its
  client that its tool list changed.

    python shop_tools.py --log FILE              # stdio
    python shop_tools.py --log FILE --http PORT  # Streamable HTTP at /mcp
"""

import argparse
import json
import os

import anyio
from mcp.server.mcpserver import Context, MCPServer

parser = argparse.ArgumentParser()
parser.add_argument("--log", required=True)
parser.add_argument("--http", type=int)
args = parser.parse_args()

hang_tools_list = False


class Shop(MCPServer):
    async def list_tools(self):
        if hang_tools_list:
            await anyio.sleep_forever()
        return await super().list_tools()


server = Shop("shop-tools")


def log(tool, run, event="start"):
    with open(args.log, "a", encoding="utf-8") as f:
        f.write(json.dumps({"tool": tool, "run": run, "event": event, "pid": os.getpid()}) + "\n")


@server.tool()
async def pay(run: str) -> str:
    """Pay (allowed once per run)."""
    log("pay", run)
    await anyio.sleep(0.3)
    return "paid"


@server.tool()
async def receipt(run: str) -> str:
    """Print the receipt (only after paying)."""
    log("receipt", run)
    return "receipt"


@server.tool()
async def browse(run: str) -> str:
    """Look around."""
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
    log("change_tools", run)
    hang_tools_list = True
    await ctx.session.send_tool_list_changed()
    return "changed"


if args.http:
    server.run("streamable-http", host="127.0.0.1", port=args.http)
else:
    server.run()

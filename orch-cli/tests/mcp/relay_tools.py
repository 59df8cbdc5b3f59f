"""An MCP tool server for the gateway's relay tests, written with the official Python
SDK (PyPI `mcp`): its one tool talks back to the client that called it, the way servers
do on the handshake revisions, so a test can see that each message reaches that client
and no other.

Each MCP session keeps the logging level its client set (`logging/setLevel`; none set:
every level) and gets only log lines at or above it.

`converse(who)`: logs `"<who>: <level>"` at debug, info and error; reports progress
1/2 and 2/2; asks the human (`elicitation/create`, message `"<who>: confirm?"`); asks
for a completion (`sampling/createMessage`, prompt `who`); lists the client's roots;
answers with what it got, as JSON text:

    {"who": "a", "level": "info", "elicited": {...}, "sampled": "...", "roots": [...]}

(`level`: the level this session's client set.)

`countdown(n)`: reports progress 1/n … n/n back to back and answers "done".

A request the client refuses (no such capability) is reported as `{"error": "..."}` in
its place instead of failing the call.

    python relay_tools.py                 # stdio
    python relay_tools.py --http PORT     # Streamable HTTP at /mcp
"""

import argparse
import json

from mcp import types
from mcp.server.mcpserver import Context, MCPServer

parser = argparse.ArgumentParser()
parser.add_argument("--http", type=int)
args = parser.parse_args()

server = MCPServer("relay-tools")

LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
# The level each session's client set, by session: its Mcp-Session-Id over HTTP; over
# stdio the process serves one session.
levels = {}


def session_key(request_context):
    headers = getattr(getattr(request_context, "request", None), "headers", None)
    return headers.get("mcp-session-id") if headers is not None else "stdio"


async def set_level(ctx, params):
    levels[session_key(ctx)] = params.level
    return types.EmptyResult()


server._lowlevel_server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)


async def attempt(what):
    try:
        return await what
    except Exception as e:  # the client's refusal, as data for the test
        return {"error": str(e)}


@server.tool()
async def converse(who: str, ctx: Context) -> str:
    """Talk back to the calling client: logs, progress, a question, a sample, its roots."""
    session = ctx.request_context.session
    floor = levels.get(session_key(ctx.request_context))
    for level in ("debug", "info", "error"):
        if floor is None or LEVELS.index(level) >= LEVELS.index(floor):
            await ctx.log(level, f"{who}: {level}")
    await ctx.report_progress(1, 2, f"{who}: half")
    elicited = await attempt(
        session.elicit(
            f"{who}: confirm?",
            {"type": "object", "properties": {"ok": {"type": "boolean"}}},
            related_request_id=ctx.request_id,
        )
    )
    if not isinstance(elicited, dict):
        elicited = {"action": elicited.action, "content": elicited.content}
    sampled = await attempt(
        session.create_message(
            [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=who))],
            max_tokens=16,
            related_request_id=ctx.request_id,
        )
    )
    if not isinstance(sampled, dict):
        sampled = sampled.content.text
    roots = await attempt(session.list_roots())
    if not isinstance(roots, dict):
        roots = [str(r.uri) for r in roots.roots]
    await ctx.report_progress(2, 2, f"{who}: done")
    return json.dumps({"who": who, "level": floor, "elicited": elicited, "sampled": sampled, "roots": roots})


@server.tool()
async def countdown(n: int, ctx: Context) -> str:
    """Report progress 1/n … n/n back to back, then answer at once: the last progress
    and the answer leave together, so a relay that does not keep their order loses it."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
    return "done"


if args.http:
    server.run("streamable-http", host="127.0.0.1", port=args.http)
else:
    server.run()

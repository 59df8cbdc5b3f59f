"""A client of `orch mcp` for the relay tests, written with the official Python SDK
(PyPI `mcp`) on the handshake revision (2025-11-25): it answers what the upstream asks
through the gateway, as the client named `--who`, and prints what it saw as one JSON
object on stdout.

    python relay_client.py --url http://127.0.0.1:PORT/mcp --who a --level info \
        [--barrier DIR --peers 2] [--bare]
    python relay_client.py --who a -- orch mcp relay.json -- python relay_tools.py

Steps: connect (over Streamable HTTP, or start the command after `--` and speak over
its stdio); set the logging level (`--level`); with `--barrier`, wait until `--peers`
clients have connected (each writes a file into DIR), so every client is connected
while the others call; call `converse(who)` with a progress callback; wait a moment
for stray messages; print

    {"result": {...converse's answer...}, "logs": [...], "progress": [...],
     "asked": [...], "sampled": [...], "roots": n}

`--countdown N TIMES` instead calls `countdown(N)` TIMES times and prints how many
progress notifications arrived before each answer, in order (-1: out of order):
`{"countdowns": [N, N, ...]}`.

`--bare` declares no elicitation, sampling or roots capability (no callbacks).
"""

import argparse
import json
import os
import sys

import anyio
from mcp import Client, StdioServerParameters, types

parser = argparse.ArgumentParser()
parser.add_argument("--url")
parser.add_argument("--who", required=True)
parser.add_argument("--level")
parser.add_argument("--barrier")
parser.add_argument("--peers", type=int, default=1)
parser.add_argument("--bare", action="store_true")
parser.add_argument("--countdown", type=int, nargs=2, metavar=("N", "TIMES"))
parser.add_argument("command", nargs="*")
args = parser.parse_args()

seen = {"logs": [], "progress": [], "asked": [], "sampled": [], "roots": 0}


async def on_log(params):
    seen["logs"].append(params.data)


async def on_elicit(context, params):
    seen["asked"].append(params.message)
    return types.ElicitResult(action="accept", content={"ok": True})


async def on_sample(context, params):
    prompt = params.messages[0].content.text
    seen["sampled"].append(prompt)
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=f"{args.who} sampled {prompt}"),
        model="test",
    )


async def on_roots(context):
    seen["roots"] += 1
    return types.ListRootsResult(roots=[types.Root(uri=f"file:///{args.who}")])


async def on_progress(progress, total, message):
    seen["progress"].append([progress, total, message])


async def barrier():
    if not args.barrier:
        return
    open(os.path.join(args.barrier, args.who), "w").close()
    with anyio.fail_after(30):
        while len(os.listdir(args.barrier)) < args.peers:
            await anyio.sleep(0.02)


async def main():
    if args.url:
        server = args.url
    else:
        server = StdioServerParameters(command=args.command[0], args=args.command[1:])
    callbacks = {}
    if not args.bare:
        callbacks = dict(
            elicitation_callback=on_elicit,
            sampling_callback=on_sample,
            list_roots_callback=on_roots,
        )
    async with Client(server, mode="legacy", logging_callback=on_log, **callbacks) as client:
        if args.level:
            await client.set_logging_level(args.level)
        await barrier()
        if args.countdown:
            n, times = args.countdown
            counts = []
            for _ in range(times):
                got = []

                async def count(progress, total, message, got=got):
                    got.append(progress)

                await client.call_tool("countdown", {"n": n}, progress_callback=count)
                # Out of order: -1.
                counts.append(len(got) if got == sorted(got) else -1)
            print(json.dumps({"countdowns": counts}))
            return
        result = await client.call_tool("converse", {"who": args.who}, progress_callback=on_progress)
        if result.is_error:
            print(json.dumps({"error": result.content[0].text}))
            sys.exit(1)
        seen["result"] = json.loads(result.content[0].text)
        # Messages for other sessions would arrive about now.
        await anyio.sleep(1)
    print(json.dumps(seen))


anyio.run(main)

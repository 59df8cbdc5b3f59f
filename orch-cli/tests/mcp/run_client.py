"""A client of `orch mcp` written with the official Python SDK (PyPI `mcp`), on the
revision given: it presents a run token, walks the shop workflow (tests/mcp/shop.json)
and prints what it saw as one JSON object on stdout.

    python run_client.py --url http://127.0.0.1:PORT/mcp --token orch_run_... \
        --mode 2026-07-28 --run r1        # or --mode legacy (2025-11-25)

Steps: list the tools; call `receipt` (the workflow refuses it before `pay`); call
`pay` while listening for the list change (a `subscriptions/listen` stream on
2026-07-28, `notifications/tools/list_changed` on the session otherwise); list the tools
again; call `receipt`. `--only-list` stops after the first listing, `--resume` starts at
the second listing (another client of the same run paid already).

`--listen-for SECONDS` (2026-07-28) only listens: it prints `{"listening": true}` once
the stream is acknowledged, a line per event, and at the end
`{"events": [...], "ended": bool}` (`ended`: the server closed the stream before the
time was up).
"""

import argparse
import json

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

parser = argparse.ArgumentParser()
parser.add_argument("--url", required=True)
parser.add_argument("--token")
parser.add_argument("--mode", required=True, choices=["legacy", "2026-07-28"])
parser.add_argument("--run", default="r1")
parser.add_argument("--only-list", action="store_true")
parser.add_argument("--resume", action="store_true")
parser.add_argument("--listen-for", type=float)
args = parser.parse_args()

changed = anyio.Event()


async def on_message(message):
    root = getattr(message, "root", message)
    if getattr(root, "method", None) == "notifications/tools/list_changed":
        changed.set()


def names(listed):
    return sorted(t.name for t in listed.tools)


def refusal_of(result):
    """The refusal's facts `orch mcp` put in the result's `_meta` (`orch/refusal`)."""
    meta = result.meta
    if meta is not None and hasattr(meta, "model_dump"):
        meta = meta.model_dump(by_alias=True)
    return (meta or {}).get("orch/refusal")


def summary(result):
    text = result.content[0].text if result.content else None
    # A refusal's facts are data: `structuredContent` for a tool without an output
    # schema, `_meta["orch/refusal"]` always (the shop's tools have output schemas).
    refusal = refusal_of(result)
    structured = {"refusal": refusal} if refusal is not None else result.structured_content
    return {"isError": bool(result.is_error), "structured": structured, "text": text}


async def main():
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    out = {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(args.url, http_client=http)
        async with Client(transport, mode=args.mode, message_handler=on_message) as client:
            out["version"] = client.protocol_version
            if args.listen_for is not None:
                await listen_only(client)
                return
            if not args.resume:
                out["before"] = names(await client.list_tools())
                if args.only_list:
                    print(json.dumps(out))
                    return
                out["early_receipt"] = summary(await client.call_tool("receipt", {"run": args.run}))
                if args.mode == "legacy":
                    out["pay"] = summary(await client.call_tool("pay", {"run": args.run}))
                    with anyio.move_on_after(10):
                        await changed.wait()
                    out["list_changed"] = changed.is_set()
                else:
                    async with client.listen(tools_list_changed=True) as subscription:
                        out["pay"] = summary(await client.call_tool("pay", {"run": args.run}))
                        out["list_changed"] = False
                        with anyio.move_on_after(10):
                            async for event in subscription:
                                out["list_changed"] = type(event).__name__
                                break
            out["after"] = names(await client.list_tools())
            out["receipt"] = summary(await client.call_tool("receipt", {"run": args.run}))
            out["second_pay"] = summary(await client.call_tool("pay", {"run": args.run}))
    print(json.dumps(out))


async def listen_only(client):
    events, ended = [], False
    async with client.listen(tools_list_changed=True) as subscription:
        print(json.dumps({"listening": True}), flush=True)
        with anyio.move_on_after(args.listen_for):
            async for event in subscription:
                events.append(type(event).__name__)
                print(json.dumps({"event": events[-1]}), flush=True)
            ended = True
    print(json.dumps({"events": events, "ended": ended}), flush=True)


anyio.run(main)

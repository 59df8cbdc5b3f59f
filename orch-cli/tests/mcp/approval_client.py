"""A client of `orch mcp` written with the official Python SDK (PyPI `mcp`) that answers
the gateway's approval questions (semantics §13) through its elicitation callback: on a
handshake revision the gateway sends `elicitation/create` while the call waits; on
2026-07-28 it answers the call with an `InputRequiredResult` and the SDK retries the call
with the answer. Walks the gated shop (tests/mcp/gated_shop.json) and prints what it
saw as one JSON object on stdout.

    python approval_client.py --url http://127.0.0.1:PORT/mcp --token orch_run_... \
        --mode 2026-07-28 --run r1 --answers reject,approve
    ... --no-elicitation   # a client that declares no elicitation capability

Calls `pay` with amounts 5, 5, 6, 7 until one succeeds (a rejection of amount 5 is
held by the run, so the second `pay` of 5 is refused without a new question), then
`receipt`. Answers are used in order, then `cancel`: `approve`, `reject` (accept with
approve=false), `decline` or `cancel`.
"""

import argparse
import json

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult

parser = argparse.ArgumentParser()
parser.add_argument("--url", required=True)
parser.add_argument("--token")
parser.add_argument("--mode", required=True, choices=["legacy", "2026-07-28"])
parser.add_argument("--run", default="r1")
parser.add_argument("--answers", default="")
parser.add_argument("--no-elicitation", action="store_true")
args = parser.parse_args()

answers = [a for a in args.answers.split(",") if a]
questions = []


async def on_elicit(context, params):
    questions.append({"message": params.message, "schema": params.requested_schema})
    answer = answers.pop(0) if answers else "cancel"
    if answer == "approve":
        return ElicitResult(action="accept", content={"approve": True})
    if answer == "reject":
        return ElicitResult(action="accept", content={"approve": False})
    return ElicitResult(action=answer)


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
    out = {"calls": []}
    callback = None if args.no_elicitation else on_elicit
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        transport = streamable_http_client(args.url, http_client=http)
        async with Client(transport, mode=args.mode, elicitation_callback=callback) as client:
            out["version"] = client.protocol_version
            for amount in [5, 5, 6, 7]:
                asked = len(questions)
                result = await client.call_tool("pay", {"run": args.run, "amount": amount})
                out["calls"].append(
                    {"tool": "pay", "amount": amount, "asked": len(questions) - asked, **summary(result)}
                )
                if not result.is_error:
                    break
            result = await client.call_tool("receipt", {"run": args.run})
            out["calls"].append({"tool": "receipt", "asked": 0, **summary(result)})
    out["questions"] = questions
    print(json.dumps(out))


anyio.run(main)

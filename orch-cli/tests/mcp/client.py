"""The MCP client side of the `orch mcp` tests, on the official Python SDK (PyPI `mcp`).
Each scenario asserts what a real client sees and exits non-zero on the first
difference; the Rust tests (orch-cli/tests/mcp.rs) start it and check the upstream's
log of executed tools.

    python client.py [--mode legacy|2026-07-28] stdio ORCH TEMPLATE UPSTREAM_PY LOG
    python client.py ... stdio-url ORCH TEMPLATE UPSTREAM_URL
    python client.py ... crash ORCH TEMPLATE UPSTREAM_PY LOG
    python client.py ... crash-http URL
    python client.py ... http URL
    python client.py ... share URL_A URL_B

`--mode` is the revision the client speaks: `legacy` (the `initialize` handshake,
2025-11-25; the default) or `2026-07-28` (no sessions, reached the way a dual-era client
does: `server/discover` first; over HTTP each client first starts a run with POST /runs
and presents its token; it hears of tool-list changes on a `subscriptions/listen`
stream).
"""

import asyncio
import contextlib
import json
import sys

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError


MODE = "legacy"


def modern():
    return MODE != "legacy"


class Seen:
    """The notifications a client received."""

    def __init__(self):
        self.tool_list_changed = 0

    async def __call__(self, message):
        if isinstance(message, types.ToolListChangedNotification):
            self.tool_list_changed += 1


async def start_run(url):
    """POST /runs next to the MCP endpoint `url`: the new run's token."""
    async with httpx2.AsyncClient() as raw:
        r = await raw.post(url.rsplit("/", 1)[0] + "/runs")
        expect(r.status_code, 201, f"status of POST /runs: {r.text}")
        return r.json()["token"]


async def for_url(url, http_client=None):
    """What a client connects to at `url`: on 2026-07-28, with a fresh run's token."""
    if not modern():
        if http_client is None:
            return url
        return streamable_http_client(url, http_client=http_client)
    token = await start_run(url)
    if http_client is None:
        http_client = httpx2.AsyncClient(timeout=httpx2.Timeout(30, read=300))
    http_client.headers["Authorization"] = f"Bearer {token}"
    return streamable_http_client(url, http_client=http_client)


def connect(server, seen=None):
    # On 2026-07-28 as a dual-era client does: `server/discover` first, falling back to
    # `initialize` only if the server does not know it (the walk asserts it did not).
    return Client(server, cache=None, message_handler=seen, mode="auto" if modern() else "legacy")


@contextlib.asynccontextmanager
async def listening(client, seen):
    """On 2026-07-28, count the tool-list changes of a `subscriptions/listen` stream
    (the handshake revisions' notifications reach `seen` by themselves)."""
    if not modern():
        yield
        return

    async def count():
        async with client.listen(tools_list_changed=True) as subscription:
            acked.set()
            async for _event in subscription:
                seen.tool_list_changed += 1

    acked = asyncio.Event()
    task = asyncio.create_task(count())
    await asyncio.wait_for(acked.wait(), 20)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def names(client):
    return [t.name for t in (await client.list_tools()).tools]


async def wait_for(predicate, what):
    for _ in range(100):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def text(result):
    return " ".join(c.text for c in result.content if getattr(c, "text", None) is not None)


def refusal_of(result):
    """The refusal's facts `orch mcp` put in the result's `_meta` (`orch/refusal`)."""
    meta = result.meta
    if meta is not None and hasattr(meta, "model_dump"):
        meta = meta.model_dump(by_alias=True)
    return (meta or {}).get("orch/refusal")


def expect(actual, expected, what):
    assert actual == expected, f"{what}: expected {expected!r}, got {actual!r}"


def stdio_params(orch, template, upstream, log):
    return StdioServerParameters(
        command=orch,
        args=["mcp", template, "--", sys.executable, upstream, "--log", log],
    )


async def workflow(client, seen):
    """The research workflow of examples/mcp/research.json, misbehaving on the way."""
    async with listening(client, seen):
        await walk(client, seen)


async def walk(client, seen):
    expect(client.protocol_version, "2026-07-28" if modern() else "2025-11-25", "negotiated revision")
    caps = client.server_capabilities
    assert caps.tools is not None and caps.tools.list_changed, "advertises tools.listChanged"
    expect(await names(client), ["search"], "tools at the start")

    # Out of order: refused with the reason, never forwarded.
    refused = await client.call_tool("summarize", {"text": "t"})
    assert refused.is_error, "an out-of-order call is an error result"
    expect(
        text(refused),
        "error: `summarize` was not run: the sequence of step `Research` expects `search` at position 0. Allowed now: search.",
        "refusal text",
    )
    facts = {
        "tool": "summarize",
        "reason": "out_of_sequence",
        "step": "Research",
        "expected": ["search"],
        "allowed": ["search"],
        "message": text(refused),
    }
    expect(refusal_of(refused), facts, "the refusal as data, in _meta")
    # Not as structured content: `summarize` declares an output schema (the SDK derives
    # one from its `-> str`), which a refusal would not match.
    expect(refused.structured_content, None, "no structuredContent against the output schema")
    # Denied everywhere, and unknown to the upstream: refused too.
    assert (await client.call_tool("delete_all", {})).is_error
    unknown = await client.call_tool("format_disk", {})
    assert unknown.is_error and "there is no tool `format_disk`" in text(unknown), text(unknown)

    before = seen.tool_list_changed
    ok = await client.call_tool("search", {"query": "orchestration"})
    assert not ok.is_error, text(ok)
    expect(text(ok), "3 results for orchestration", "search result")
    await wait_for(lambda: seen.tool_list_changed > before, "tools/list_changed after search")
    expect(await names(client), ["fetch"], "tools after search")

    # The upstream fails the call (isError): not recorded, fetch is still expected.
    failed = await client.call_tool("fetch", {"url": "bad"})
    assert failed.is_error, "the upstream's own error result comes through"
    expect(await names(client), ["fetch"], "tools after a failed fetch")

    assert not (await client.call_tool("fetch", {"url": "https://example.org"})).is_error
    expect(await names(client), ["summarize"], "tools after fetch")
    assert not (await client.call_tool("summarize", {"text": "page"})).is_error
    # Report: note and crash (declared), lookup_weather (foreign, by the pattern lookup_*),
    # in the upstream's order; delete_all never.
    expect(await names(client), ["note", "lookup_weather", "crash"], "tools in Report")
    assert not (await client.call_tool("lookup_weather", {"city": "Oslo"})).is_error
    assert not (await client.call_tool("note", {"text": "done"})).is_error
    assert (await client.call_tool("delete_all", {})).is_error

    # Prompts and resources pass through unchanged.
    expect([p.name for p in (await client.list_prompts()).prompts], ["brief"], "prompts")
    prompt = await client.get_prompt("brief", {"topic": "MCP"})
    expect(prompt.messages[0].content.text, "Research MCP and report back.", "prompt text")
    expect([str(r.uri) for r in (await client.list_resources()).resources], ["notes://readme"], "resources")
    read = await client.read_resource("notes://readme")
    expect(read.contents[0].text, "Read me first.", "resource text")


async def stdio(orch, template, upstream, log):
    seen = Seen()
    async with connect(stdio_params(orch, template, upstream, log), seen) as client:
        await workflow(client, seen)


async def stdio_url(orch, template, url):
    seen = Seen()
    params = StdioServerParameters(command=orch, args=["mcp", template, "--upstream-url", url])
    async with connect(params, seen) as client:
        await workflow(client, seen)


async def crash(orch, template, upstream, log):
    await crash_through(stdio_params(orch, template, upstream, log))


async def crash_http(url):
    await crash_through(await for_url(url))


async def crash_through(server):
    async with connect(server) as client:
        for tool, arguments in [("search", {"query": "q"}), ("fetch", {"url": "u"}), ("summarize", {"text": "t"})]:
            assert not (await client.call_tool(tool, arguments)).is_error
        try:
            result = await asyncio.wait_for(client.call_tool("crash", {}), timeout=20)
        except MCPError as e:
            assert "upstream MCP server" in e.error.message, e.error.message
        except (asyncio.TimeoutError, TimeoutError):
            raise AssertionError("the call that crashed the upstream was never answered")
        else:
            raise AssertionError(f"the crash was answered with a result: {result}")


async def http(url):
    seen_a, seen_b = Seen(), Seen()
    server_a, server_b = await for_url(url), await for_url(url)
    async with connect(server_a, seen_a) as a, connect(server_b, seen_b) as b:
        await workflow(a, seen_a)
        # Session (run) B never moved: it starts where every one starts.
        expect(await names(b), ["search"], "the other session's tools")
        assert (await b.call_tool("fetch", {"url": "u"})).is_error
        assert not (await b.call_tool("search", {"query": "b"})).is_error
        expect(await names(b), ["fetch"], "session B after its own search")
        expect(await names(a), ["note", "lookup_weather", "crash"], "session A unchanged by B")

    # Malformed bodies get JSON-RPC errors, not a crash; the gateway goes on serving.
    async with httpx2.AsyncClient() as raw:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        r = await raw.post(url, content=b"{not json", headers=headers)
        expect(r.status_code, 400, "status for a body that is not JSON")
        expect(r.json()["error"]["code"], -32700, "error code for a body that is not JSON")
        r = await raw.post(url, content=json.dumps({"jsonrpc": "2.0", "id": 9, "params": {}}), headers=headers)
        expect(r.json()["error"]["code"], -32600, "error code for a message without a method")
        expect(r.json()["id"], 9, "the id of an invalid request is echoed")
    async with connect(await for_url(url)) as c:
        expect(await names(c), ["search"], "a new session after the malformed requests")


async def share(url_a, url_b):
    """One MCP session whose requests alternate between two gateway instances."""
    target = {"port": None}
    port_b = httpx2.URL(url_b).port

    async def route(request):
        if target["port"] is not None:
            request.url = request.url.copy_with(port=target["port"])

    http_client = httpx2.AsyncClient(event_hooks={"request": [route]}, timeout=httpx2.Timeout(30, read=300))
    server = await for_url(url_a, http_client)
    async with http_client, connect(server) as client:
        assert not (await client.call_tool("search", {"query": "shared"})).is_error
        target["port"] = port_b
        expect(await names(client), ["fetch"], "instance B sees the search made through A")
        assert not (await client.call_tool("fetch", {"url": "u"})).is_error
        target["port"] = httpx2.URL(url_a).port
        expect(await names(client), ["summarize"], "instance A sees the fetch made through B")
        refused = await client.call_tool("note", {"text": "too early"})
        assert refused.is_error and "expects `summarize`" in text(refused), text(refused)


def main():
    global MODE
    args = sys.argv[1:]
    if args[0] == "--mode":
        MODE, args = args[1], args[2:]
    mode, rest = args[0], args[1:]
    scenario = {"stdio": stdio, "stdio-url": stdio_url, "crash": crash, "crash-http": crash_http, "http": http, "share": share}[mode]
    asyncio.run(scenario(*rest))
    print(f"{mode}: ok")


if __name__ == "__main__":
    main()

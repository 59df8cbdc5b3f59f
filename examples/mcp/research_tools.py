"""A small MCP tool server for a research workflow, written with the official Python
SDK (PyPI `mcp`): the upstream of the `orch mcp` walkthrough (docs/mcp.md) and tests.
Every tool it executes is appended, one JSON line per call, to the file given by --log,
so you can see what reached it and what the gateway refused.

    python research_tools.py --log FILE              # stdio
    python research_tools.py --log FILE --http PORT  # Streamable HTTP at /mcp
"""

import argparse
import json
import os

from mcp.server.mcpserver import MCPServer

parser = argparse.ArgumentParser()
parser.add_argument("--log", required=True)
parser.add_argument("--http", type=int)
args = parser.parse_args()

server = MCPServer("research-tools", instructions="Tools for a small research workflow.")


def executed(tool, **arguments):
    with open(args.log, "a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": tool, "arguments": arguments}) + "\n")


@server.tool()
def search(query: str) -> str:
    """Search the web."""
    executed("search", query=query)
    return f"3 results for {query}"


@server.tool()
def fetch(url: str) -> str:
    """Fetch a page. Fails for the URL `bad`."""
    executed("fetch", url=url)
    if url == "bad":
        raise ValueError("cannot fetch `bad`")
    return f"the page at {url}"


@server.tool()
def summarize(text: str) -> str:
    """Summarize a text."""
    executed("summarize", text=text)
    return f"summary of {text}"


@server.tool()
def note(text: str) -> str:
    """Write a note."""
    executed("note", text=text)
    return "noted"


@server.tool()
def lookup_weather(city: str) -> str:
    """A tool the template does not declare (a foreign tool)."""
    executed("lookup_weather", city=city)
    return f"sunny in {city}"


@server.tool()
def delete_all() -> str:
    """Denied by the template in every step."""
    executed("delete_all")
    return "everything is gone"


@server.tool()
def crash() -> str:
    """Ends the server process in the middle of a call."""
    executed("crash")
    os._exit(3)


@server.prompt()
def brief(topic: str) -> str:
    """A research brief."""
    return f"Research {topic} and report back."


@server.resource("notes://readme", name="readme", mime_type="text/plain")
def readme() -> str:
    return "Read me first."


if args.http:
    server.run("streamable-http", host="127.0.0.1", port=args.http)
else:
    server.run()

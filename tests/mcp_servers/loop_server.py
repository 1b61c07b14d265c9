"""What does a real MCP server do when an agent loops on it? A test server for the proxy.

Built with the ``mcp`` SDK's ``MCPServer``. Run as ``loop_server.py`` it serves
stdio; as ``loop_server.py PORT``, streamable HTTP at ``http://127.0.0.1:PORT/mcp``.
Every tool execution appends the tool's name to the file named by
``LOOP_SERVER_CALLS`` (when set), so a test can count what actually reached
the server, whatever the proxy answered.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer(
    "loop-server", instructions="A server that an agent loops on.", log_level="WARNING"
)


def _count(tool: str) -> None:
    path = os.environ.get("LOOP_SERVER_CALLS")
    if path:
        with open(path, "a", encoding="utf-8") as calls:
            calls.write(tool + "\n")


@server.tool()
def poll(job: str) -> str:
    """Report a job's status: always the same answer, so polling it is a loop."""
    _count("poll")
    return f"job {job}: still running"


@server.tool()
def search(query: str) -> str:
    """Search that never finds anything."""
    _count("search")
    return "no results"


@server.tool()
def answer(question: str) -> str:
    """Answer a question."""
    _count("answer")
    return f"the answer to {question!r} is 42"


@server.tool()
def fail(reason: str) -> str:
    """Always fail: the error becomes an isError result."""
    _count("fail")
    raise RuntimeError(f"failed: {reason}")


@server.tool()
async def work(steps: int, ctx: Context) -> str:
    """Report progress on the way (notifications to the client)."""
    _count("work")
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1}")
    return f"{steps} steps done"


@server.tool()
async def hang(seconds: float) -> str:
    """Sleep, so that the client can cancel the call."""
    _count("hang")
    await anyio.sleep(seconds)
    return "woke up"


@server.tool()
def crash(code: int) -> str:
    """End the server process at once with exit status ``code``."""
    _count("crash")
    os._exit(code)


@server.resource("info://server")
def info() -> str:
    """A fixed resource."""
    return "loop-server, version 1"


@server.prompt()
def review(topic: str) -> str:
    """A prompt with one argument."""
    return f"Please review {topic}."


if __name__ == "__main__":
    if len(sys.argv) > 1:
        server.run("streamable-http", port=int(sys.argv[1]))
    else:
        server.run()

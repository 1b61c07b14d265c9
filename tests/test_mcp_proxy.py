"""``loopcore mcp-proxy``: a real MCP client session through the proxy to a real MCP server."""

from __future__ import annotations

from .conftest import require

mcp = require("mcp", "mcp")

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import select  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from collections.abc import AsyncIterator, Sequence  # noqa: E402
from contextlib import asynccontextmanager  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import anyio  # noqa: E402
import mcp_types as types  # noqa: E402
import pytest  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402
from mcp.shared.message import SessionMessage  # noqa: E402

from loopcore import TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE  # noqa: E402
from loopcore.cli import NEEDS_MCP, main  # noqa: E402
from loopcore.integrations.mcp_proxy import MCPProxy  # noqa: E402

SERVER = [sys.executable, str(Path(__file__).parent / "mcp_servers" / "loop_server.py")]
PROXY = [sys.executable, "-m", "loopcore", "mcp-proxy"]
NOTE_10 = (
    "[System note: Tool-loop warning after 10 repeated calls. "
    "Change your approach or stop if you are not making progress.]"
)
SMALL = {
    "enabled": True,
    "warningThreshold": 3,
    "criticalThreshold": 5,
    "globalCircuitBreakerThreshold": 8,
}


@asynccontextmanager
async def connect(
    tmp_path: Path, name: str, proxy: Sequence[str] | None = None
) -> AsyncIterator[ClientSession]:
    """A client session with the test server, directly or through ``loopcore mcp-proxy``."""
    if proxy is None:
        command = SERVER
    elif "--url" in proxy:  # the server is already running, at that url
        command = [*PROXY, *proxy]
    else:
        command = [*PROXY, *proxy, "--", *SERVER]
    env = dict(os.environ, LOOP_SERVER_CALLS=str(tmp_path / f"{name}.calls"))
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    with open(tmp_path / f"{name}.stderr", "w", encoding="utf-8") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def executed(tmp_path: Path, name: str) -> list[str]:
    """The tools the server actually ran, in order."""
    path = tmp_path / f"{name}.calls"
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def texts(result: types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, types.TextContent)]


async def exchange(session: ClientSession, polls: int) -> list[str]:
    """Everything a client sees of a session, serialised; the server side effects aside."""
    out = [
        session.initialize_result.model_dump_json() if session.initialize_result else "",
        (await session.list_tools()).model_dump_json(),
        (await session.list_resources()).model_dump_json(),
        (await session.read_resource("info://server")).model_dump_json(),
        (await session.list_prompts()).model_dump_json(),
        (await session.get_prompt("review", {"topic": "the proxy"})).model_dump_json(),
        (await session.call_tool("fail", {"reason": "disk full"})).model_dump_json(),
        (await session.call_tool("no_such_tool", {})).model_dump_json(),
    ]
    try:
        await session.read_resource("info://missing")
    except MCPError as exc:  # a server error, relayed as the server sent it
        out.append(f"MCPError {exc.error.model_dump_json()}")
    reports: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reports.append((progress, total, message))

    work = await session.call_tool("work", {"steps": 3}, progress_callback=on_progress)
    out += [work.model_dump_json(), repr(reports)]
    out += [(await session.call_tool("poll", {"job": "j"})).model_dump_json() for _ in range(polls)]
    return out


async def loop_until_the_run_ends(tmp_path: Path, session: ClientSession) -> None:
    """At the defaults: warned after 10 identical polls, blocked at 21, ended at the next loop."""
    done = len(executed(tmp_path, "enforce"))
    seen = [await session.call_tool("poll", {"job": "build-7"}) for _ in range(21)]
    # Calls 1-10 and 12-20 are the server's answer as it gave it.
    for n in [*range(10), *range(11, 20)]:
        assert texts(seen[n]) == ["job build-7: still running"], n
        assert not seen[n].is_error
    # The 11th (the first after 10 identical calls) carries the note, last.
    assert texts(seen[10]) == ["job build-7: still running", NOTE_10]
    assert seen[10].structured_content == {"result": "job build-7: still running"}
    # The 21st is refused: an error result, and the server never saw it.
    assert seen[20].is_error
    [block_text] = texts(seen[20])
    assert block_text.startswith("CRITICAL: Called poll with identical outcomes 20 times")
    assert "Do not repeat this exact tool action" in block_text
    assert executed(tmp_path, "enforce")[done:] == ["poll"] * 20

    # The model moves on, then loops again: the second critical ends the run.
    assert texts(await session.call_tool("answer", {"question": "why"}))[0].endswith("42")
    searches = [await session.call_tool("search", {"query": "x"}) for _ in range(21)]
    assert [r.is_error for r in searches] == [False] * 20 + [True]
    assert "recovery failed" in texts(searches[20])[0]
    assert "This run is stopping now" in texts(searches[20])[0]
    # Nothing else of this run reaches the server, whatever the call.
    later = await session.call_tool("answer", {"question": "again"})
    assert later.is_error
    assert texts(later) == [TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE]
    assert executed(tmp_path, "enforce")[done:] == ["poll"] * 20 + ["answer"] + ["search"] * 20

    # A new initialize is a new run: calls run again, the old history is gone.
    init = types.InitializeRequest(
        params=types.InitializeRequestParams(
            protocol_version="2025-11-25",
            capabilities=types.ClientCapabilities(),
            client_info=types.Implementation(name="again", version="1"),
        )
    )
    await session.send_request(init, types.InitializeResult)
    fresh = await session.call_tool("poll", {"job": "build-7"})
    assert texts(fresh) == ["job build-7: still running"]
    assert not fresh.is_error
    assert executed(tmp_path, "enforce")[-1] == "poll"


def test_enforce_and_shadow_mode_against_the_server_directly(tmp_path: Path) -> None:
    results: dict[str, list[str]] = {}

    async def run(name: str, proxy: Sequence[str] | None, polls: int) -> None:
        async with connect(tmp_path, name, proxy) as session:
            results[name] = await exchange(session, polls)
            if name == "enforce":
                await loop_until_the_run_ends(tmp_path, session)

    async def scenario() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(run, "direct", None, 25)
            group.start_soon(run, "shadow", ["--mode", "observe"], 25)
            group.start_soon(run, "enforce", [], 0)

    anyio.run(scenario)
    # Unrelated traffic (lists, reads, prompts, errors, progress) is what the server sent.
    assert results["enforce"] == results["direct"][:-25]
    log = (tmp_path / "enforce.stderr").read_text(encoding="utf-8")
    assert "Blocking poll due to critical loop" in log  # the guard's log goes to stderr
    # Two warnings (poll, search), two blocks, the second of which ended the run.
    assert "2 warnings, 2 blocks, 1 runs ended, 0 shadow blocks" in log
    # Shadow mode: 25 identical polls (a loop enforce mode blocks) change nothing.
    assert results["shadow"] == results["direct"]
    assert executed(tmp_path, "shadow") == executed(tmp_path, "direct")
    shadow_log = (tmp_path / "shadow.stderr").read_text(encoding="utf-8")
    assert "would have blocked" in shadow_log
    summary = re.search(r"(\d+) tool calls, .* (\d+) blocks, .* (\d+) shadow blocks", shadow_log)
    assert summary is not None
    assert summary.group(2) == "0"  # blocks
    assert int(summary.group(3)) >= 1  # shadow blocks


def test_cancelled_call_is_released_and_stats_count_blocks(tmp_path: Path) -> None:
    proxy = MCPProxy(config=SMALL)
    env = dict(os.environ, LOOP_SERVER_CALLS=str(tmp_path / "inproc.calls"))
    params = StdioServerParameters(command=SERVER[0], args=SERVER[1:], env=env)

    async def scenario() -> None:
        to_proxy, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_client, from_proxy = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        with open(os.devnull, "w", encoding="utf-8") as quiet:
            async with (
                stdio_client(params, errlog=quiet) as server,
                anyio.create_task_group() as group,
            ):
                group.start_soon(proxy.relay, (from_client, to_client), server)
                async with ClientSession(from_proxy, to_proxy) as session:
                    await session.initialize()
                    with anyio.move_on_after(0.5):
                        await session.call_tool("hang", {"seconds": 30})
                    # Ordered after the cancellation, so the proxy has handled it.
                    await session.call_tool("answer", {"question": "q"})
                    history = proxy.guard.detector.history(
                        session=proxy.session, run_id=proxy.run_id
                    )
                    assert [r.tool_name for r in history] == ["answer"]
                    seen = [await session.call_tool("poll", {"job": "j"}) for _ in range(6)]
                await to_proxy.aclose()
        assert [r.is_error for r in seen] == [False] * 5 + [True]
        assert texts(seen[3])[-1].startswith("[System note: Tool-loop warning after 3")

    anyio.run(scenario)
    assert executed(tmp_path, "inproc") == ["hang", "answer"] + ["poll"] * 5
    stats = proxy.guard.stats()
    assert (stats.warnings, stats.blocks, stats.terminations) == (1, 1, 0)
    assert stats.calls == 8  # hang, answer, 6 polls (the blocked one included)


def test_http_upstream_is_relayed_and_guarded(tmp_path: Path) -> None:
    from mcp.client.streamable_http import streamable_http_client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    config = tmp_path / "gateway.json5"
    config.write_text(
        json.dumps(
            {
                "tools": {"loopDetection": {"enabled": True}},
                "agents": {"list": [{"id": "small", "tools": {"loopDetection": SMALL}}]},
            }
        ),
        encoding="utf-8",
    )
    env = dict(os.environ, LOOP_SERVER_CALLS=str(tmp_path / "http.calls"))
    server = subprocess.Popen([*SERVER, str(port)], env=env, stderr=subprocess.DEVNULL)
    results: dict[str, list[str]] = {}

    async def listening() -> None:
        with anyio.fail_after(20):
            while True:
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    return
                except OSError:
                    await anyio.sleep(0.05)

    async def direct() -> None:
        await listening()
        async with (
            streamable_http_client(url) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            results["direct"] = await exchange(session, 6)

    async def proxied() -> None:
        await listening()  # the proxy starts meanwhile (its first request needs the server)
        options = ["--transport", "http", "--url", url, "--config", str(config), "--agent", "small"]
        async with connect(tmp_path, "proxied", options) as session:
            results["proxied"] = await exchange(session, 6)

    async def scenario() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(direct)
            group.start_soon(proxied)

    try:
        anyio.run(scenario)
    finally:
        server.terminate()
        server.wait(timeout=10)
    direct_seen, proxied_seen = results["direct"], results["proxied"]
    # The agent's override applies (warned after 3, blocked at 6); everything but the 4th
    # poll (noted) and the 6th (blocked) is what the server sent.
    assert proxied_seen[:-3] == direct_seen[:-3]
    assert proxied_seen[-2] == direct_seen[-2]
    with_note = types.CallToolResult.model_validate_json(proxied_seen[-3])
    assert texts(with_note)[0] == "job j: still running"
    assert texts(with_note)[1].startswith("[System note: Tool-loop warning after 3 repeated calls.")
    blocked = types.CallToolResult.model_validate_json(proxied_seen[-1])
    assert blocked.is_error
    assert texts(blocked)[0].startswith("CRITICAL: Called poll")
    assert executed(tmp_path, "http").count("poll") == 6 + 5


def _line(message: Any) -> bytes:
    text: str = message.model_dump_json(by_alias=True, exclude_none=True)
    return (text + "\n").encode()


def test_proxy_exits_with_the_servers_status(tmp_path: Path) -> None:
    # Stdin stays open: the proxy exits because the server did, not because the client left.
    crash = subprocess.Popen(
        [*PROXY, "--", *SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    init = types.InitializeRequest(
        params=types.InitializeRequestParams(
            protocol_version="2025-11-25",
            capabilities=types.ClientCapabilities(),
            client_info=types.Implementation(name="raw", version="1"),
        )
    )
    assert crash.stdin is not None
    assert crash.stdout is not None
    request = init.model_dump(by_alias=True, mode="json", exclude_none=True)
    crash.stdin.write(_line(types.JSONRPCRequest(jsonrpc="2.0", id=1, **request)))
    crash.stdin.flush()
    assert select.select([crash.stdout], [], [], 30)[0], "no answer to initialize"
    answer = types.jsonrpc_message_adapter.validate_json(crash.stdout.readline())
    assert isinstance(answer, types.JSONRPCResponse)
    assert answer.id == 1
    assert answer.result["serverInfo"]["name"] == "loop-server"
    crash.stdin.write(
        _line(types.JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized"))
    )
    call = {"name": "crash", "arguments": {"code": 5}}
    crash.stdin.write(
        _line(types.JSONRPCRequest(jsonrpc="2.0", id=2, method="tools/call", params=call))
    )
    crash.stdin.flush()
    try:
        assert crash.wait(timeout=30) == 5
    finally:
        crash.kill()
        crash.wait()
        crash.stdin.close()
        crash.stdout.close()


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["mcp-proxy"], "COMMAND: expected the MCP server's command line after --"),
        (["mcp-proxy", "--agent", "a", "--", "srv"], "--agent: needs --config FILE"),
        (["mcp-proxy", "--transport", "http"], "--transport http: needs --url URL"),
        (["mcp-proxy", "--url", "http://h/mcp", "--", "srv"], "--url: only with --transport http"),
        (
            ["mcp-proxy", "--transport", "http", "--url", "http://h/mcp", "--", "srv"],
            "--transport http: takes no COMMAND (the server runs at --url)",
        ),
    ],
)
def test_cli_rejects_bad_arguments(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert capsys.readouterr().err == f"loopcore mcp-proxy: {error}\n"


def test_cli_without_mcp_says_which_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp now raises ImportError
    assert main(["mcp-proxy", "--", "srv"]) == 2
    assert capsys.readouterr().err == f"loopcore mcp-proxy: {NEEDS_MCP}\n"
    assert NEEDS_MCP == "needs mcp, which comes with the mcp extra: pip install 'loopcore[mcp]'"

"""How does loopcore guard an MCP server it does not control? A stdio proxy in front of it.

``MCPProxy`` serves one MCP session to its client over stdio and relays it to
an upstream server: a child process over stdio (``serve_stdio``) or a
streamable-HTTP endpoint (``serve_http``). Both sides use the ``mcp`` SDK's own
transports; the proxy moves the SDK's ``SessionMessage`` objects from one to
the other and only looks into ``tools/call`` requests and their answers (see
``_mcp_relay``): a blocked call is answered with an error result without
reaching the server, a warned call's result gets the note as a last text
block, and every other message is written on exactly as it was read.

Needs the ``mcp`` extra: ``pip install 'loopcore[mcp]'``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import uuid
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager, suppress
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import mcp_types as types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.stdio import stdio_server
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    NAME_BEARING_METHODS,
    encode_header_value,
)
from mcp.shared.message import ClientMessageMetadata, SessionMessage

from .. import LoopDetectionConfig, ToolLoopGuard
from . import guard_of
from ._mcp_relay import Relayed, ToolCallFilter

__all__ = ["MCPProxy"]

logger = logging.getLogger("loopcore.mcp_proxy")

Stamp = Callable[[SessionMessage], SessionMessage]
Streams = tuple[Any, Any]  # the SDK's (read stream, write stream) pair


class MCPProxy:
    """One MCP session between a client (stdio) and an upstream server, guarded.

    ``guard`` is used as given; without one, a guard is built from ``config``
    (a ``LoopDetectionConfig`` or a ``tools.loopDetection`` mapping; by
    default ``{"enabled": True}``) and ``mode``. ``session`` is the guard's
    session for every call of this proxy (default: a fresh ``mcp-…`` id);
    each client ``initialize`` starts a new run in it.
    """

    def __init__(
        self,
        guard: ToolLoopGuard | None = None,
        *,
        config: LoopDetectionConfig | Mapping[str, Any] | None = None,
        mode: str | None = None,
        session: Hashable = None,
    ) -> None:
        guard = guard_of(guard, config, mode, default={"enabled": True})
        self.guard = guard
        self.session: Hashable = f"mcp-{uuid.uuid4().hex[:12]}" if session is None else session
        self._filter = ToolCallFilter(guard, self.session)

    @property
    def run_id(self) -> str | None:
        """The current run: a new one on every client ``initialize``; None before the first."""
        return self._filter.run_id

    def __repr__(self) -> str:
        mode = self.guard.mode
        return f"MCPProxy(session={self.session!r}, run_id={self.run_id!r}, mode={mode!r})"

    # -- serving ---------------------------------------------------------------------------

    async def serve_stdio(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
    ) -> int:
        """Start ``command`` as the upstream server and serve it on this process's stdio.

        The server runs with this process's environment (or ``env``) in ``cwd``.

        Returns the server's exit status once it exits (128 + N when a signal N
        ended it), or once the client closes its side and the server has been
        stopped the SDK's way (stdin closed, then a grace period, then SIGTERM).
        """
        if not command:
            raise ValueError("command: expected the MCP server's command line, got nothing")
        # The server gets this process's whole environment (the SDK's default is a few
        # safe variables): a client configures the proxy's environment for the server.
        params = StdioServerParameters(
            command=command[0],
            args=list(command[1:]),
            env=dict(os.environ if env is None else env),
            cwd=cwd,
        )
        spawned: list[Any] = []
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(_client_stdio())
            with _keep_process(spawned):
                server = await stack.enter_async_context(stdio_client(params))
            await self.relay(client, server)
        return _exit_status(spawned)

    async def serve_http(self, url: str) -> int:
        """Relay this process's stdio to the streamable-HTTP MCP server at ``url``.

        Returns 0 when the client closes its side, 1 when the server side ends.
        """
        from mcp.client.streamable_http import streamable_http_client

        headers = _HttpHeaders()
        async with AsyncExitStack() as stack:
            client = await stack.enter_async_context(_client_stdio())
            server = await stack.enter_async_context(streamable_http_client(url))
            ended = await self.relay(client, server, stamp=headers.stamp, watch=headers.watch)
        return 0 if ended == "client" else 1

    async def relay(
        self,
        client: Streams,
        server: Streams,
        *,
        stamp: Stamp | None = None,
        watch: Callable[[SessionMessage], None] | None = None,
    ) -> str:
        """Move messages both ways until one side ends; returns ``"client"`` or ``"server"``.

        ``client`` and ``server`` are the SDK's ``(read, write)`` stream pairs.
        ``stamp`` rewrites each message bound for the server (transport
        metadata), ``watch`` sees each message from the server first.
        """
        client_read, client_write = client
        server_read, server_write = server
        ended: list[str] = []

        async def to_server() -> str:
            async for item in client_read:
                if isinstance(item, Exception):
                    _unreadable("client", item)
                    continue
                relayed = self._from_client(item)
                if relayed.reply is not None and not await _send(client_write, relayed.reply):
                    return "client"
                if relayed.forward is not None:
                    forward = relayed.forward if stamp is None else stamp(relayed.forward)
                    if not await _send(server_write, forward):
                        return "server"
            return "client"

        async def to_client() -> str:
            async for item in server_read:
                if isinstance(item, Exception):
                    _unreadable("server", item)
                    continue
                if watch is not None:
                    watch(item)
                if not await _send(client_write, self._from_server(item)):
                    return "client"
            return "server"

        async def pump(move: Callable[[], Awaitable[str]]) -> None:
            ended.append(await move())
            group.cancel_scope.cancel()  # one side ended: so does the session

        async with anyio.create_task_group() as group:
            group.start_soon(pump, to_server)
            group.start_soon(pump, to_client)
        return ended[0] if ended else "server"

    def _from_client(self, item: SessionMessage) -> Relayed:
        try:
            return self._filter.from_client(item)
        except Exception as exc:  # the guard never raises: this is a bug, not the agent's fault
            logger.error(
                "loopcore mcp-proxy: guard failed (%s); call relayed unguarded",
                type(exc).__name__,
            )
            return Relayed(forward=item)

    def _from_server(self, item: SessionMessage) -> SessionMessage:
        try:
            return self._filter.from_server(item)
        except Exception as exc:
            logger.error(
                "loopcore mcp-proxy: guard failed (%s); answer relayed as is", type(exc).__name__
            )
            return item


@asynccontextmanager
async def _client_stdio() -> AsyncIterator[Streams]:
    """This process's stdin and stdout as the SDK's server transport."""
    # A reader of its own on a duplicate of fd 0: a line read still blocked in its
    # thread at exit must not hold the lock of ``sys.stdin``, which the interpreter
    # takes when it finalises.
    stdin = _StdinLines(os.fdopen(os.dup(sys.stdin.fileno()), "rb"))
    async with stdio_server(stdin=stdin) as (read, write):  # type: ignore[arg-type]
        try:
            yield read, write
        finally:
            # The SDK's writer ends when its stream closes, after what was sent is out;
            # its reader when stdin ends, or when told to stop.
            await write.aclose()
            stdin.stop()


class _StdinLines:
    """Stdin for ``stdio_server`` that can stop reading when the proxy ends.

    The SDK would read each line in an anyio worker thread, which can be
    neither abandoned nor stopped and keeps the interpreter alive: when the
    upstream server exits first, the proxy must exit with it, not at the
    client's next line. Each line is read in a daemon thread instead; the
    lines are split and decoded as the SDK does it.
    """

    def __init__(self, buffer: Any) -> None:
        self._buffer = buffer
        self._stopped = False
        self._wake: anyio.Event | None = None

    def stop(self) -> None:
        self._stopped = True
        if self._wake is not None:
            self._wake.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        while not self._stopped:
            line = await self._read()
            if not line:
                return
            yield line.decode("utf-8", errors="replace")

    async def _read(self) -> bytes:
        token = anyio.lowlevel.current_token()
        wake = self._wake = anyio.Event()
        box: list[bytes | BaseException] = []

        def work() -> None:
            try:
                box.append(self._buffer.readline())
            except BaseException as exc:  # handed to the reader, raised there
                box.append(exc)
            # RuntimeError: the event loop is gone, and nobody waits for this line any more.
            with suppress(RuntimeError):
                anyio.from_thread.run_sync(wake.set, token=token)

        threading.Thread(target=work, name="loopcore-mcp-stdin", daemon=True).start()
        await wake.wait()
        if not box:
            return b""  # stopped: the line in flight, if any, is nobody's any more
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]


@contextmanager
def _keep_process(spawned: list[Any]) -> Iterator[None]:
    """Keep the process ``stdio_client`` spawns, to read its exit status afterwards.

    The SDK does not hand the process out; its spawn helper is wrapped for the
    one call. Should the helper ever go, the status is unknown (see
    ``_exit_status``) and everything else works as before.
    """
    from mcp.client import stdio as sdk_stdio

    spawn = getattr(sdk_stdio, "_create_platform_compatible_process", None)
    if spawn is None:  # pragma: no cover - another SDK layout
        yield
        return

    async def spawn_and_keep(*args: Any, **kwargs: Any) -> Any:
        process = await spawn(*args, **kwargs)
        spawned.append(process)
        return process

    sdk_stdio._create_platform_compatible_process = spawn_and_keep
    try:
        yield
    finally:
        sdk_stdio._create_platform_compatible_process = spawn


def _exit_status(spawned: list[Any]) -> int:
    code = spawned[0].returncode if spawned else None
    if not isinstance(code, int):
        return 1
    return 128 - code if code < 0 else code


async def _send(stream: Any, item: SessionMessage) -> bool:
    """Send ``item``; False when that side's stream is gone (the side has ended)."""
    try:
        await stream.send(item)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        return False
    return True


def _unreadable(side: str, exc: Exception) -> None:
    # The line is not a JSON-RPC message, so there is nothing to relay; its text may
    # hold arguments, so only the kind of failure is logged.
    logger.warning("loopcore mcp-proxy: dropped an unreadable message from the %s (%s)",
                   side, type(exc).__name__)  # fmt: skip


class _HttpHeaders:
    """The per-message HTTP headers an SDK client session would set, for relayed messages.

    Handshake sessions (up to 2025-11-25) need ``MCP-Protocol-Version`` after
    ``initialize``; stateless ones (2026-07-28) carry their version in each
    request's ``_meta`` and also need the method and name headers.
    """

    def __init__(self) -> None:
        self.version: str | None = None
        self._initialize: types.RequestId | None = None

    def watch(self, item: SessionMessage) -> None:
        message = item.message
        if (
            isinstance(message, types.JSONRPCResponse)
            and self._initialize is not None
            and message.id == self._initialize
        ):
            version = message.result.get("protocolVersion")
            self.version = version if isinstance(version, str) else None
            self._initialize = None

    def stamp(self, item: SessionMessage) -> SessionMessage:
        message = item.message
        if isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
            self._initialize = message.id
            self.version = None
            return item
        headers: dict[str, str] = {}
        params = getattr(message, "params", None) or {}
        meta = params.get("_meta")
        version = meta.get(types.PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        if isinstance(version, str) and isinstance(message, types.JSONRPCRequest):
            headers[MCP_PROTOCOL_VERSION_HEADER] = version
            headers[MCP_METHOD_HEADER] = message.method
            name_key = NAME_BEARING_METHODS.get(message.method)
            name = params.get(name_key) if name_key is not None else None
            if isinstance(name, str):
                headers[MCP_NAME_HEADER] = encode_header_value(name)
        elif self.version is not None:
            headers[MCP_PROTOCOL_VERSION_HEADER] = self.version
        if not headers:
            return item
        return SessionMessage(message, metadata=ClientMessageMetadata(headers=headers))

"""Which MCP messages does the proxy change? Only ``tools/call`` and its answer.

``ToolCallFilter`` looks at every JSON-RPC message the proxy relays, one at a
time and without any I/O: it starts a run on each client ``initialize`` (or
``server/discover``, the stateless handshake), asks the guard before each
``tools/call`` and reports the server's answer after it, matched by request id.
Everything else is handed back as the very same object, so it is written to
the other side exactly as it was read.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage

from .. import TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE, CompactionLoopPersisted, ToolLoopGuard

__all__ = ["Relayed", "ToolCallFilter"]

#: Requests that open a run: the handshake (up to 2025-11-25) and its stateless successor.
_RUN_STARTS = frozenset({"initialize", "server/discover"})


@dataclass(frozen=True, slots=True)
class Relayed:
    """What to do with one message: send ``forward`` on, and/or answer with ``reply``."""

    forward: SessionMessage | None = None
    reply: SessionMessage | None = None


@dataclass(frozen=True, slots=True)
class _Pending:
    tool: str
    args: Any
    call_id: str
    run_id: str | None


def _tool_error(request_id: types.RequestId, text: str) -> SessionMessage:
    """A ``tools/call`` answer the server never saw: an error result with ``text``."""
    result = types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    body = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return SessionMessage(types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=body))


class ToolCallFilter:
    """The guard's view of one MCP session: decides ``tools/call`` requests, notes answers."""

    def __init__(self, guard: ToolLoopGuard, session: Hashable) -> None:
        self.guard = guard
        self.session = session
        self.run_id: str | None = None
        self.runs = 0
        # Calls sent to the server and not answered yet, by JSON-RPC request id.
        self._pending: dict[types.RequestId, _Pending] = {}
        # Set by a terminal block: the run is over, so no later call of it may run.
        self._stopped: str | None = None

    # -- client to server ----------------------------------------------------------------

    def from_client(self, item: SessionMessage) -> Relayed:
        message = item.message
        if isinstance(message, types.JSONRPCRequest):
            if message.method in _RUN_STARTS:
                self._start_run()
            elif message.method == "tools/call":
                return self._call(item, message)
        elif (
            isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
        ):
            self._cancelled(message)
        return Relayed(forward=item)

    def _start_run(self) -> None:
        if self.run_id is not None:
            self.guard.end_run(session=self.session, run_id=self.run_id)
        self.runs += 1
        self.run_id = f"run-{self.runs}-{uuid.uuid4().hex[:12]}"
        self._pending.clear()
        self._stopped = None

    def _call(self, item: SessionMessage, message: types.JSONRPCRequest) -> Relayed:
        params = message.params or {}
        tool = params.get("name")
        if not isinstance(tool, str) or message.id in self._pending:
            return Relayed(forward=item)  # malformed or a reused id: the server answers it
        if self._stopped is not None:
            return Relayed(reply=_tool_error(message.id, self._stopped))
        args = params.get("arguments")
        args = {} if args is None else args
        call_id = str(message.id)
        decision = self.guard.before_call(
            tool, args, tool_call_id=call_id, session=self.session, run_id=self.run_id
        )
        if decision.blocked:
            if decision.terminal:
                self._stopped = TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE
            return Relayed(reply=_tool_error(message.id, decision.result_text or ""))
        self._pending[message.id] = _Pending(tool, args, call_id, self.run_id)
        return Relayed(forward=item)

    def _cancelled(self, message: types.JSONRPCNotification) -> None:
        # The client gave up on the call: like a skipped call, it must not count as a
        # repeat, and its note (if any) goes with it. The server still gets the notice.
        request_id = (message.params or {}).get("requestId")
        if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
            return
        pending = self._pending.pop(request_id, None)
        if pending is not None:
            self.guard.release([pending.call_id], session=self.session, run_id=pending.run_id)

    # -- server to client ----------------------------------------------------------------

    def from_server(self, item: SessionMessage) -> SessionMessage:
        message = item.message
        if not isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
            return item
        if message.id is None:
            return item
        pending = self._pending.pop(message.id, None)
        if pending is None:
            return item
        if isinstance(message, types.JSONRPCError):
            self._after(pending, error=message.error.message)
            return item
        result = message.result
        if result.get("resultType", "complete") != "complete":
            # An interim answer (input_required): the client retries the call with the
            # input, so this attempt is no outcome.
            self.guard.release([pending.call_id], session=self.session, run_id=pending.run_id)
            return item
        try:
            seen = self._after(pending, result=result)
        except CompactionLoopPersisted as abort:
            self._stopped = TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE
            return _tool_error(message.id, abort.message or str(abort))
        if seen is result or not isinstance(seen, dict):
            return item
        return SessionMessage(
            types.JSONRPCResponse(jsonrpc=message.jsonrpc, id=message.id, result=seen),
            metadata=item.metadata,
        )

    def _after(self, pending: _Pending, **outcome: Any) -> Any:
        return self.guard.after_call(
            pending.tool,
            pending.args,
            tool_call_id=pending.call_id,
            session=self.session,
            run_id=pending.run_id,
            **outcome,
        )

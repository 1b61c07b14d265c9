"""How does loopcore guard the tool calls of a LangChain 1.x agent?

``LoopGuardMiddleware`` is an ``AgentMiddleware`` for
``langchain.agents.create_agent``. Every tool call goes through
``wrap_tool_call`` / ``awrap_tool_call``: ``before_call`` decides, a blocked
call never runs and the model gets the block text as an error
``ToolMessage``, a call that runs has its outcome recorded and, when warned,
the note appended to its ``ToolMessage``.

Scope: ``session`` is the thread id (``config["configurable"]["thread_id"]``,
None without one); ``run_id`` is minted by ``before_agent`` once per
``invoke`` / ``ainvoke`` (the config's ``run_id`` when the caller gave one,
else a random UUID) and kept in the agent state, so concurrent runs never
share it and a run resumed after an interrupt keeps it. ``after_agent`` ends
the run in the guard.

A terminal block ends the run LangChain's way: the next ``before_model``
jumps to the end (``jump_to: "end"``) with
``TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE`` as the final ``AIMessage``, so no
further model request is made and ``invoke`` returns normally. When
``SummarizationMiddleware`` has summarised the history, ``wrap_model_call``
sees the new summary message and arms the post-compaction guard.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain.agents.middleware.types import (
    ModelCallResult,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command
from typing_extensions import NotRequired

from .. import TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE, Decision, LoopDetectionConfig, ToolLoopGuard
from . import guard_of

__all__ = [
    "RUN_ID_KEY",
    "STOP_REASON",
    "LoopGuardMiddleware",
    "LoopGuardState",
    "run_terminated",
]

#: The agent-state key holding the loopcore run id of the current invocation.
RUN_ID_KEY = "loopcore_run_id"
#: ``response_metadata["loopcore_stop"]`` of the final ``AIMessage`` of a terminated run.
STOP_REASON = "tool_loop_terminated"

# Runs the middleware remembers at once (summary baselines, a thread's live run):
# a run that raises never reaches after_agent, so the table is capped.
_MAX_RUNS = 10_000

ToolResult = ToolMessage | Command[Any]


class LoopGuardState(AgentState[Any]):
    """The agent state with the loopcore run id (private: not in the input or output)."""

    loopcore_run_id: NotRequired[Annotated[str | None, PrivateStateAttr]]


@dataclass
class _Run:
    """What the middleware remembers of one live run."""

    session: Hashable
    #: The summary messages already seen in this run (by id), so each arms once.
    summaries: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _Call:
    """One tool call as the guard sees it."""

    tool: str
    args: Any
    call_id: str | None
    session: Hashable
    run_id: str | None


def _thread_id() -> Hashable:
    """The thread id of the running graph, or None (no config, no checkpointer thread)."""
    try:
        config = get_config()
    except RuntimeError:  # outside a runnable context
        return None
    return _thread_of(config)


def _thread_of(config: Mapping[str, Any] | None) -> Hashable:
    configurable = (config or {}).get("configurable") or {}
    thread = configurable.get("thread_id") if isinstance(configurable, Mapping) else None
    return thread if isinstance(thread, Hashable) else str(thread)


def _state_run_id(state: Any) -> str | None:
    run_id = state.get(RUN_ID_KEY) if isinstance(state, Mapping) else None
    return run_id if isinstance(run_id, str) else None


def _is_summary(message: BaseMessage) -> bool:
    """Is this the history summary ``SummarizationMiddleware`` writes?"""
    extra = getattr(message, "additional_kwargs", None)
    return isinstance(extra, Mapping) and extra.get("lc_source") == "summarization"


def _summary_key(message: BaseMessage) -> str:
    return message.id or f"content:{hash(str(message.content))}"


def _is_terminal_block(message: object) -> bool:
    """A ``ToolMessage`` this middleware wrote for a block that ends the run."""
    if not isinstance(message, ToolMessage):
        return False
    artifact = message.artifact
    if not isinstance(artifact, Mapping) or artifact.get("terminate") is not True:
        return False
    details = artifact.get("details")
    return isinstance(details, Mapping) and details.get("deniedReason") == "tool-loop"


def run_terminated(messages: Sequence[AnyMessage] | Mapping[str, Any]) -> bool:
    """Did this agent run end on a terminal tool-loop block?

    Takes what ``agent.invoke`` returned, or its ``messages``.
    """
    if isinstance(messages, Mapping):
        messages = messages.get("messages") or []
    if not messages:
        return False
    last = messages[-1]
    metadata = getattr(last, "response_metadata", None)
    return (
        isinstance(last, AIMessage)
        and isinstance(metadata, Mapping)
        and metadata.get("loopcore_stop") == STOP_REASON
    )


def _with_note(content: Any, note: str) -> Any:
    """A ``ToolMessage`` content with the warning note: a new paragraph, or a text block."""
    if isinstance(content, str):
        return f"{content}\n\n{note}" if content else note
    if isinstance(content, list):
        return [*content, {"type": "text", "text": note}]
    return content


def _error_text(content: Any) -> str:
    """An error ``ToolMessage``'s text, as the outcome to record."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p if isinstance(p, str) else str(p.get("text", "")) if isinstance(p, Mapping) else ""
            for p in content
        ]
        return "\n".join(parts)
    return str(content)


def _own_message(command: Command[Any], call_id: str | None) -> ToolMessage | None:
    """The ``ToolMessage`` answering this call inside a tool's ``Command``, if any."""
    update = command.update
    messages = update.get("messages") if isinstance(update, Mapping) else None
    if not isinstance(messages, list):
        return None
    for message in messages:
        if isinstance(message, ToolMessage) and message.tool_call_id == call_id:
            return message
    return None


def _replace_message(command: Command[Any], old: ToolMessage, new: ToolMessage) -> Command[Any]:
    update: dict[str, Any] = dict(command.update or {})  # a Mapping: the message was in it
    update["messages"] = [new if m is old else m for m in update["messages"]]
    return replace(command, update=update)


class LoopGuardMiddleware(AgentMiddleware[LoopGuardState, Any, Any]):
    """Detects tool-call loops in a LangChain agent: warns, blocks, and ends looping runs.

    Pass a ``ToolLoopGuard`` to share one between agents, or ``config`` (and
    ``mode``) to have one built. ``arm_on_summarization`` arms the
    post-compaction guard whenever ``SummarizationMiddleware`` has summarised
    the history; ``end_runs`` forgets each run's history when the run ends.
    List this middleware first, so that a terminal block ends the run before
    any other ``before_model`` hook runs.
    """

    state_schema = LoopGuardState

    def __init__(
        self,
        guard: ToolLoopGuard | None = None,
        *,
        config: LoopDetectionConfig | Mapping[str, Any] | None = None,
        mode: str | None = None,
        arm_on_summarization: bool = True,
        end_runs: bool = True,
    ) -> None:
        super().__init__()
        self._guard = guard_of(guard, config, mode)
        self._arm_on_summarization = bool(arm_on_summarization)
        self._end_runs = bool(end_runs)
        self._lock = threading.Lock()
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._live: OrderedDict[Hashable, str] = OrderedDict()  # thread id -> its run

    @property
    def guard(self) -> ToolLoopGuard:
        """The guard deciding every call: ``middleware.guard.stats()`` counts what it did."""
        return self._guard

    def __repr__(self) -> str:
        return f"LoopGuardMiddleware({self._guard!r})"

    # -- runs ------------------------------------------------------------------------------

    def _start_run(self, state: Mapping[str, Any], runtime: Runtime[Any]) -> dict[str, Any]:
        try:
            config: Mapping[str, Any] | None = get_config()
        except RuntimeError:
            config = None
        # The caller's run_id reaches the nodes only through the execution info.
        given = getattr(getattr(runtime, "execution_info", None), "run_id", None)
        run_id = str(given) if given else uuid.uuid4().hex
        session = _thread_of(config)
        messages = state.get("messages") or []
        run = _Run(session, {_summary_key(m) for m in messages if _is_summary(m)})
        with self._lock:
            self._runs[run_id] = run
            self._live[session] = run_id
            self._live.move_to_end(session)
            for table in (self._runs, self._live):
                while len(table) > _MAX_RUNS:
                    table.popitem(last=False)
        return {RUN_ID_KEY: run_id}

    def _end_run(self, state: Mapping[str, Any]) -> None:
        run_id = _state_run_id(state)
        if run_id is None:
            return
        with self._lock:
            run = self._runs.pop(run_id, None)
            session = run.session if run is not None else _thread_id()
            if self._live.get(session) == run_id:
                del self._live[session]
        if self._end_runs:
            self._guard.end_run(session=session, run_id=run_id)

    def before_agent(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self._start_run(state, runtime)

    async def abefore_agent(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self._start_run(state, runtime)

    def after_agent(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        self._end_run(state)
        return None

    async def aafter_agent(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        self._end_run(state)
        return None

    # -- the terminal stop -----------------------------------------------------------------

    @staticmethod
    def _stop(state: Mapping[str, Any]) -> dict[str, Any] | None:
        """End the run when the last tool step holds a terminal block: no model request."""
        messages = state.get("messages") or []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            if _is_terminal_block(message):
                final = AIMessage(
                    content=TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE,
                    response_metadata={"loopcore_stop": STOP_REASON},
                )
                return {"jump_to": "end", "messages": [final]}
        return None

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: LoopGuardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return self._stop(state)

    @hook_config(can_jump_to=["end"])
    async def abefore_model(
        self, state: LoopGuardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        return self._stop(state)

    # -- compaction ------------------------------------------------------------------------

    def arm_post_compaction(self, *, thread_id: Hashable = None, run_id: str | None = None) -> bool:
        """Arm the post-compaction guard of a run after you compacted its history yourself.

        ``run_id`` defaults to the live run of ``thread_id`` (the state's
        ``loopcore_run_id``); returns False when no such run is live.
        """
        if run_id is None:
            with self._lock:
                run_id = self._live.get(thread_id)
            if run_id is None:
                return False
        self._guard.arm_post_compaction(session=thread_id, run_id=run_id)
        return True

    def _see_summaries(self, request: ModelRequest[Any]) -> None:
        """Arm the guard once per new summary message in the model's input."""
        if not self._arm_on_summarization:
            return
        run_id = _state_run_id(request.state)
        if run_id is None:
            return
        fresh = [_summary_key(m) for m in request.messages if _is_summary(m)]
        if not fresh:
            return
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return
            fresh = [key for key in fresh if key not in run.summaries]
            run.summaries.update(fresh)
            session = run.session
        if fresh:
            self._guard.arm_post_compaction(session=session, run_id=run_id)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelCallResult[Any]:
        self._see_summaries(request)
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelCallResult[Any]:
        self._see_summaries(request)
        return await handler(request)

    # -- tool calls ------------------------------------------------------------------------

    def _call(self, request: ToolCallRequest) -> _Call:
        call = request.tool_call
        runtime = getattr(request, "runtime", None)
        config = getattr(runtime, "config", None)
        run_id = _state_run_id(request.state)
        if run_id is None:  # a ToolNode outside create_agent: no before_agent ran
            info = getattr(runtime, "execution_info", None)
            run_id = getattr(info, "run_id", None)
        call_id = call.get("id")
        return _Call(
            str(call.get("name") or ""),
            call.get("args", {}),
            call_id if isinstance(call_id, str) else None,
            _thread_of(config if isinstance(config, Mapping) else None),
            run_id if isinstance(run_id, str) else None,
        )

    def _before(self, call: _Call) -> Decision:
        decision: Decision = self._guard.before_call(
            call.tool,
            call.args,
            tool_call_id=call.call_id,
            session=call.session,
            run_id=call.run_id,
        )
        return decision

    @staticmethod
    def _blocked(decision: Decision, call: _Call) -> ToolMessage:
        """The error result the model gets instead of running a blocked call."""
        return ToolMessage(
            content=decision.result_text or "",
            tool_call_id=call.call_id or "",
            name=call.tool,
            status="error",
            artifact=decision.blocked_result(),
        )

    def _failed(self, call: _Call, decision: Decision, exc: BaseException) -> None:
        """Record a tool's exception (or forget an interrupted call) before it propagates."""
        if isinstance(exc, GraphBubbleUp):
            # An interrupt: the tool runs again from the start when the run resumes.
            if call.call_id is not None:
                self._guard.release([call.call_id], session=call.session, run_id=call.run_id)
            return
        if not isinstance(exc, Exception):
            return
        self._record(call, error=exc)
        note = decision.model_note
        if note is not None:  # as a wrapped tool's error carries it (ToolLoopGuard.wrap)
            with contextlib.suppress(AttributeError):  # Python 3.10 has no add_note
                exc.add_note(note)  # type: ignore[attr-defined,unused-ignore]
            with contextlib.suppress(Exception):  # an exception type with __slots__
                exc.loop_note = note  # type: ignore[attr-defined]

    def _record(self, call: _Call, **outcome: Any) -> Any:
        return self._guard.after_call(
            call.tool,
            call.args,
            tool_call_id=call.call_id,
            session=call.session,
            run_id=call.run_id,
            **outcome,
        )

    def _message_seen(self, call: _Call, decision: Decision, message: ToolMessage) -> ToolMessage:
        """Record a result message; the message the model sees (with the note when warned)."""
        note = decision.model_note
        if message.status == "error":
            self._record(call, error=_error_text(message.content))
            seen = message.content if note is None else _with_note(message.content, note)
        else:
            seen = self._record(call, result=message.content)
            if note is not None and not isinstance(message.content, str):
                seen = _with_note(message.content, note)
        if seen is message.content or seen == message.content:
            return message
        return message.model_copy(update={"content": seen})

    def _settled(self, call: _Call, decision: Decision, outcome: ToolResult) -> ToolResult:
        if isinstance(outcome, ToolMessage):
            return self._message_seen(call, decision, outcome)
        if isinstance(outcome, Command):
            own = _own_message(outcome, call.call_id)
            if own is None:
                self._record(call, result=outcome.update)
                return outcome
            seen = self._message_seen(call, decision, own)
            return outcome if seen is own else _replace_message(outcome, own, seen)
        self._record(call, result=outcome)
        return outcome

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolResult],
    ) -> ToolResult:
        call = self._call(request)
        decision = self._before(call)
        if decision.blocked:
            return self._blocked(decision, call)
        try:
            outcome = handler(request)
        except BaseException as exc:
            self._failed(call, decision, exc)
            raise
        return self._settled(call, decision, outcome)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolResult]],
    ) -> ToolResult:
        call = self._call(request)
        decision = self._before(call)
        if decision.blocked:
            return self._blocked(decision, call)
        try:
            outcome = await handler(request)
        except BaseException as exc:
            self._failed(call, decision, exc)
            raise
        return self._settled(call, decision, outcome)

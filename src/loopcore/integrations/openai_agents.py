"""How does loopcore guard the function tools of an OpenAI Agents SDK agent?

``LoopGuard(...).tools(tools)`` (or ``guard_tools(tools)``) returns copies of
the ``FunctionTool``s with two additions, both through the SDK's own extension
points:

- a tool input guardrail, the last of the tool's, that runs ``before_call``:
  a blocked call is refused with ``reject_content`` (the model receives the
  block text as the call's output, the tool does not run), and a terminal block
  trips the guardrail (``raise_exception``), so ``Runner.run`` raises the SDK's
  ``ToolInputGuardrailTripwireTriggered`` with the loopcore ``Decision`` as its
  ``output.output_info`` (``loop_stop(exc)`` returns it);
- an invoker around the tool's ``on_invoke_tool`` that runs ``after_call``
  with the tool's result, or its error: an exception, or the text the SDK's
  default ``failure_error_function`` made of one. A warned call's output
  carries the note.

Scope: ``run_id`` is the id the SDK gives each ``Runner.run`` (or the
``run_key`` callable's answer); ``session`` comes from the run context (its
``session_id``, or the ``session_key`` callable). This module imports the SDK;
``import loopcore`` never imports this module.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
import uuid
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar

from agents import (
    Agent,
    FunctionTool,
    RunContextWrapper,
    Tool,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailTripwireTriggered,
)
from agents import tool as _sdk_tool
from agents.tool import ToolOutputFileContent, ToolOutputImage, ToolOutputText
from agents.tool_context import ToolContext
from agents.tool_guardrails import ToolInputGuardrailData

from .._config import LoopDetectionConfig
from .._decisions import Decision
from .._guard import CompactionLoopPersisted
from .._hook import ToolLoopGuard
from .._outcome import UNSET
from .._stats import GuardStats
from . import guard_of

__all__ = ["GUARDRAIL_NAME", "GuardedTools", "LoopGuard", "guard_tools", "loop_stop"]

logger = logging.getLogger("loopcore.integrations.openai_agents")

#: The name of the tool input guardrail this module adds (how ``loop_stop`` knows its own).
GUARDRAIL_NAME = "loopcore_tool_loop"
#: What the SDK sets on a ToolContext when its default failure_error_function made the output.
_SDK_DEFAULT_FAILURE = "_function_tool_default_failure_handled"
#: What the SDK stores its per-Runner.run id under (a reused context wrapper gets a new one).
_SDK_RUN_SCOPE = "_agent_tool_state_scope_id"
#: What the SDK marks the invoker of a sync ``@function_tool`` with.
_SDK_SYNC_TOOL = "__agents_sync_function_tool__"
#: Decisions of admitted calls waiting for their outcome: enough for any live fan-out.
_MAX_PENDING = 10_000

SessionKey = Callable[[RunContextWrapper[Any]], Hashable]
RunKey = Callable[[RunContextWrapper[Any]], "str | None"]
AgentT = TypeVar("AgentT", bound=Agent[Any])


def context_session(context: RunContextWrapper[Any]) -> Hashable:
    """The default session: the run context's ``session_id`` (attribute or key), else None.

    An SDK ``Session`` passed as the run context has one, and so does any
    context object of the host's that carries ``session_id``.
    """
    value = context.context
    found = (
        value.get("session_id")
        if isinstance(value, Mapping)
        else getattr(value, "session_id", None)
    )
    return found if isinstance(found, str) and found else None


def _parsed(arguments: str) -> Any:
    """The call's arguments as the model sent them: a JSON object, or the raw text."""
    try:
        return json.loads(arguments)
    except (TypeError, ValueError):
        return arguments


_STRUCTURED = (ToolOutputText, ToolOutputImage, ToolOutputFileContent)


def _is_structured(item: object) -> bool:
    if isinstance(item, _STRUCTURED):
        return True
    return isinstance(item, Mapping) and item.get("type") in ("text", "image", "file")


def _with_note(result: Any, note: str) -> Any:
    """``result`` with the warning note added the way the SDK sends it to the model."""
    if isinstance(result, str):
        return f"{result}\n\n{note}"
    if isinstance(result, list | tuple) and result and all(_is_structured(i) for i in result):
        return [*result, ToolOutputText(text=note)]
    if _is_structured(result):
        return [result, ToolOutputText(text=note)]
    return f"{result}\n\n{note}"  # the SDK would send str(result)


class _RunIds:
    """One run id per ``Runner.run``, and the end of its scopes once the run is gone.

    The SDK mints an id for every run (a resume from a ``RunState`` is a new
    run), sets it on the run's context wrapper and on every ToolContext made
    from it: that id is the run id. The run's ``Usage`` object (one per run,
    shared by reference with every ToolContext of the run and with nothing
    else) tells when the run is gone, and stands in for the id were the SDK to
    stop setting it. The map holds ``id(usage)``; a finaliser removes the
    entry before that id can be reused and queues the run's scopes to be
    ended. Finalisers only append to a deque: they may run in any thread, at
    any allocation, so they take no lock.
    """

    def __init__(self) -> None:
        self._runs: dict[int, tuple[str, set[tuple[Hashable, str]]]] = {}
        self.gone: deque[set[tuple[Hashable, str]]] = deque()

    def of(self, context: RunContextWrapper[Any], session: Hashable) -> str:
        usage = context.usage
        entry = self._runs.get(id(usage))
        if entry is None:
            minted: tuple[str, set[tuple[Hashable, str]]] = (uuid.uuid4().hex, set())
            entry = self._runs.setdefault(id(usage), minted)
            if entry is minted:
                weakref.finalize(usage, self._collected, id(usage))
        marker = getattr(context, _SDK_RUN_SCOPE, None)
        run_id = marker if isinstance(marker, str) and marker else entry[0]
        entry[1].add((session, run_id))
        return run_id

    def _collected(self, key: int) -> None:
        entry = self._runs.pop(key, None)
        if entry is not None:
            self.gone.append(entry[1])

    def drain(self) -> list[tuple[Hashable, str]]:
        """The scopes of collected runs, to end outside any finaliser."""
        ended: list[tuple[Hashable, str]] = []
        while self.gone:
            try:
                ended.extend(self.gone.popleft())
            except IndexError:  # another thread drained it first
                break
        return ended


class GuardedTools(list[Tool]):
    """The guarded tool list: a plain ``list`` for ``Agent(tools=...)``, plus ``.loop_guard``."""

    loop_guard: LoopGuard

    @property
    def guard(self) -> ToolLoopGuard:
        return self.loop_guard.guard


class LoopGuard:
    """loopcore's guard for OpenAI Agents SDK function tools.

    ``guard`` is the ``ToolLoopGuard`` to use; without one, a guard is built
    from ``config`` and ``mode`` (``"observe"`` for shadow mode).
    ``session_key(run_context)`` says which conversation a run belongs to
    (default: the run context's ``session_id``, else each run is on its own);
    ``run_key(run_context)`` names the run (default, or when it returns None:
    one run per ``Runner.run``), for hosts that resume runs from a
    ``RunState`` and want the resumed run to keep its history.
    """

    def __init__(
        self,
        guard: ToolLoopGuard | None = None,
        *,
        config: LoopDetectionConfig | Mapping[str, Any] | None = None,
        mode: str | None = None,
        session_key: SessionKey | None = None,
        run_key: RunKey | None = None,
    ) -> None:
        guard = guard_of(guard, config, mode)
        if session_key is not None and not callable(session_key):
            raise TypeError(
                f"session_key: expected a callable or None, got {type(session_key).__name__}"
            )
        self._guard = guard
        if run_key is not None and not callable(run_key):
            raise TypeError(f"run_key: expected a callable or None, got {type(run_key).__name__}")
        self._session_key: SessionKey = session_key or context_session
        self._run_key = run_key
        self._runs = _RunIds()
        self._pending: OrderedDict[tuple[Hashable, str, str], Decision] = OrderedDict()
        self._pending_lock = threading.Lock()

    @property
    def guard(self) -> ToolLoopGuard:
        return self._guard

    def stats(self) -> GuardStats:
        return self._guard.stats()

    def __repr__(self) -> str:
        return f"LoopGuard({self._guard!r})"

    # -- scopes ----------------------------------------------------------------------------

    def scope_of(self, context: RunContextWrapper[Any]) -> tuple[Hashable, str]:
        """``(session, run_id)`` of the run ``context`` belongs to (a run's or a tool's context)."""
        if not isinstance(context, RunContextWrapper):
            raise TypeError(f"context: expected a RunContextWrapper, got {type(context).__name__}")
        try:
            session = self._session_key(context)
            hash(session)
        except Exception as exc:  # the host's callable: never take the run down
            logger.error("session_key failed (%s); using no session", type(exc).__name__)
            session = None
        run_id = None
        if self._run_key is not None:
            try:
                run_id = self._run_key(context)
                if run_id is not None and not isinstance(run_id, str):
                    raise TypeError(f"expected a str or None, got {type(run_id).__name__}")
            except Exception as exc:
                logger.error("run_key failed (%s); one run per Runner.run", type(exc).__name__)
                run_id = None
        return session, run_id or self._runs.of(context, session)

    def arm_post_compaction(self, context: RunContextWrapper[Any]) -> None:
        """Arm the post-compaction guard of ``context``'s run: call it after compacting."""
        session, run_id = self.scope_of(context)
        self._guard.arm_post_compaction(session=session, run_id=run_id)

    def end_run(self, context: RunContextWrapper[Any]) -> None:
        """Forget ``context``'s run now; without ``run_key``, it is forgotten anyway once
        the run's context is garbage collected."""
        session, run_id = self.scope_of(context)
        self._guard.end_run(session=session, run_id=run_id)

    def _end_collected(self) -> None:
        for session, run_id in self._runs.drain():
            self._guard.end_run(session=session, run_id=run_id)

    # -- wrapping --------------------------------------------------------------------------

    def tools(self, tools: Iterable[Tool]) -> GuardedTools:
        """Guarded copies of ``tools``' function tools; other tools are passed through."""
        guarded = GuardedTools(self.tool(t) for t in tools)
        guarded.loop_guard = self
        return guarded

    def tool(self, tool: Tool) -> Tool:
        """A guarded copy of one function tool (any other tool comes back as it is)."""
        if not isinstance(tool, FunctionTool):
            return tool
        invoker = tool.on_invoke_tool
        if isinstance(invoker, _Invoker) and invoker.owner is self:
            return tool
        name = getattr(tool, "qualified_name", None) or tool.name
        guarded = copy.copy(tool)
        guarded.tool_input_guardrails = [*(tool.tool_input_guardrails or []), self._guardrail(name)]
        guarded.on_invoke_tool = _Invoker(self, name, guarded.on_invoke_tool, tool)
        return guarded

    def agent(self, agent: AgentT) -> AgentT:
        """A clone of ``agent`` whose function tools are guarded."""
        return agent.clone(tools=self.tools(agent.tools))  # type: ignore[return-value]

    def _guardrail(self, tool_name: str) -> ToolInputGuardrail[Any]:
        def check(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
            decision = self._before(tool_name, data.context)
            if decision is None or not decision.blocked:
                return ToolGuardrailFunctionOutput.allow(output_info=decision)
            if decision.terminal:
                return ToolGuardrailFunctionOutput.raise_exception(output_info=decision)
            return ToolGuardrailFunctionOutput.reject_content(
                decision.result_text or "", output_info=decision
            )

        return ToolInputGuardrail(guardrail_function=check, name=GUARDRAIL_NAME)

    # -- the two calls ---------------------------------------------------------------------

    def _before(self, tool_name: str, context: ToolContext[Any]) -> Decision | None:
        try:
            self._end_collected()
            session, run_id = self.scope_of(context)
            call_id = context.tool_call_id
            key: tuple[Hashable, str, str] = (session, run_id, call_id)
            with self._pending_lock:
                # The SDK may run input guardrails twice for one call (before an
                # approval, then before the call): one call, one check.
                known: Decision | None = self._pending.get(key)
            if known is not None:
                return known
            decision: Decision = self._guard.before_call(
                tool_name,
                _parsed(context.tool_arguments),
                tool_call_id=call_id,
                session=session,
                run_id=run_id,
            )
        except Exception as exc:
            logger.error(
                "loop check failed for %s (%s); the call runs", tool_name, type(exc).__name__
            )
            return None
        if not decision.blocked:
            with self._pending_lock:
                self._pending[key] = decision
                while len(self._pending) > _MAX_PENDING:
                    self._pending.popitem(last=False)
        return decision

    def _after(
        self,
        tool_name: str,
        context: ToolContext[Any],
        arguments: str,
        *,
        result: Any = UNSET,
        error: Any = UNSET,
    ) -> Any:
        """Record the outcome; what the model should see. Raises CompactionLoopPersisted.

        For an error given as text (the SDK's failure output), the text is
        what the model sees, with the warning's note.
        """
        shown = result if result is not UNSET else error if isinstance(error, str) else None
        try:
            session, run_id = self.scope_of(context)
            call_id = context.tool_call_id
            with self._pending_lock:
                decision = self._pending.pop((session, run_id, call_id), None)
            answer = self._guard.after_call(
                tool_name,
                _parsed(arguments),
                result=result,
                error=error,
                tool_call_id=call_id,
                session=session,
                run_id=run_id,
            )
        except CompactionLoopPersisted:
            raise
        except Exception as exc:
            logger.error("loop record failed for %s (%s)", tool_name, type(exc).__name__)
            return shown
        if result is not UNSET and answer is not result:
            return answer  # the guard added the note itself
        note = decision.model_note if decision is not None else None
        return shown if note is None else _with_note(shown, note)


class _Invoker:
    """The guarded tool's ``on_invoke_tool``: runs the tool, then records its outcome."""

    def __init__(
        self, owner: LoopGuard, tool_name: str, inner: Any, original: FunctionTool
    ) -> None:
        self.owner = owner
        self._name = tool_name
        self._inner = inner
        self._original = original
        # A typed tool's output must stay valid JSON: no note is added to it.
        self._notes = original.output_json_schema is None
        # The SDK refuses a timeout on a sync tool by this mark on its invoker.
        if getattr(inner, _SDK_SYNC_TOOL, False):
            setattr(self, _SDK_SYNC_TOOL, True)

    def __agents_bind_function_tool__(self, function_tool: FunctionTool) -> _Invoker:
        """The SDK copies tools (namespaces): the inner invoker follows the copy."""
        bind = getattr(self._inner, "__agents_bind_function_tool__", None)
        inner = bind(function_tool) if callable(bind) else self._inner
        return _Invoker(self.owner, self._name, inner, self._original)

    async def __call__(self, ctx: Any, input: str) -> Any:
        narrow = getattr(_sdk_tool, "_get_function_tool_invoke_context", None)
        inner_ctx = narrow(self._original, ctx) if callable(narrow) else ctx
        try:
            result = await self._inner(inner_ctx, input)
        except Exception as exc:
            self.owner._after(self._name, ctx, input, error=exc)
            raise
        if getattr(ctx, _SDK_DEFAULT_FAILURE, False) is True:
            # The SDK turned an exception into this text: an error, not a result.
            shown = self.owner._after(self._name, ctx, input, error=result)
            shown = result if shown is None else shown
        else:
            shown = self.owner._after(self._name, ctx, input, result=result)
        return shown if self._notes else result


def guard_tools(
    tools: Iterable[Tool],
    guard: ToolLoopGuard | None = None,
    *,
    config: LoopDetectionConfig | Mapping[str, Any] | None = None,
    mode: str | None = None,
    session_key: SessionKey | None = None,
    run_key: RunKey | None = None,
) -> GuardedTools:
    """Guarded copies of ``tools`` (see ``LoopGuard``); the list's ``.guard`` has ``stats()``."""
    loop_guard = LoopGuard(
        guard, config=config, mode=mode, session_key=session_key, run_key=run_key
    )
    return loop_guard.tools(tools)


def loop_stop(error: BaseException) -> Decision | CompactionLoopPersisted | None:
    """What loopcore stopped the run with, if it did: ``Runner.run``'s exception unwrapped.

    The terminal block's ``Decision`` (from ``ToolInputGuardrailTripwireTriggered``),
    the ``CompactionLoopPersisted`` behind the SDK's ``UserError``, or None.
    """
    if isinstance(error, ToolInputGuardrailTripwireTriggered):
        info = error.output.output_info
        if error.guardrail.name == GUARDRAIL_NAME and isinstance(info, Decision):
            return info
        return None
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, CompactionLoopPersisted):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__
    return None

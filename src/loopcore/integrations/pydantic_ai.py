"""How does a PydanticAI agent's tool call go through loopcore's guard?

``LoopGuardToolset`` wraps any PydanticAI toolset and runs every call through
``ToolLoopGuard.before_call`` / ``after_call``; ``LoopGuardCapability`` does
the same for all of an agent's tools (``Agent(capabilities=[...])``).

- A blocked call does not run: the tool raises ``ToolFailed`` with the block
  text, which PydanticAI hands to the model as a failed tool result without
  spending the tool's retry budget (``ModelRetry`` would).
- A terminal block raises ``ToolLoopRunTerminated`` out of ``agent.run``: no
  further model request is made.
- A warned call's note is appended to a ``str`` result (or to a ``str``
  ``ToolReturn.return_value``); any other result comes back as a
  ``ToolReturn`` whose ``content`` (a user part next to the tool result)
  carries the note. A warned ``ModelRetry``/``ToolFailed`` gets it in its
  message, any other exception through ``add_note``.
- Scope: ``session`` is ``ctx.conversation_id`` unless given, ``run_id`` is
  ``ctx.run_id`` (a fresh id per run, so concurrent runs never mix); the
  run's scope is freed when the run ends.
- A new ``CompactionPart`` in the run's history arms the post-compaction
  guard; ``arm_post_compaction(ctx)`` is there for compactions that leave none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

try:
    from pydantic_ai import RunContext, ToolReturn
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolFailed
    from pydantic_ai.messages import CompactionPart, ModelMessage
    from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
except ImportError as exc:  # missing, or older than capabilities and ToolFailed
    raise ImportError(
        "loopcore.integrations.pydantic_ai needs a recent pydantic-ai-slim (tested with 2.68): "
        f"pip install -U 'loopcore[pydantic-ai]' ({exc})"
    ) from exc

from .._config import LoopDetectionConfig
from .._decisions import Decision, ToolLoopRunTerminated
from .._hook import ToolLoopGuard
from .._wrap import _noted
from . import guard_of

__all__ = ["LoopGuardCapability", "LoopGuardToolset", "SessionOf"]

#: A fixed session, or a function of the run context giving it (e.g. from ``ctx.deps``).
SessionOf = Hashable | Callable[[RunContext[Any]], Hashable]
Mode = Literal["enforce", "observe"]

# How many runs one toolset instance keeps compaction marks for when PydanticAI
# did not give it a per-run copy (``for_run``); an agent always does.
_MAX_TRACKED_RUNS = 64


def _conversation(ctx: RunContext[Any]) -> Hashable:
    return ctx.conversation_id


def _newest_compaction(messages: Sequence[ModelMessage]) -> CompactionPart | None:
    # Newest first: the common case (no compaction) walks the history once.
    for message in reversed(messages):
        for part in reversed(message.parts):
            if isinstance(part, CompactionPart):
                return part
    return None


@dataclass
class _RunMarks:
    """Per-run state: which compaction each run was last armed for, which scopes it used."""

    per_run: bool = False
    compaction: dict[str | None, CompactionPart | None] = field(default_factory=dict)
    scopes: set[tuple[Hashable, str | None]] = field(default_factory=set)


def _with_note(result: Any, note: str) -> ToolReturn[Any]:
    """``result`` as a ``ToolReturn`` whose content (seen by the model) ends with ``note``."""
    if not isinstance(result, ToolReturn):
        return ToolReturn(return_value=result, content=note)
    content = result.content
    merged: str | list[Any]
    if content is None:
        merged = note
    elif isinstance(content, str):
        merged = f"{content}\n\n{note}"
    else:
        merged = [*content, note]
    return dataclasses.replace(result, content=merged)


@dataclass(init=False)
class LoopGuardToolset(WrapperToolset[Any]):
    """A toolset whose every call is checked by a ``ToolLoopGuard`` (see the module docstring).

    ``guard`` is shared (pass one to several toolsets or agents to share counts);
    without one, ``config`` and ``mode`` build it. ``session`` is a fixed value or
    a function of the ``RunContext``; by default the run's ``conversation_id``.
    """

    guard: ToolLoopGuard
    session: SessionOf
    _marks: _RunMarks = field(init=False, repr=False, compare=False)

    def __init__(
        self,
        wrapped: AbstractToolset[Any],
        guard: ToolLoopGuard | None = None,
        *,
        config: LoopDetectionConfig | Mapping[str, Any] | None = None,
        mode: Mode | None = None,
        session: SessionOf = _conversation,
    ) -> None:
        if not isinstance(wrapped, AbstractToolset):
            raise TypeError(f"wrapped: expected a PydanticAI toolset, got {type(wrapped).__name__}")
        self.wrapped = wrapped
        self.guard = guard_of(guard, config, mode)
        self.session = session
        self._marks = _RunMarks()

    # -- scope -----------------------------------------------------------------------------

    def scope_of(self, ctx: RunContext[Any]) -> tuple[Hashable, str | None]:
        """The guard scope ``(session, run_id)`` of the run ``ctx`` belongs to."""
        session = self.session(ctx) if callable(self.session) else self.session
        return session, ctx.run_id

    def arm_post_compaction(self, ctx: RunContext[Any]) -> None:
        """Arm the post-compaction guard for ``ctx``'s run, e.g. from a history processor."""
        session, run_id = self.scope_of(ctx)
        self.guard.arm_post_compaction(session=session, run_id=run_id)

    def _watch_compaction(
        self, ctx: RunContext[Any], session: Hashable, run_id: str | None
    ) -> None:
        marks = self._marks.compaction
        newest = _newest_compaction(ctx.messages)
        if run_id not in marks:
            # First sight of a run outside ``for_run``: what is there already is old news.
            if len(marks) >= _MAX_TRACKED_RUNS:
                del marks[next(iter(marks))]
            marks[run_id] = newest
        elif newest is not None and newest is not marks[run_id]:
            marks[run_id] = newest
            self.guard.arm_post_compaction(session=session, run_id=run_id)

    # -- the run's life --------------------------------------------------------------------

    async def for_run(self, ctx: RunContext[Any]) -> LoopGuardToolset:
        # Always a fresh copy, so each run has its own marks even when runs overlap.
        run = dataclasses.replace(self, wrapped=await self.wrapped.for_run(ctx))
        run._marks.per_run = True
        run._marks.compaction[ctx.run_id] = _newest_compaction(ctx.messages)
        return run

    async def __aexit__(self, *args: Any) -> bool | None:
        try:
            return await self.wrapped.__aexit__(*args)
        finally:
            # The run is over: its history, warnings and allowance are no longer needed.
            scopes, self._marks.scopes = self._marks.scopes, set()
            for session, run_id in scopes:
                self.guard.end_run(session=session, run_id=run_id)

    # -- one call --------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        tool_args: dict[str, Any],
        ctx: RunContext[Any],
        tool: ToolsetTool[Any],
    ) -> Any:
        session, run_id = self.scope_of(ctx)
        if self._marks.per_run and run_id is not None:
            # Only a per-run copy sees its run end (``__aexit__``); others rely on the LRU.
            self._marks.scopes.add((session, run_id))
        self._watch_compaction(ctx, session, run_id)
        call_id = ctx.tool_call_id
        guard = self.guard
        decision = guard.before_call(
            name, tool_args, tool_call_id=call_id, session=session, run_id=run_id
        )
        if decision.blocked:
            text = decision.result_text or decision.reason or ""
            if decision.terminal:
                raise ToolLoopRunTerminated(decision.verdict, decision.reason, text)
            raise ToolFailed(text)
        try:
            result = await self.wrapped.call_tool(name, tool_args, ctx, tool)
        except (CallDeferred, ApprovalRequired):
            # Not an outcome: the call will run (or not) later, as a new call.
            self._release(call_id, session, run_id)
            raise
        except (ModelRetry, ToolFailed) as exc:
            guard.after_call(
                name, tool_args, error=exc, tool_call_id=call_id, session=session, run_id=run_id
            )
            if decision.model_note:
                # The model reads the exception's message, so that is where the note goes.
                exc.message = f"{exc.message}\n\n{decision.model_note}"
            raise
        except Exception as exc:
            guard.after_call(
                name, tool_args, error=exc, tool_call_id=call_id, session=session, run_id=run_id
            )
            _noted(exc, decision)  # add_note and loop_note, as guard.wrap does
            raise
        except BaseException:
            # Cancelled (a sibling call ended the run, a timeout): no outcome to record.
            self._release(call_id, session, run_id)
            raise
        return self._annotate(name, tool_args, result, decision, call_id, session, run_id)

    def _annotate(
        self,
        name: str,
        tool_args: dict[str, Any],
        result: Any,
        decision: Decision,
        call_id: str | None,
        session: Hashable,
        run_id: str | None,
    ) -> Any:
        # The outcome fingerprinted is the tool's own value, not the wrapper around it.
        raw = result.return_value if isinstance(result, ToolReturn) else result
        shown = self.guard.after_call(
            name, tool_args, result=raw, tool_call_id=call_id, session=session, run_id=run_id
        )
        if shown is not raw or isinstance(raw, str):
            # after_call placed the note itself (a str, a tool-result mapping), or there was none.
            if isinstance(result, ToolReturn):
                return dataclasses.replace(result, return_value=shown)
            return shown
        note = decision.model_note
        return result if note is None else _with_note(result, note)

    def _release(self, call_id: str | None, session: Hashable, run_id: str | None) -> None:
        if call_id:
            self.guard.release([call_id], session=session, run_id=run_id)


@dataclass(init=False)
class LoopGuardCapability(AbstractCapability[Any]):
    """Guard all of an agent's tools: ``Agent(..., capabilities=[LoopGuardCapability()])``.

    Each run's assembled toolset (function tools, MCP servers, other toolsets;
    not output tools) is wrapped in a ``LoopGuardToolset`` sharing this guard.
    """

    guard: ToolLoopGuard
    session: SessionOf

    def __init__(
        self,
        guard: ToolLoopGuard | None = None,
        *,
        config: LoopDetectionConfig | Mapping[str, Any] | None = None,
        mode: Mode | None = None,
        session: SessionOf = _conversation,
        id: str | None = None,
        description: str | None = None,
        defer_loading: bool = False,
    ) -> None:
        # id, description and defer_loading are the base class's fields, which
        # PydanticAI passes back when it copies a capability.
        self.guard = guard_of(guard, config, mode)
        self.session = session
        self.id = id
        self.description = description
        self.defer_loading = defer_loading

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live guard: not buildable from a spec file

    def get_wrapper_toolset(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any] | None:
        return LoopGuardToolset(toolset, self.guard, session=self.session)

    def arm_post_compaction(self, ctx: RunContext[Any]) -> None:
        """Arm the post-compaction guard for ``ctx``'s run, e.g. from a history processor."""
        session = self.session(ctx) if callable(self.session) else self.session
        self.guard.arm_post_compaction(session=session, run_id=ctx.run_id)

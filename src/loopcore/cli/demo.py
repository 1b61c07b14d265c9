"""``loopcore demo``: a simulated agent that gets stuck three ways, and what the guard does.

The first story shows recover-once: the warning's note the model reads, the
first critical blocking one call while the run goes on, and the second
critical ending the run.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from .. import (
    IMPLEMENTATION,
    TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE,
    CompactionLoopPersisted,
    LoopEvent,
    ToolLoopGuard,
)


class _Printer:
    def __init__(self, color: bool) -> None:
        self.color = color and sys.stdout.isatty()

    def __call__(self, text: str, tint: str = "") -> None:
        codes = {"warn": "33", "block": "31;1", "ok": "32", "head": "1"}
        if self.color and tint in codes:
            text = f"\033[{codes[tint]}m{text}\033[0m"
        print(text)


class _StoryLogHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes the library's log lines into the story; a closed stdout ends the demo."""

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, BrokenPipeError):
            raise error
        super().handleError(record)


def _poll_result() -> dict[str, Any]:
    # The process never changes; only the volatile pid/duration fields would, and they are ignored.
    return {
        "content": [{"type": "text", "text": "still building..."}],
        "details": {"status": "running", "aggregated": "step 3/7", "exitCode": None},
    }


def run(color: bool = True) -> int:
    out = _Printer(color)
    # Show the library's own log lines in order with the story (they never hold args or results).
    handler = _StoryLogHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("   [log %(levelname)s] %(message)s"))
    library_logger = logging.getLogger("loopcore")
    previous_level = library_logger.level
    library_logger.addHandler(handler)
    library_logger.setLevel(logging.INFO)
    try:
        return _story(out)
    finally:
        library_logger.removeHandler(handler)
        library_logger.setLevel(previous_level)


_Call = tuple[str, dict[str, Any], Any]


def _agent(
    out: _Printer, guard: ToolLoopGuard, run_id: str, next_call: Callable[[int], _Call]
) -> None:
    """Let the agent make up to 40 calls, reporting warnings and blocks, until its run ends."""
    for attempt in range(1, 41):
        tool, args, result = next_call(attempt)
        decision = guard.before_call(tool, args, run_id=run_id)
        if decision.blocked and decision.terminal:
            out(f"   call {attempt:2}: BLOCKED again: {decision.reason}", "block")
            out(f"   run ends: {TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE}", "block")
            return
        if decision.blocked:
            out(f"   call {attempt:2}: BLOCKED  {decision.reason}", "block")
            out("            (the model gets the block as the tool's result; the run goes on)")
            continue
        if decision.warning is not None:
            out(f"   call {attempt:2}: warned   {decision.warning.message}", "warn")
        guard.after_call(
            tool, args, result=result, run_id=run_id
        )  # the model reads what it returns
        if decision.model_note is not None:
            out(f"            the model reads the result with: {decision.model_note}", "warn")
    out("   never ended (unexpected)")


def _story(out: _Printer) -> int:
    events: list[LoopEvent] = []
    guard = ToolLoopGuard({"enabled": True}, on_event=events.append)
    out(f"loopcore demo (core: {IMPLEMENTATION}; defaults: warning 10, critical 20)", "head")

    out("\n1. The agent polls a build process that never finishes", "head")
    poll = {"action": "poll", "sessionId": "build-7"}
    _agent(out, guard, "run-1", lambda attempt: ("process", poll, _poll_result()))

    out("\n2. The agent bounces between two calls that change nothing", "head")
    read = {"path": "config.yaml"}
    make = {"command": "make test"}
    exec_result = {
        "content": [{"type": "text", "text": "1 failed"}],
        "details": {"status": "failed", "exitCode": 1, "aggregated": "1 failed", "pid": 0},
    }
    _agent(
        out,
        guard,
        "run-2",
        lambda attempt: (
            ("exec", make, exec_result) if attempt % 2 else ("read", read, "retries: 3")
        ),
    )

    out("\n3. After a context compaction the agent repeats the call that overflowed", "head")
    guard.arm_post_compaction(run_id="run-3")
    search = {"query": "TODO", "path": "."}
    try:
        for attempt in range(1, 5):
            guard.before_call("grep", search, run_id="run-3")
            guard.after_call("grep", search, result="src/app.py:12: TODO", run_id="run-3")
            out(f"   attempt {attempt}: grep returned the same lines")
    except CompactionLoopPersisted as exc:
        out(f"   run aborted: {exc}", "block")

    kinds = [event.kind for event in events]
    summary = ", ".join(f"{kinds.count(kind)} {kind}" for kind in dict.fromkeys(kinds))
    out(f"\nEvents a host would receive through on_event: {summary}", "ok")
    return 0

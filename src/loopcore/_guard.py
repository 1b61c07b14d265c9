"""What stops a loop that survives a context compaction? (SPEC §6, §8.10)"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from ._names import exact_str
from ._rules import COMPACTION_LOOP_PERSISTED as DETECTOR
from ._rules import abort_message, compaction_error_message

__all__ = [
    "BASELINE",
    "CompactionLoopPersisted",
    "GuardVerdict",
    "PostCompactionGuard",
    "WindowSummary",
    "arm_quietly",
    "close_quietly",
    "log_abort",
    "log_armed",
    "log_window_closed",
    "observe_quietly",
    "window_closed_text",
]

logger = logging.getLogger("loopcore")

#: Observations whose (tool, args_hash) an arming compares the window against (SPEC §8.10).
BASELINE = 16

_Triple = tuple[str, int, "int | None"]
_Signature = tuple[str, int]
_NO_SIGNATURES: frozenset[_Signature] = frozenset()


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """What one ``PostCompactionGuard.observe`` call decided."""

    should_abort: bool = False
    armed: bool = False
    remaining_attempts: int = 0
    detector: str | None = None
    count: int = 0
    tool_name: str | None = None
    message: str | None = None


_IDLE = GuardVerdict()


class WindowSummary(NamedTuple):
    """What a post-compaction window saw, reported when it closes without an abort."""

    tool_calls: int
    repeats: int
    #: Tools of the calls that repeated a pre-compaction signature, sorted.
    tools: tuple[str, ...]


def window_closed_text(summary: WindowSummary) -> str:
    """The §8.10 INFO line of a closed window, without any scope suffix."""
    text = (
        f"post-compaction window closed: toolCalls={summary.tool_calls} "
        f"preCompactionRepeats={summary.repeats}"
    )
    if summary.repeats > 0:
        text += " tools=" + ",".join(summary.tools)
    return text


class CompactionLoopPersisted(RuntimeError):
    """The run kept repeating the same call with the same result after a compaction."""

    detector = DETECTOR

    def __init__(self, tool_name: str, count: int, message: str | None = None) -> None:
        self.tool_name = tool_name
        self.count = count
        self.message = message or compaction_error_message(tool_name, count)
        super().__init__(self.message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.tool_name, self.count, self.message))


def _check_window(window_size: object) -> int:
    if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 1:
        raise ValueError(f"window_size: expected a positive integer, got {window_size!r}")
    return window_size


class PostCompactionGuard:
    """Armed after a compaction retry; aborts when the window fills with one identical call.

    Whenever enabled it also remembers the (tool, args_hash) of the last ``BASELINE``
    observations, so that a window can count how many of its calls re-do work from
    before the compaction (SPEC §8.10). A window is open exactly while the guard is
    armed.

    Not thread-safe by itself: ``ToolLoopGuard`` keeps one per scope.
    """

    __slots__ = (
        "_baseline",
        "_calls",
        "_enabled",
        "_remaining",
        "_repeats",
        "_snapshot",
        "_tools",
        "_window",
        "window_size",
    )

    def __init__(self, window_size: int = 3, enabled: bool = True) -> None:
        self.window_size = _check_window(window_size)
        self._enabled = bool(enabled)
        self._remaining = 0
        self._window: deque[_Triple] = deque(maxlen=self.window_size)
        self._baseline: deque[_Signature] = deque(maxlen=BASELINE)
        self._snapshot = _NO_SIGNATURES
        self._calls = 0
        self._repeats = 0
        self._tools: set[str] = set()

    @property
    def armed(self) -> bool:
        return self._remaining > 0

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def remaining_attempts(self) -> int:
        return self._remaining

    def __repr__(self) -> str:
        return (
            f"PostCompactionGuard(window_size={self.window_size}, enabled={self._enabled}, "
            f"remaining_attempts={self._remaining})"
        )

    def arm(self) -> None:
        """Start watching the next ``window_size`` attempts (a no-op when disabled).

        An open window is closed first, with its summary line.
        """
        armed, closed = arm_quietly(self)
        if closed is not None:
            log_window_closed(closed)
        if armed:
            log_armed(self.window_size)

    def observe(self, tool_name: str, args_hash: int, result_hash: int | None) -> GuardVerdict:
        """Use up one attempt; abort when the window holds ``window_size`` identical triples."""
        verdict, closed = observe_quietly(self, tool_name, args_hash, result_hash)
        if verdict.should_abort:
            log_abort(verdict, self.window_size)
        elif closed is not None:
            log_window_closed(closed)
        return verdict

    def close_window(self) -> WindowSummary | None:
        """Close an open window early (logging its summary); None when none was open."""
        closed = close_quietly(self)
        if closed is not None:
            log_window_closed(closed)
        return closed


# The steps without their log lines, for ToolLoopGuard: it runs them under its lock and
# logs once the lock is released (a logging handler is host code that may call back in).


def _close(guard: PostCompactionGuard) -> WindowSummary | None:
    """End the open window, if any, and say what it saw."""
    if guard._remaining <= 0:
        return None
    summary = _summary(guard)
    _reset_window(guard)
    return summary


def _summary(guard: PostCompactionGuard) -> WindowSummary:
    return WindowSummary(guard._calls, guard._repeats, tuple(sorted(guard._tools)))


def _reset_window(guard: PostCompactionGuard) -> None:
    guard._remaining = 0
    guard._calls = guard._repeats = 0
    guard._tools = set()
    # The snapshot is only needed while a window is open.
    guard._snapshot = _NO_SIGNATURES


def arm_quietly(guard: PostCompactionGuard) -> tuple[bool, WindowSummary | None]:
    """``guard.arm()`` without log lines: (armed?, summary of the window it closed).

    A disabled guard is left untouched: ``(False, None)``.
    """
    if not guard._enabled:
        return False, None
    closed = _close(guard)
    guard._snapshot = frozenset(guard._baseline)
    guard._remaining = guard.window_size
    guard._window.clear()
    return True, closed


def close_quietly(guard: PostCompactionGuard) -> WindowSummary | None:
    """``guard.close_window()`` without the log line (for a run's end, say)."""
    return _close(guard)


def observe_quietly(
    guard: PostCompactionGuard, tool_name: str, args_hash: int, result_hash: int | None
) -> tuple[GuardVerdict, WindowSummary | None]:
    """``guard.observe(...)`` without log lines: (verdict, summary of a window it closed).

    The summary is set only when this observation used the window's last attempt
    without an abort; an abort closes the window with no summary.
    """
    if not guard._enabled:
        return _IDLE, None
    # Kept as an exact str: a subclass's __del__ must not run when the ring lets go of it
    # (the hook calls this under its lock).
    tool_name = exact_str(tool_name)
    signature = (tool_name, args_hash)
    # Fed armed or not, before or after the window: the baseline is just the recent tail.
    guard._baseline.append(signature)
    if guard._remaining <= 0:
        return _IDLE, None
    guard._remaining -= 1
    guard._calls += 1
    if signature in guard._snapshot:
        guard._repeats += 1
        guard._tools.add(tool_name)
    triple = (tool_name, args_hash, result_hash)
    guard._window.append(triple)
    count = guard._window.count(triple)
    if count >= guard.window_size:
        _reset_window(guard)
        message = abort_message(tool_name, count, guard.window_size)
        return GuardVerdict(True, False, 0, DETECTOR, count, tool_name, message), None
    remaining = guard._remaining
    verdict = GuardVerdict(False, remaining > 0, remaining, None, count, tool_name)
    if remaining > 0:
        return verdict, None
    # The last attempt went by without an abort: the window ends here.
    summary = _summary(guard)
    _reset_window(guard)
    return verdict, summary


def log_armed(
    window_size: int, suffix: str = "", extra: Mapping[str, object] | None = None
) -> None:
    logger.info("post-compaction guard armed for %d attempts%s", window_size, suffix, extra=extra)


def log_abort(
    verdict: GuardVerdict,
    window_size: int,
    suffix: str = "",
    extra: Mapping[str, object] | None = None,
) -> None:
    logger.error(
        "post-compaction guard aborted the run: tool=%s count=%d window=%d%s",
        verdict.tool_name,
        verdict.count,
        window_size,
        suffix,
        extra=extra,
    )


def log_window_closed(
    summary: WindowSummary, suffix: str = "", extra: Mapping[str, object] | None = None
) -> None:
    logger.info("%s%s", window_closed_text(summary), suffix, extra=extra)

"""What stops a loop that survives a context compaction? (SPEC §6)"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

from ._rules import COMPACTION_LOOP_PERSISTED as DETECTOR
from ._rules import abort_message, compaction_error_message

__all__ = [
    "CompactionLoopPersisted",
    "GuardVerdict",
    "PostCompactionGuard",
    "arm_quietly",
    "log_abort",
    "log_armed",
    "observe_quietly",
]

logger = logging.getLogger("loopcore")


_Triple = tuple[str, int, "int | None"]


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

    Not thread-safe by itself: ``ToolLoopGuard`` keeps one per scope.
    """

    __slots__ = ("_enabled", "_remaining", "_window", "window_size")

    def __init__(self, window_size: int = 3, enabled: bool = True) -> None:
        self.window_size = _check_window(window_size)
        self._enabled = bool(enabled)
        self._remaining = 0
        self._window: deque[_Triple] = deque(maxlen=self.window_size)

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
        """Start watching the next ``window_size`` attempts (a no-op when disabled)."""
        if arm_quietly(self):
            log_armed(self.window_size)

    def observe(self, tool_name: str, args_hash: int, result_hash: int | None) -> GuardVerdict:
        """Use up one attempt; abort when the window holds ``window_size`` identical triples."""
        verdict = observe_quietly(self, tool_name, args_hash, result_hash)
        if verdict.should_abort:
            log_abort(verdict, self.window_size)
        return verdict


# The steps without their log lines, for ToolLoopGuard: it runs them under its lock and
# logs once the lock is released (a logging handler is host code that may call back in).


def arm_quietly(guard: PostCompactionGuard) -> bool:
    """``guard.arm()`` without the log line; False when the guard is disabled."""
    if not guard._enabled:
        return False
    guard._remaining = guard.window_size
    guard._window.clear()
    return True


def observe_quietly(
    guard: PostCompactionGuard, tool_name: str, args_hash: int, result_hash: int | None
) -> GuardVerdict:
    """``guard.observe(...)`` without the log line of an abort."""
    if not guard._enabled or guard._remaining <= 0:
        return _IDLE
    guard._remaining -= 1
    triple = (tool_name, args_hash, result_hash)
    guard._window.append(triple)
    count = guard._window.count(triple)
    if count >= guard.window_size:
        guard._remaining = 0
        message = abort_message(tool_name, count, guard.window_size)
        return GuardVerdict(True, False, 0, DETECTOR, count, tool_name, message)
    return GuardVerdict(False, guard._remaining > 0, guard._remaining, None, count, tool_name)


def log_armed(window_size: int) -> None:
    logger.info("post-compaction guard armed for %d attempts", window_size)


def log_abort(verdict: GuardVerdict, window_size: int) -> None:
    logger.error(
        "post-compaction guard aborted the run: tool=%s count=%d window=%d",
        verdict.tool_name,
        verdict.count,
        window_size,
    )

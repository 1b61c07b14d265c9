"""What stops a loop that survives a context compaction? (SPEC §6)"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

from ._rules import COMPACTION_LOOP_PERSISTED as DETECTOR
from ._rules import abort_message, compaction_error_message

__all__ = ["CompactionLoopPersisted", "GuardVerdict", "PostCompactionGuard"]

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
        if not self._enabled:
            return
        self._remaining = self.window_size
        self._window.clear()
        logger.info("post-compaction guard armed for %d attempts", self.window_size)

    def observe(self, tool_name: str, args_hash: int, result_hash: int | None) -> GuardVerdict:
        """Use up one attempt; abort when the window holds ``window_size`` identical triples."""
        if not self._enabled or self._remaining <= 0:
            return _IDLE
        self._remaining -= 1
        triple = (tool_name, args_hash, result_hash)
        self._window.append(triple)
        count = self._window.count(triple)
        if count >= self.window_size:
            self._remaining = 0
            message = abort_message(tool_name, count, self.window_size)
            logger.error(
                "post-compaction guard aborted the run: tool=%s count=%d window=%d",
                tool_name,
                count,
                self.window_size,
            )
            return GuardVerdict(True, False, 0, DETECTOR, count, tool_name, message)
        return GuardVerdict(False, self._remaining > 0, self._remaining, None, count, tool_name)

"""What does the gateway hook remember about one scope? (SPEC §5, §8.2, §8.3, §8.11, §8.12, §9.3)

Beside the scope's history (kept by the store), the hook keeps per scope: the
warning buckets already shown, whether recovery was used (``critical_seen``),
how often each call was blocked (for storm control of the log), the notes of
warned calls still running, the churn's liveness, the run-loop counters and
the post-compaction guard. Created on a scope's first non-quiet call; the
caller holds the hook's lock for every method here.
"""

from __future__ import annotations

from collections import OrderedDict

from ._decisions import Decision
from ._guard import PostCompactionGuard
from ._records import Verdict
from ._runloop import RunLoop

__all__ = ["MAX_BLOCK_KEYS", "MAX_WARNING_KEYS", "ScopeState"]

#: Warning keys remembered per scope for de-duplication (SPEC §5).
MAX_WARNING_KEYS = 256
#: Blocked calls whose block count is remembered per scope for storm control.
MAX_BLOCK_KEYS = 256


class ScopeState:
    """One scope's hook state (not thread-safe: the hook's lock guards it)."""

    __slots__ = (
        "blocks",
        "churn_observed_at",
        "churn_since",
        "critical_seen",
        "event_error_logged",
        "guard",
        "last_block",
        "notes",
        "runs",
        "stopped",
        "warned",
    )

    def __init__(self) -> None:
        self.warned: OrderedDict[str, int] = OrderedDict()
        self.blocks: dict[tuple[str, int], int] = {}
        self.notes: dict[tuple[str, int], tuple[str | None, str]] = {}
        self.guard: PostCompactionGuard | None = None
        self.runs: RunLoop | None = None
        self.critical_seen = False
        self.stopped = False
        self.churn_since: float | None = None
        self.churn_observed_at: float | None = None
        self.event_error_logged = False
        #: The decision of the last block, handed out again while a storm repeats it.
        self.last_block: Decision | None = None

    def first_warning(self, verdict: Verdict, threshold: int) -> bool:
        """Is this the first time the warning's key reaches a new multiple of ``threshold``?"""
        multiple = verdict.count // threshold
        key = verdict.warning_key or ""
        warned = self.warned
        shown = warned.get(key, 0)
        if key in warned:
            warned.move_to_end(key)
        if multiple <= shown:
            return False
        warned[key] = multiple
        if len(warned) > MAX_WARNING_KEYS:
            warned.popitem(last=False)
        return True

    def count_block(self, tool_name: str, args_hash: int) -> int:
        """One more block of this call in this scope; how many so far."""
        key = (tool_name, args_hash)
        blocks = self.blocks
        count = blocks.get(key, 0) + 1
        if count == 1 and len(blocks) >= MAX_BLOCK_KEYS:
            del blocks[next(iter(blocks))]  # the call blocked first is forgotten first
        blocks[key] = count
        return count

    def post_compaction(self, window_size: int) -> PostCompactionGuard:
        if self.guard is None:
            self.guard = PostCompactionGuard(window_size)
        return self.guard

    def run_loop(self, limits: tuple[int | None, int | None, int | None]) -> RunLoop:
        if self.runs is None:
            self.runs = RunLoop(*limits)
        return self.runs

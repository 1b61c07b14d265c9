"""What do a history and a batch's veto placeholders count, without a rescan? (SPEC §8.2, §12.17)

``before_batch`` checks each call of a batch against the history followed by
one veto placeholder per earlier call. Counting that projection afresh for
every call costs O(batch * history); here the history is walked once and each
placeholder updates the counts it can change, so a whole batch costs
O(history + batch). What a placeholder (a veto, newest of all) does to each
count follows from the reference counts of ``_counts``:

- recent count and §8.1 streak: + the placeholders of the same call;
- terminal streak and churn: none if any placeholder is of another tool (the
  walk stops there), else the history's own, with the placeholders pending
  (terminal) or skipped (churn);
- unknown-tool streak: unchanged (vetoes are skipped);
- ping-pong: the alternation is extended or restarted by each placeholder;
  placeholders are neutral for progress, so only a tail that still reaches
  into the history can show no progress, and then as the history's tail does.

``tests/test_projection.py`` holds this equal to ``scan_window`` over the
projection built in full.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ._counts import (
    ARGS,
    KIND,
    RESULT,
    TOOL,
    alternation,
    churn_of,
    churn_tail,
    terminal_streak,
    unknown_streak,
)
from ._records import KIND_VETO, ScanStats

__all__ = ["Projection"]


def _streaks(newest_first: Sequence[Any]) -> dict[int, tuple[int, Any]]:
    """The §8.1 streak (or, with no result, the vetoes) and its reference, for every hash."""
    state: dict[int, list[Any]] = {}  # hash -> [pending, streak, reference, open]
    for record in newest_first:
        entry = state.get(record[ARGS])
        if entry is None:
            entry = state[record[ARGS]] = [0, 0, None, True]
        if not entry[3]:
            continue
        if record[KIND] == KIND_VETO:
            entry[0] += 1
        elif record[RESULT] is not None:
            if entry[2] is None:
                entry[2] = record[RESULT]
            elif record[RESULT] != entry[2]:
                entry[3] = False
                continue
            entry[1] += entry[0] + 1
            entry[0] = 0
    return {
        h: ((streak if reference is not None else pending), reference)
        for h, (pending, streak, reference, _) in state.items()
    }


class Projection:
    """A history (``RingStore.window``, oldest first) and the placeholders added to it."""

    __slots__ = (
        "_alternation",
        "_churn",
        "_history_tool",
        "_newest_tool",
        "_placeholders",
        "_recent",
        "_streaks",
        "_terminal",
        "_tools",
        "_unknown",
    )

    def __init__(self, window: Sequence[Sequence[Any]]) -> None:
        newest_first = list(reversed(window))
        self._recent = Counter(record[ARGS] for record in window)
        self._streaks = _streaks(newest_first)
        self._placeholders: Counter[int] = Counter()
        self._tools: set[str] = set()
        if not newest_first:
            self._history_tool: str | None = None
            self._newest_tool: str | None = None
            self._terminal: tuple[int, Any] = (0, None)
            self._churn: dict[int, list[Any]] = {}
            self._unknown: tuple[str | None, int, Any] = (None, 0, None)
            self._alternation: tuple[Any, Any, int, bool] = (None, None, 0, False)
            return
        # The per-tool walks stop at the first record of another tool: only the
        # newest record's tool (the newest non-veto one's, for unknown tools) has any.
        tool = newest_first[0][TOOL]
        self._history_tool = self._newest_tool = tool
        self._terminal = terminal_streak(newest_first, tool)
        self._churn = churn_tail(newest_first, tool)
        first = next((r for r in newest_first if r[KIND] != KIND_VETO), None)
        if first is None:
            self._unknown = (None, 0, None)
        else:
            self._unknown = (first[TOOL], *unknown_streak(newest_first, first[TOOL]))
        self._alternation = alternation(newest_first)

    def add(self, tool: str, args_hash: int) -> None:
        """One more veto placeholder, newest of all."""
        self._placeholders[args_hash] += 1
        self._tools.add(tool)
        self._newest_tool = tool
        side_a, side_b, tail, no_progress = self._alternation
        if side_a is None or args_hash == side_a:
            self._alternation = (args_hash, None, 1, False)
        elif tail >= 2 and args_hash == side_b:
            self._alternation = (args_hash, side_a, tail + 1, no_progress)
        else:  # the tail restarts: this placeholder and the record before it
            self._alternation = (args_hash, side_a, 2, False)

    def stats(self, tool: str, args_hash: int) -> ScanStats:
        """Every count ``scan_window`` gives over the history and the placeholders so far."""
        pending = self._placeholders[args_hash]
        recent = self._recent[args_hash] + pending
        streak, reference = self._streaks.get(args_hash, (0, None))
        streak += pending
        same_tool = not self._tools or self._tools == {tool}
        history_tool = same_tool and tool == self._history_tool
        terminal, anchor = self._terminal if history_tool else (0, None)
        if terminal:
            terminal += sum(self._placeholders.values())
        if terminal > streak:
            streak, reference = terminal, anchor
        unknown_tool, unknown, name = self._unknown
        if unknown_tool != tool:
            unknown, name = 0, None
        churn, variants = churn_of(self._churn, args_hash) if history_tool else (0, 0)
        side_a, side_b, tail, no_progress = self._alternation
        pingpong = tail + 1 if tail >= 2 and args_hash == side_b else 0
        if side_a is None:
            return ScanStats()
        return ScanStats(
            recent=recent,
            streak=streak,
            reference=reference,
            unknown_streak=unknown,
            unknown_name=name if unknown else None,
            pingpong=pingpong,
            paired_tool=self._newest_tool if pingpong else None,
            paired_hash=side_a,
            pingpong_no_progress=bool(pingpong) and no_progress,
            churn=churn,
            churn_variants=variants,
        )

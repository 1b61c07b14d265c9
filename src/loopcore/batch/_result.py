"""What did a batch scan find: per call, per scope, and over a whole trace? (SPEC §7)

``ScanResult`` holds the verdict codes of every call (the SPEC §4 table of
``loopcore._rules``, applied to the counts of ``_kernels`` column by column),
recomputes one call's full ``Verdict`` on demand, and sums the calls up per
scope (``ScopeSummary``) and over the trace (``ScanTotals``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .. import _rules
from .._config import LoopDetectionConfig
from .._counts import scan_window
from .._records import KIND_TERMINAL_EXEC, KIND_VETO, NOT_STUCK, ScanStats, Verdict
from .._rules import DETECTORS, LEVELS
from ._kernels import Bools, Ints, ScopeIndex, Stats, scope_index
from ._table import HAS_RESULT, HAS_UNKNOWN, NO_PROGRESS, TERMINAL, VETO, CallTable

__all__ = ["ScanResult", "ScanTotals", "ScopeSummary"]

I8 = npt.NDArray[np.int8]
I32 = npt.NDArray[np.int32]


class _Scans(NamedTuple):
    """Calls' counts as the columns ``_rules.select`` reads."""

    recent: I32
    streak: I32
    unknown_streak: I32
    pingpong: I32
    pingpong_no_progress: Bools
    churn: I32
    known_poll: Bools
    #: the tool is ``wait`` (SPEC §8.8: its known-poll critical row has its own threshold)
    wait: Bools


def _verdicts(scans: _Scans, config: LoopDetectionConfig) -> tuple[I8, I8, I32]:
    """``(level, detector, count)`` of each scan: the SPEC §8.9 table, first match wins."""
    return _rules.select(scans, config)


class Codes(NamedTuple):
    """Every call's verdict as codes, in trace order, and which criticals end the run."""

    level: I8
    detector: I8
    counts: I32
    #: a critical after the scope's first one: recover-once ends the run there (SPEC §8.2)
    terminal: Bools


@dataclass(frozen=True, slots=True)
class ScopeSummary:
    """What a scan found in one scope (a run)."""

    session: Hashable
    run_id: str | None
    calls: int
    first_warning: int | None  # trace index of the first warning, if any
    first_block: int | None  # trace index of the first critical verdict, if any
    aborted_at: int | None  # trace index of the call after which the guard aborts the run
    detectors: tuple[str, ...]  # detectors that fired, in order of first firing
    #: calls the run would not have made: from its first blocked call, or from the
    #: call after a post-compaction abort, whichever comes first, to its end
    saved: int
    #: trace index of each detector's first firing (warning or block), as ``detectors``
    first_fired: tuple[int, ...] = ()


class ScanTotals(NamedTuple):
    """Over every scope with calls: how many runs a scan warns, blocks and aborts."""

    runs: int
    runs_warned: int
    runs_blocked: int
    runs_aborted: int
    #: the sum of ``ScopeSummary.saved``
    calls_saved: int


class _Marks(NamedTuple):
    """Per scope with calls (in scope-id order): where its first warning, block and abort
    are in ``order`` (-1 for none), its first place there, its size, and where it stops."""

    starts: Ints
    sizes: Ints
    warned: Ints
    blocked: Ints
    aborted: Ints
    stop: Ints


class ScanResult:
    """Per call of a trace: the verdict ``ToolLoopGuard.before_call`` gives just before it.

    The gateway it answers for records every call it lets run, with its
    outcome, and every call it blocks as a loop veto instead (SPEC §8.1), so a
    block feeds into the verdicts after it; the trace itself goes on as
    recorded. ``level`` (0 none, 1 warning, 2 critical), ``detector`` (an index
    into ``DETECTORS``) and ``count`` are numpy arrays in trace order.
    ``terminal`` marks the criticals after a scope's first one (recover-once,
    §8.2: the first is recoverable, a later one ends the run). ``aborted``
    marks the calls after which the post-compaction guard would abort the run.
    """

    __slots__ = (
        "_index",
        "aborted",
        "config",
        "count",
        "detector",
        "level",
        "table",
        "terminal",
    )

    def __init__(
        self,
        table: CallTable,
        config: LoopDetectionConfig,
        stats: Stats,
        index: ScopeIndex | None = None,
        codes: Codes | None = None,
    ) -> None:
        self.table = table
        self.config = config
        self._index = index
        if codes is None:
            from ._scan import settle  # the scan's own module, loaded by now

            codes = settle(table, config, stats, index)
        self.level, self.detector, self.count, self.terminal = codes
        guard_on = config.enabled is not False
        # A copy: the counts behind it are shared by every result of a sweep.
        aborted = stats.aborted.copy() if guard_on else np.zeros(len(table), np.bool_)
        self.aborted: Bools = aborted
        for array in (self.level, self.detector, self.count, self.terminal, self.aborted):
            array.flags.writeable = False

    def __len__(self) -> int:
        return len(self.table)

    def __repr__(self) -> str:
        warned = int(np.count_nonzero(self.level == 1))
        blocked = int(np.count_nonzero(self.level == 2))
        return f"ScanResult({len(self)} calls, {warned} warnings, {blocked} blocks)"

    def _by_scope(self) -> ScopeIndex:
        """``scope_index`` of the table, built on first use: ``verdict`` then reads only
        the call's own window."""
        if self._index is None:
            self._index = scope_index(self.table)
        return self._index

    def verdict(self, index: int) -> Verdict:
        """The full ``Verdict`` (message, warning key) for one call, recomputed from its window."""
        n = len(self)
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"index: expected an int, got {type(index).__name__}")
        if not -n <= index < n:
            raise IndexError(f"index: {index} is out of range for {n} calls")
        index = int(index) % n
        if self.config.enabled is not True:
            return NOT_STUCK
        table = self.table
        history = self.config.history_size
        order, first, _ = self._by_scope()
        scope = int(table.scope[index])
        start = int(first[scope])
        end = int(first[scope + 1]) if scope + 1 < len(first) else len(order)
        # Within its scope the trace indices rise, so a binary search finds the call.
        position = int(np.searchsorted(order[start:end], index))
        earlier = order[start + max(0, position - history) : start + position]
        # The reference scan over the window as the gateway holds it (a blocked call as
        # its veto), with hashes standing in for names.
        ring: deque[list[Any]] = deque(self._records(earlier))
        tool = int(table.tool_hash[index])
        args_hash = int(table.args_hash[index])
        stats = scan_window(ring, tool, args_hash) if ring else ScanStats()  # type: ignore[arg-type]
        stats = stats._replace(
            unknown_name=None
            if stats.unknown_name is None
            else table.name(int(stats.unknown_name)),
            paired_tool=None if stats.paired_tool is None else table.name(int(stats.paired_tool)),
        )
        known_poll = bool(table.known_poll[index])
        return _rules.verdict(stats, self.config, table.name(tool), args_hash, known_poll)

    def _records(self, indices: Ints) -> list[list[Any]]:
        """The calls of ``indices`` in the reference ring layout (``_ring_py``): tool, args,
        call id, time, result, unknown, kind, identity, stale; a blocked call as its veto.
        Their columns are read at once, not value by value."""
        table = self.table
        flags = table.flags[indices].tolist()
        blocked = (self.level[indices] == 2).tolist()
        out: list[list[Any]] = []
        for (tool, args, result, unknown, identity), flag, block in zip(
            table.hashes[indices].tolist(), flags, blocked, strict=True
        ):
            if block or flag[VETO]:
                out.append([tool, args, None, 0.0, None, None, KIND_VETO, None, False])
                continue
            terminal = flag[TERMINAL]
            out.append(
                [
                    tool,
                    args,
                    None,
                    0.0,
                    result if flag[HAS_RESULT] else None,
                    unknown if flag[HAS_UNKNOWN] else None,
                    KIND_TERMINAL_EXEC if terminal else 0,
                    identity if terminal else None,
                    flag[NO_PROGRESS],
                ]
            )
        return out

    def to_records(self) -> list[dict[str, Any]]:
        """One plain dict per call: index, scope, tool, level, detector, count, terminal
        (a critical that ends the run), aborted."""
        table = self.table
        scopes = table.scopes
        names = [table.name(h) for h in table.tool_hash.tolist()]
        return [
            {
                "index": i,
                "session": scopes[s][0],
                "run_id": scopes[s][1],
                "tool": names[i],
                "level": LEVELS[level],
                "detector": DETECTORS[detector],
                "count": count,
                "terminal": terminal,
                "aborted": aborted,
            }
            for i, (s, level, detector, count, terminal, aborted) in enumerate(
                zip(
                    table.scope.tolist(),
                    self.level.tolist(),
                    self.detector.tolist(),
                    self.count.tolist(),
                    self.terminal.tolist(),
                    self.aborted.tolist(),
                    strict=True,
                )
            )
        ]

    def positions(self) -> Ints:
        """Each call's position within its scope (0 for a scope's first call), in trace order."""
        order, _, pos = self._by_scope()
        out = np.empty(len(order), np.int64)
        out[order] = pos
        return out

    def _first_of(self, mask: Bools, starts: Ints) -> Ints:
        """Per scope with calls (``starts``: its first place in scope order), the place of
        its first call in ``mask``, or -1."""
        order, _, _ = self._by_scope()
        places = np.flatnonzero(mask[order])
        owner = np.searchsorted(starts, places, side="right") - 1
        scopes, at = np.unique(owner, return_index=True)
        out = np.full(len(starts), -1, np.int64)
        out[scopes] = places[at]
        return out

    def _marks(self) -> _Marks:
        order, _, pos = self._by_scope()
        starts = np.flatnonzero(pos == 0)  # each scope's first place in ``order``
        sizes = np.diff(starts, append=len(order))
        warned = self._first_of(self.level == 1, starts)
        blocked = self._first_of(self.level == 2, starts)
        aborted = self._first_of(self.aborted, starts)
        stop = np.minimum(
            np.where(blocked >= 0, blocked - starts, sizes),
            np.where(aborted >= 0, aborted - starts + 1, sizes),
        )
        return _Marks(starts, sizes, warned, blocked, aborted, stop)

    def totals(self) -> ScanTotals:
        """Runs warned, blocked and aborted, and calls saved, over every scope: no per-scope
        objects, so that a sweep can total many values cheaply."""
        marks = self._marks()
        return ScanTotals(
            runs=len(marks.starts),
            runs_warned=int(np.count_nonzero(marks.warned >= 0)),
            runs_blocked=int(np.count_nonzero(marks.blocked >= 0)),
            runs_aborted=int(np.count_nonzero(marks.aborted >= 0)),
            calls_saved=int((marks.sizes - marks.stop).sum()),
        )

    def scopes(self) -> list[ScopeSummary]:
        """One summary per scope that has calls, in order of their first call."""
        table = self.table
        order, _, _ = self._by_scope()
        marks = self._marks()
        starts = marks.starts
        # Detectors in order of first firing: each one's first place, sorted per scope.
        firing = np.stack(
            [self._first_of(self.detector == code, starts) for code in range(1, len(DETECTORS))], 1
        )
        ranked = np.argsort(np.where(firing >= 0, firing, len(order)), axis=1, kind="stable") + 1
        fired = np.count_nonzero(firing >= 0, axis=1)
        names: dict[tuple[int, ...], tuple[str, ...]] = {}
        firsts = firing.tolist()
        # A few places per scope are looked up: read from ``order`` one by one (a list of
        # the whole of it would cost more than every look-up).
        traced = order

        def trace_index(place: int) -> int | None:
            return int(traced[place]) if place >= 0 else None

        summaries = []
        for i in np.argsort(order[starts], kind="stable").tolist():
            codes = tuple(ranked[i, : fired[i]].tolist())
            if codes not in names:
                names[codes] = tuple(str(DETECTORS[code]) for code in codes)
            session, run_id = table.scopes[int(table.scope[traced[starts[i]]])]
            summaries.append(
                ScopeSummary(
                    session=session,
                    run_id=run_id,
                    calls=int(marks.sizes[i]),
                    first_warning=trace_index(int(marks.warned[i])),
                    first_block=trace_index(int(marks.blocked[i])),
                    aborted_at=trace_index(int(marks.aborted[i])),
                    detectors=names[codes],
                    saved=int(marks.sizes[i] - marks.stop[i]),
                    first_fired=tuple(int(traced[firsts[i][code - 1]]) for code in codes),
                )
            )
        return summaries

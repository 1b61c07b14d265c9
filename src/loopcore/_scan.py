"""What would the detector have said about every call of a recorded trace? (SPEC §7)

``scan`` answers, for each call of a trace, the verdict ``LoopDetector.check``
would have returned just before it, with every earlier call of its scope
recorded (``record_call`` then ``record_outcome``). It does so with whole-array
numpy operations, never a Python loop over calls:

- one stable sort puts each scope's calls together, in order;
- a second sort, by args hash and keeping time order, groups each scope's
  repeats of one call;
  within such a group a binary search finds the calls still inside the
  ``historySize`` window (the recent count), and run lengths over the calls
  with a result give the no-progress streak;
- the ping-pong tail, the unknown-tool streak and the post-compaction guard
  are run lengths of neighbour comparisons along each scope.

The counts (``_Stats``) do not depend on the thresholds, so a sweep over a
threshold computes them once and applies the verdict table per value.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ._calltable import (
    ARGS,
    COMPACTION,
    HAS_RESULT,
    HAS_UNKNOWN,
    RESULT,
    TOOL,
    UNKNOWN,
    CallTable,
    CallTableBuilder,
)
from ._config import LoopDetectionConfig, with_setting
from ._config import coerce_config
from ._detector import verdict_from
from ._history_py import _scan as _scan_ring
from ._outcome import Normalizer
from ._records import NOT_STUCK, ScanStats, Verdict

__all__ = ["DETECTORS", "LEVELS", "ScanResult", "ScanTotals", "ScopeSummary", "scan", "sweep"]

#: ``ScanResult.detector`` codes: the index into this tuple.
DETECTORS: tuple[str | None, ...] = (
    None,
    "unknown_tool_repeat",
    "global_circuit_breaker",
    "known_poll_no_progress",
    "ping_pong",
    "generic_repeat",
)
#: ``ScanResult.level`` codes.
LEVELS: tuple[str | None, ...] = (None, "warning", "critical")

_UNKNOWN, _GLOBAL, _POLL, _PINGPONG, _GENERIC = range(1, 6)

#: Calls handled per block of whole scopes. A block's temporaries (a few hundred bytes a
#: call) then stay in the CPU caches: 2**15 ran 1.3x faster than 2**17 and 2x than 2**20.
_BLOCK = 1 << 15

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


class _Stats(NamedTuple):
    """Per call, in trace order: every SPEC §4 count the verdict table reads."""

    recent: npt.NDArray[np.int32]
    streak: npt.NDArray[np.int32]
    unknown: npt.NDArray[np.int32]
    pingpong: npt.NDArray[np.int32]
    pingpong_no_progress: Bools
    #: the post-compaction guard, with this window size, aborts the run after this call
    aborted: Bools


# -- kernels (every array is one block of whole scopes, in scope order) -------------------------


def _runs(flags: Bools) -> Ints:
    """For each index, how many consecutive True values end there (0 where False)."""
    index = np.arange(len(flags), dtype=np.int64)
    last_false = np.maximum.accumulate(np.where(flags, -1, index))
    return index - last_false


def _previous(values: npt.NDArray[Any], fill: Any) -> npt.NDArray[Any]:
    """``values`` shifted one place later: element i is ``values[i - 1]``."""
    out = np.empty_like(values)
    if len(values):
        out[0] = fill
        out[1:] = values[:-1]
    return out


def _equal_to(values: npt.NDArray[Any], lag: int) -> Bools:
    """``values[i] == values[i - lag]`` (False where ``i < lag``)."""
    out = np.zeros(len(values), np.bool_)
    if len(values) > lag:
        np.equal(values[lag:], values[:-lag], out=out[lag:])
    return out


def _by_hash(args: npt.NDArray[np.uint64]) -> Ints:
    """A stable sort of ``args``: indices grouped by hash, ascending within each group.

    Sorting plain 64-bit keys took two thirds of the time of a stable argsort
    here, so the index replaces the low bits of each hash and the keys are sorted. Two different
    hashes that agree above those bits would then interleave; that is checked,
    and such a block takes the stable argsort instead.
    """
    n = len(args)
    low = max(1, (n - 1).bit_length())
    mask = np.uint64((1 << low) - 1)
    keys = (args & ~mask) | np.arange(n, dtype=np.uint64)
    keys.sort()
    order: Ints = (keys & mask).astype(np.int64)
    grouped = args[order]
    shift = np.uint64(low)
    if np.any((keys[1:] >> shift == keys[:-1] >> shift) & (grouped[1:] != grouped[:-1])):
        order = np.argsort(args, kind="stable").astype(np.int64)
    return order


def _repeats(
    pos: Ints,
    args: npt.NDArray[np.uint64],
    result: npt.NDArray[np.uint64],
    has_result: Bools,
    history: int,
) -> tuple[Ints, Ints]:
    """Recent count and no-progress streak of each call (scope order)."""
    n = len(args)
    order = _by_hash(args)  # scope order, and so time, kept within each hash
    g_args = args[order]
    # Scopes are contiguous here, so a call's index minus its position is where its
    # scope starts: an earlier call of the same hash lies before that in another scope.
    starts = np.ones(n, np.bool_)
    starts[1:] = (g_args[1:] != g_args[:-1]) | (order[:-1] < order[1:] - pos[order[1:]])
    group = np.cumsum(starts) - 1
    # Keys rise through each group and jump between groups by more than any window,
    # so one binary search finds the oldest repeat still in the window. Most calls
    # have no repeat in it at all (the one before them in the group is too old or
    # in another group): only the others are searched.
    key = group * (n + history + 1) + order
    here = np.arange(n, dtype=np.int64)
    lowest = here.copy()
    repeated = np.flatnonzero(_previous(key, -n - history - 1) >= key - history)
    lowest[repeated] = np.searchsorted(key, key[repeated] - history)
    recent = here - lowest

    g_has = has_result[order]
    last = _previous(np.maximum.accumulate(np.where(g_has, here, -1)), -1)
    counted = last >= lowest  # the newest earlier repeat with a result is in the window
    before = np.zeros(n + 1, np.int64)  # repeats with a result before each index
    np.cumsum(g_has, out=before[1:])
    members = np.flatnonzero(g_has)
    values = result[order[members]]
    same = np.zeros(len(members), np.bool_)
    same[1:] = (values[1:] == values[:-1]) & (group[members[1:]] == group[members[:-1]])
    run = _runs(same) + 1  # equal results ending at each result-carrying repeat
    newest = np.where(counted, last, 0)
    in_window = before[newest + 1] - before[lowest]
    streak = np.where(counted, np.minimum(run[before[newest]] if len(run) else 0, in_window), 0)

    out_recent = np.empty(n, np.int64)
    out_streak = np.empty(n, np.int64)
    out_recent[order] = recent
    out_streak[order] = streak
    return out_recent, out_streak


def _block_stats(
    table: CallTable, rows: Ints, pos: Ints, history: int, window: int
) -> tuple[npt.NDArray[np.int32], Bools]:
    """Counts (recent, streak, unknown, ping-pong) and marks (no progress, aborted) per call."""
    # A window longer than the block's longest scope holds that whole scope, and a guard
    # window longer than it can never fill: clamping changes no answer, and keeps the
    # int64 keys below from overflowing on absurd settings.
    history = min(history, len(rows))
    window = min(window, len(rows) + 2)
    # One gather of whole rows each: the calls of a block lie scattered over the table.
    hashes = np.take(table.hashes, rows, axis=0)
    flags = np.take(table.flags.view(np.uint32).reshape(-1), rows).view(np.bool_).reshape(-1, 4)
    args = np.ascontiguousarray(hashes[:, ARGS])
    result = hashes[:, RESULT]
    has_result = flags[:, HAS_RESULT]
    tool = hashes[:, TOOL]
    counts = np.zeros((len(rows), 4), np.int32)
    marks = np.zeros((len(rows), 2), np.bool_)
    counts[:, 0], counts[:, 1] = _repeats(pos, args, result, has_result, history)
    records = np.minimum(pos, history)  # records in the window before each call

    # Ping-pong: the newest record is index i-1. Its alternating tail is 2 plus the
    # run of "equal to the record two back" ending there, when it differs from the
    # one before it; each side's results are all equal when the same run holds
    # for "has a result equal to the one two back".
    differs = ~_equal_to(args, 1) & (pos >= 1)
    alternates = _equal_to(args, 2) & (pos >= 2)
    has_two = has_result & _previous(_previous(has_result, False), False)
    steady = alternates & has_two & _equal_to(result, 2)
    tail_at = np.where(differs, 2 + _runs(alternates), 1)
    tail = np.minimum(_previous(tail_at, 1), records)
    continues = (records >= 2) & (tail >= 2) & _equal_to(args, 2)
    counts[:, 3] = np.where(continues, tail + 1, 0)
    both_sides = _previous(has_result & _previous(has_result, False), False)
    marks[:, 0] = continues & both_sides & (_previous(_runs(steady), 0) >= tail - 2)

    # Unknown-tool streak: the run, ending at the newest record, of records of the
    # same tool failing with the same unknown name, if that tool is this one.
    has_unknown = flags[:, HAS_UNKNOWN]
    if has_unknown.any():
        same_failure = (
            has_unknown
            & _previous(has_unknown, False)
            & _equal_to(tool, 1)
            & _equal_to(hashes[:, UNKNOWN], 1)
            & (pos >= 1)
        )
        failing = np.where(has_unknown, _runs(same_failure) + 1, 0)
        counts[:, 2] = np.where(
            (records >= 1) & _equal_to(tool, 1), np.minimum(_previous(failing, 0), records), 0
        )

    # Post-compaction guard: armed at a call flagged ``compaction``, it aborts after
    # the window-th call if no compaction re-armed it and all of them are one triple.
    compaction = flags[:, COMPACTION]
    if compaction.any():
        here = np.arange(len(rows), dtype=np.int64)
        armed_at = np.maximum.accumulate(np.where(compaction, here, -1))
        same_triple = (
            _equal_to(tool, 1)
            & _equal_to(args, 1)
            & _equal_to(has_result, 1)
            & (_equal_to(result, 1) | ~has_result)
            & (pos >= 1)
        )
        marks[:, 1] = (armed_at == here - (window - 1)) & (_runs(same_triple) >= window - 1)
    return counts, marks


def _scope_index(table: CallTable) -> tuple[Ints, Ints, Ints]:
    """Trace indices scope by scope in time order, each scope's first place in that order,
    and each place's position within its scope."""
    n = len(table)
    count = max(len(table.scopes), int(table.scope.max()) + 1 if n else 0)
    narrow = np.uint16 if count <= 1 << 16 else np.int64
    order = np.argsort(table.scope.astype(narrow), kind="stable")  # radix sort when narrow
    sizes = np.bincount(table.scope, minlength=count)
    first = np.cumsum(sizes) - sizes
    return order, first, np.arange(n, dtype=np.int64) - first[table.scope[order]]


def _stats(
    table: CallTable, history: int, window: int, index: tuple[Ints, Ints, Ints] | None = None
) -> _Stats:
    n = len(table)
    order, _, pos = index or _scope_index(table)

    counts = np.zeros((n, 4), np.int32)
    marks = np.zeros((n, 2), np.bool_)
    # Whole rows move as one item each (a 2-D fancy assignment goes value by value).
    count_rows = counts.view(np.dtype((np.void, 16))).reshape(-1)
    mark_rows = marks.view(np.uint16).reshape(-1)
    # Blocks of whole scopes: cut at the first scope start at or after each multiple of _BLOCK.
    scope_starts = np.flatnonzero(pos == 0)
    at = np.searchsorted(scope_starts, np.arange(0, n, _BLOCK))
    cuts = np.unique(scope_starts[at[at < len(scope_starts)]])
    for lo, hi in pairwise([*cuts.tolist(), n]):
        rows = order[lo:hi]
        block_counts, block_marks = _block_stats(table, rows, pos[lo:hi], history, window)
        count_rows[rows] = block_counts.view(np.dtype((np.void, 16))).reshape(-1)
        mark_rows[rows] = block_marks.view(np.uint16).reshape(-1)
    return _Stats(counts[:, 0], counts[:, 1], counts[:, 2], counts[:, 3], marks[:, 0], marks[:, 1])


def _verdicts(
    stats: _Stats, known_poll: Bools, config: LoopDetectionConfig
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int8], npt.NDArray[np.int32]]:
    """The SPEC §4 table, first match wins, applied to every call at once."""
    n = len(known_poll)
    if config.enabled is not True:
        return np.zeros(n, np.int8), np.zeros(n, np.int8), np.zeros(n, np.int32)
    warn, critical = config.warning_threshold, config.critical_threshold
    switches = config.detectors
    streak, pingpong = stats.streak, stats.pingpong
    poll = known_poll & switches.known_poll_no_progress
    generic = ~known_poll & switches.generic_repeat
    ping = switches.ping_pong & (pingpong > 0)
    rows = [
        (stats.unknown >= config.unknown_tool_threshold, 2, _UNKNOWN, stats.unknown),
        (streak >= config.global_circuit_breaker_threshold, 2, _GLOBAL, streak),
        (poll & (streak >= critical), 2, _POLL, streak),
        (poll & (streak >= warn), 1, _POLL, streak),
        (ping & (pingpong >= critical) & stats.pingpong_no_progress, 2, _PINGPONG, pingpong),
        (ping & (pingpong >= warn), 1, _PINGPONG, pingpong),
        (generic & (streak >= critical), 2, _GENERIC, streak),
        (generic & (stats.recent >= warn), 1, _GENERIC, stats.recent),
    ]
    conditions = [row[0] for row in rows]
    level = np.select(conditions, [row[1] for row in rows], 0).astype(np.int8)
    detector = np.select(conditions, [row[2] for row in rows], 0).astype(np.int8)
    count = np.select(conditions, [row[3] for row in rows], 0).astype(np.int32)
    return level, detector, count


# -- results ----------------------------------------------------------------------------------


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
    """Per call of a trace: the verdict ``check`` would have returned just before it.

    ``level`` (0 none, 1 warning, 2 critical), ``detector`` (an index into
    ``DETECTORS``) and ``count`` are numpy arrays in trace order. ``aborted``
    marks the calls after which the post-compaction guard would abort the run.
    """

    __slots__ = ("_index", "aborted", "config", "count", "detector", "level", "table")

    def __init__(
        self,
        table: CallTable,
        config: LoopDetectionConfig,
        stats: _Stats,
        index: tuple[Ints, Ints, Ints] | None = None,
    ) -> None:
        self.table = table
        self.config = config
        self._index = index
        self.level, self.detector, self.count = _verdicts(stats, table.known_poll, config)
        guard_on = config.enabled is not False
        # A copy: the counts behind it are shared by every result of a sweep.
        aborted = stats.aborted.copy() if guard_on else np.zeros(len(table), np.bool_)
        self.aborted: Bools = aborted
        for array in (self.level, self.detector, self.count, self.aborted):
            array.flags.writeable = False

    def __len__(self) -> int:
        return len(self.table)

    def __repr__(self) -> str:
        warned = int(np.count_nonzero(self.level == 1))
        blocked = int(np.count_nonzero(self.level == 2))
        return f"ScanResult({len(self)} calls, {warned} warnings, {blocked} blocks)"

    def _by_scope(self) -> tuple[Ints, Ints, Ints]:
        """``_scope_index`` of the table, built on first use: ``verdict`` then reads only
        the call's own window."""
        if self._index is None:
            self._index = _scope_index(self.table)
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
        # The reference scan over the window, with hashes standing in for names.
        ring: deque[list[Any]] = deque(
            [
                int(table.tool_hash[i]),
                int(table.args_hash[i]),
                None,
                0.0,
                int(table.result_hash[i]) if table.has_result[i] else None,
                int(table.unknown_hash[i]) if table.has_unknown[i] else None,
            ]
            for i in earlier.tolist()
        )
        tool = int(table.tool_hash[index])
        args_hash = int(table.args_hash[index])
        stats = _scan_ring(ring, tool, args_hash) if ring else ScanStats()  # type: ignore[arg-type]
        stats = stats._replace(
            unknown_name=None
            if stats.unknown_name is None
            else table.name(int(stats.unknown_name)),
            paired_tool=None if stats.paired_tool is None else table.name(int(stats.paired_tool)),
        )
        known_poll = bool(table.known_poll[index])
        return verdict_from(stats, self.config, table.name(tool), args_hash, known_poll)

    def to_records(self) -> list[dict[str, Any]]:
        """One plain dict per call: index, scope, tool, level, detector, count, aborted."""
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
                "aborted": aborted,
            }
            for i, (s, level, detector, count, aborted) in enumerate(
                zip(
                    table.scope.tolist(),
                    self.level.tolist(),
                    self.detector.tolist(),
                    self.count.tolist(),
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
        traced = order.tolist()

        def trace_index(place: int) -> int | None:
            return traced[place] if place >= 0 else None

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
                )
            )
        return summaries


# -- entry points -----------------------------------------------------------------------------


def _table(
    events: Iterable[Mapping[str, Any]] | CallTable,
    normalizers: Mapping[str, Normalizer] | None,
    send_tools: Iterable[str],
) -> CallTable:
    if isinstance(events, CallTable):
        return events
    if isinstance(events, (str, bytes)) or not isinstance(events, Iterable):
        raise TypeError(
            f"events: expected an iterable of event mappings or a CallTable, "
            f"got {type(events).__name__}"
        )
    builder = CallTableBuilder(normalizers=normalizers, send_tools=send_tools)
    for number, event in enumerate(events):
        try:
            builder.add_event(event)
        except ValueError as exc:
            raise type(exc)(f"events[{number}].{exc}") from None
    return builder.build()


def scan(
    events: Iterable[Mapping[str, Any]] | CallTable,
    config: LoopDetectionConfig | Mapping[str, Any] | None = None,
    *,
    normalizers: Mapping[str, Normalizer] | None = None,
    send_tools: Iterable[str] = (),
) -> ScanResult:
    """The verdict ``LoopDetector.check`` would have returned before every call of a trace.

    ``events`` is a ``CallTable`` or an iterable of mappings with ``tool``,
    ``args``, ``result`` or ``error``, and optionally ``tool_call_id``,
    ``session``, ``run_id`` and ``ts``; a mapping with ``"type": "compaction"``
    (and the scope fields) marks a context compaction in that scope. A
    malformed event raises ``EventError`` naming its index and field.
    """
    config = coerce_config(config)
    table = _table(events, normalizers, send_tools)
    window = config.post_compaction_guard.window_size
    index = _scope_index(table)
    return ScanResult(table, config, _stats(table, config.history_size, window, index), index)


def sweep(
    events: Iterable[Mapping[str, Any]] | CallTable,
    config: LoopDetectionConfig | Mapping[str, Any] | None,
    setting: str,
    values: Sequence[object],
    *,
    normalizers: Mapping[str, Normalizer] | None = None,
    send_tools: Iterable[str] = (),
) -> list[tuple[object, ScanResult]]:
    """``scan`` once per value of one setting (dotted camelCase, e.g. ``warningThreshold``).

    With ``config`` a mapping, each value is laid over it as written, so the
    result for a value is ``scan(events, {**config, setting: value})``.

    The trace is fingerprinted once, and the counts are computed once per
    distinct ``historySize`` and guard window; only the verdict table runs per value.
    """
    coerce_config(config)  # a bad base fails here, before any fingerprinting
    # A mapping is laid under each value as written, before ordering repairs; a
    # LoopDetectionConfig has been repaired already (see ``with_settings``).
    base = config if isinstance(config, LoopDetectionConfig) else dict(config or {})
    table = _table(events, normalizers, send_tools)
    cache: dict[tuple[int, int], _Stats] = {}
    index = _scope_index(table)  # one scope index for every result's summaries
    out = []
    for value in values:
        swept = with_setting(base, setting, value)
        shape = (swept.history_size, swept.post_compaction_guard.window_size)
        if shape not in cache:
            cache[shape] = _stats(table, *shape, index)
        out.append((value, ScanResult(table, swept, cache[shape], index)))
    return out

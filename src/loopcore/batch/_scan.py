"""What would a gateway have said about every call of a recorded trace? (SPEC §7, §12.18)

``scan`` answers, for each call of a trace, the verdict ``ToolLoopGuard.before_call``
would have returned just before it, in a gateway that records every call it
lets run with its outcome and every call it blocks as a loop veto instead
(SPEC §8.1); ``sweep`` answers it once per value of one setting. The trace is
fingerprinted into a ``CallTable`` (``_table``), counted with whole-array numpy
operations (``_kernels``) and judged by the verdict table (``loopcore._rules``)
in a ``ScanResult`` (``_result``).

Which path answers what (``settle``):

- every call is first counted over the records as the trace has them, in one
  whole-array pass. That answer is exact up to and including each scope's
  first critical: nothing before it was blocked.
- a blocked call's record differs (a veto, its outcome dropped), and only the
  calls whose window holds it can see that. Those calls are counted again, with
  the same kernels, on gathered rows where every call judged critical so far is
  a veto; a call whose answer flips from or to critical changes its own record
  and sends the calls in its window round again. The first call that changes
  in each scope is final when it changes (everything before it already agreed),
  so this ends; each round takes at most a few windows of each stretch of
  changed calls, so a run blocked over and over again (a periodic loop) costs
  rounds in proportion to its length, not its square.
- the argument-churn count: the counts carry an upper bound of it (its tail),
  and only the verdict table's row 8 reads it, so the calls judged a churn on
  the bound are counted exactly in the first round (``_churn.churn_counts``).

The verdict table is applied only to calls some count of which reaches an
alarm threshold (``_rules.alarm_thresholds``); ``ScanResult.verdict`` rebuilds
one call's window (blocked calls as vetoes) for the reference scan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from .._config import LoopDetectionConfig, coerce_config, with_setting
from .._outcome import Normalizer
from .._rules import ARGUMENT_CHURN, DETECTORS, alarm_thresholds
from ._churn import churn_counts
from ._kernels import (
    CHURN,
    COUNTS,
    PINGPONG,
    RECENT,
    STREAK,
    UNKNOWN_STREAK,
    Block,
    Bools,
    Ints,
    ScopeIndex,
    Stats,
    aborted_marks,
    block_cuts,
    counts,
    scope_index,
)
from ._result import Codes, ScanResult, _Scans, _verdicts
from ._table import WAIT_HASH, CallTable, CallTableBuilder

__all__ = ["scan", "settle", "stats", "sweep"]

_CHURN = DETECTORS.index(ARGUMENT_CHURN)
_T = TypeVar("_T")
_R = TypeVar("_R")
#: Places a round counts again per stretch of changed calls, in windows: one change
#: reaches one window, and the next changes lie beyond the first's window anyway.
_ROUND_WINDOWS = 4
#: Rows counted together per kernel call in a round (as ``_kernels._BLOCK``).
_ROUND_ROWS = 1 << 15
#: A scan of fewer calls counts in one thread whatever ``jobs`` says: at 100,000 calls
#: (four blocks) two threads saved a tenth of the counts at best, less than the noise.
PARALLEL_SCAN_ROWS = 1 << 18


def stats(
    table: CallTable,
    history: int,
    window: int,
    index: ScopeIndex | None = None,
    jobs: int = 1,
) -> Stats:
    """The whole-array pass: the counts of every call of ``table`` over the records as the
    trace has them, with these ``historySize`` and guard window, block by block.

    Blocks hold whole scopes, so each is counted alone: with ``jobs`` above 1 and at
    least ``PARALLEL_SCAN_ROWS`` calls, by that many threads (``_in_threads``).
    """
    n = len(table)
    order, _, pos = index or scope_index(table)

    def count(cut: tuple[int, int]) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_]]:
        lo, hi = cut
        block = Block.gather(table, order[lo:hi], pos[lo:hi])
        block_counts, no_progress = counts(block, history)
        return block_counts, np.stack([no_progress, aborted_marks(block, window)], 1)

    cuts = block_cuts(pos)
    blocks: Iterable[tuple[npt.NDArray[np.int32], npt.NDArray[np.bool_]]]
    if jobs > 1 and len(cuts) > 1 and n >= PARALLEL_SCAN_ROWS:
        blocks = _in_threads(count, cuts, jobs)
    else:
        blocks = map(count, cuts)
    matrix = np.zeros((n, COUNTS), np.int32)
    marks = np.zeros((n, 2), np.bool_)
    # Whole rows move as one item each (a 2-D fancy assignment goes value by value).
    row = np.dtype((np.void, 4 * COUNTS))
    count_rows = matrix.view(row).reshape(-1)
    mark_rows = marks.view(np.uint16).reshape(-1)
    for (lo, hi), (block_counts, block_marks) in zip(cuts, blocks, strict=True):
        rows = order[lo:hi]
        count_rows[rows] = block_counts.view(row).reshape(-1)
        mark_rows[rows] = block_marks.view(np.uint16).reshape(-1)
    return Stats(
        matrix[:, RECENT],
        matrix[:, STREAK],
        matrix[:, UNKNOWN_STREAK],
        matrix[:, PINGPONG],
        marks[:, 0],
        matrix[:, CHURN],
        marks[:, 1],
    )


def _in_threads(count: Callable[[_T], _R], cuts: Sequence[_T], jobs: int) -> list[_R]:
    """``[count(cut) for cut in cuts]``, by ``jobs`` threads.

    A block's time is mostly numpy's whole-array operations, which let go of
    the GIL, so threads count blocks side by side: as fast as forked workers
    were at 1,000,000 calls, with no copy of the process, nothing pickled, and
    safe in a process with other threads at work, on every platform.
    """
    from concurrent.futures import ThreadPoolExecutor

    workers = min(jobs, len(cuts))
    with ThreadPoolExecutor(workers, thread_name_prefix="loopcore-scan") as pool:
        return list(pool.map(count, cuts))


def _reach(places: Ints, history: int, ends: Ints) -> tuple[Ints, Ints]:
    """Spans ``[lo, hi)`` of the places whose window holds one of ``places`` (sorted): the
    next ``history`` of each one's scope; sorted and disjoint."""
    if not len(places):
        return places, places
    last = np.minimum(places + history, ends[places] - 1)
    # Sorted places make overlapping spans neighbours: merge them, no sort needed.
    covered = np.maximum.accumulate(last)
    opens = np.ones(len(places), np.bool_)
    opens[1:] = places[1:] >= covered[:-1]
    closes = np.append(np.flatnonzero(opens)[1:] - 1, len(places) - 1)
    lo, hi = places[opens] + 1, covered[closes] + 1
    keep = hi > lo
    return lo[keep], hi[keep]


def _ranges(lo: Ints, hi: Ints) -> Ints:
    """``lo[i] .. hi[i] - 1`` for every i, concatenated."""
    sizes = hi - lo
    return np.repeat(lo - (np.cumsum(sizes) - sizes), sizes) + np.arange(int(sizes.sum()))


class _Spans(NamedTuple):
    """Places still to count again, as sorted disjoint spans ``[lo, hi)`` within scopes;
    ``hot``: the span holds places the last round's changes reached."""

    lo: Ints
    hi: Ints
    hot: Bools


def _union(old: _Spans, lo: Ints, hi: Ints) -> _Spans:
    """``old`` and the newly reached (hot) spans ``[lo, hi)``, merged where they overlap."""
    all_lo = np.concatenate([old.lo, lo])
    order = np.argsort(all_lo, kind="stable")
    all_lo, all_hi = all_lo[order], np.concatenate([old.hi, hi])[order]
    hot = np.concatenate([old.hot, np.ones(len(lo), np.bool_)])[order]
    if not len(all_lo):
        return _Spans(all_lo, all_hi, hot)
    covered = np.maximum.accumulate(all_hi)
    # Overlapping only (never merely adjacent): a span never crosses into another scope.
    opens = np.ones(len(all_lo), np.bool_)
    opens[1:] = all_lo[1:] >= covered[:-1]
    group = np.cumsum(opens) - 1
    closes = np.append(np.flatnonzero(opens)[1:] - 1, len(all_lo) - 1)
    heat = np.bincount(group, weights=hot, minlength=len(closes)) > 0
    return _Spans(all_lo[opens], covered[closes], heat)


def _round(spans: _Spans, pos: Ints, history: int) -> tuple[Ints, _Spans]:
    """The places to count in this round, and the spans left for later.

    A stretch of spans (it ends where a window's worth of places needs nothing,
    or a scope ends) that the last round's changes reached goes only its first
    few windows: past its first change its answers are only guesses. Any other
    stretch goes whole.
    """
    lo, hi = spans.lo, spans.hi
    starts = np.ones(len(lo), np.bool_)
    starts[1:] = (lo[1:] - hi[:-1] >= history) | (lo[1:] - pos[lo[1:]] >= hi[:-1])
    stretch = np.cumsum(starts) - 1
    hot = np.bincount(stretch, weights=spans.hot, minlength=int(stretch[-1]) + 1) > 0
    first = lo[starts][stretch]
    limit = np.where(hot[stretch], first + _ROUND_WINDOWS * history + 64, hi)
    cut = np.clip(limit, lo, hi)
    left = cut < hi
    todo = _ranges(lo, cut)
    return todo, _Spans(cut[left], hi[left], np.zeros(int(left.sum()), np.bool_))


def _recount(
    table: CallTable,
    config: LoopDetectionConfig,
    order: Ints,
    pos: Ints,
    places: Ints,
    vetoed: Bools,
    known_poll: Bools,
    wait: Bools,
) -> tuple[Any, Any, Any]:
    """The verdict codes of ``places`` (sorted), with the ``vetoed`` places as vetoes."""
    history = config.history_size
    # Segments: runs of consecutive places of one scope, each with its window before it.
    starts = np.ones(len(places), np.bool_)
    starts[1:] = (places[1:] != places[:-1] + 1) | (pos[places[1:]] == 0)
    first = places[starts]
    last = np.append(places[np.flatnonzero(starts)[1:] - 1], places[-1])
    low = first - np.minimum(pos[first], history)
    sizes = last + 1 - low
    level = np.empty(len(places), np.int8)
    detector = np.empty(len(places), np.int8)
    count = np.empty(len(places), np.int32)
    done = 0
    bounds = np.searchsorted(
        np.cumsum(sizes), np.arange(_ROUND_ROWS, int(sizes.sum()), _ROUND_ROWS)
    )
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(first)], strict=True):
        if lo >= hi:
            continue
        rows = _ranges(low[lo:hi], last[lo:hi] + 1)
        local = np.arange(len(rows)) - np.repeat(
            np.cumsum(sizes[lo:hi]) - sizes[lo:hi], sizes[lo:hi]
        )
        block = Block.gather(table, order[rows], local, vetoed[rows])
        matrix, no_progress = counts(block, history)
        wanted = np.flatnonzero(local >= np.repeat(first[lo:hi] - low[lo:hi], sizes[lo:hi]))
        at = rows[wanted]
        scans = _Scans(
            matrix[wanted, RECENT],
            matrix[wanted, STREAK],
            matrix[wanted, UNKNOWN_STREAK],
            matrix[wanted, PINGPONG],
            no_progress[wanted],
            matrix[wanted, CHURN],
            known_poll[order[at]],
            wait[order[at]],
        )
        got_level, got_detector, got_count = _verdicts(scans, config)
        churning = np.flatnonzero(got_detector == _CHURN)
        if len(churning):
            # The bound said churn: the exact count decides (it is the bound or 0).
            scans.churn[churning] = churn_counts(block, history, wanted[churning])
            again = _Scans._make(np.asarray(column)[churning] for column in scans)
            redone = _verdicts(again, config)
            got_level[churning], got_detector[churning], got_count[churning] = redone
        stop = done + len(at)
        level[done:stop], detector[done:stop], count[done:stop] = (
            got_level,
            got_detector,
            got_count,
        )
        done = stop
    return level, detector, count


def _table_codes(stats: Stats, known_poll: Bools, wait: Bools, config: LoopDetectionConfig) -> Any:
    """The verdict table over the whole-array counts, applied to the calls some count of
    which reaches an alarm threshold (below them no row holds: most calls skip it)."""
    alarm, unknown_alarm = alarm_thresholds(config)
    loud = np.flatnonzero(
        (stats.recent >= alarm)
        | (stats.streak >= alarm)
        | (stats.pingpong >= alarm)
        | (stats.churn >= alarm)
        | (stats.unknown_streak >= unknown_alarm)
    )
    n = len(known_poll)
    level, detector, count = np.zeros(n, np.int8), np.zeros(n, np.int8), np.zeros(n, np.int32)
    scans = _Scans(
        stats.recent[loud],
        stats.streak[loud],
        stats.unknown_streak[loud],
        stats.pingpong[loud],
        stats.pingpong_no_progress[loud],
        stats.churn[loud],
        known_poll[loud],
        wait[loud],
    )
    level[loud], detector[loud], count[loud] = _verdicts(scans, config)
    return level, detector, count


def settle(
    table: CallTable,
    config: LoopDetectionConfig,
    stats: Stats,
    index: ScopeIndex | None = None,
) -> Codes:
    """Every call's verdict codes in a gateway that records blocked calls as vetoes."""
    n = len(table)
    if config.enabled is not True:
        nothing = np.zeros(n, np.bool_)
        return Codes(np.zeros(n, np.int8), np.zeros(n, np.int8), np.zeros(n, np.int32), nothing)
    known_poll = table.known_poll
    wait = table.tool_hash == np.uint64(WAIT_HASH)
    level, detector, count = _table_codes(stats, known_poll, wait, config)
    terminal = np.zeros(n, np.bool_)
    if not (level == 2).any() and not (detector == _CHURN).any():
        return Codes(level, detector, count, terminal)
    # Places (scope order) from here on: the gateway's records differ from the trace's at
    # the blocked calls; count again what can see them. Codes stay in trace order.
    order, _, pos = index or scope_index(table)
    history = config.history_size
    scope_starts = np.flatnonzero(pos == 0)
    sizes = np.diff(scope_starts, append=n)
    ends = np.repeat(scope_starts + sizes, sizes)
    vetoed = level[order] == 2
    first_lo, first_hi = _reach(np.flatnonzero(vetoed), history, ends)
    # A churn verdict from the counts' upper bound is counted exactly in the first round.
    churning = np.flatnonzero(detector == _CHURN)
    if len(churning):
        places = np.empty(n, np.int64)
        places[order] = np.arange(n)
        churning = np.sort(places[churning])
    none = np.zeros(0, np.int64)
    spans = _union(_Spans(churning, churning + 1, np.zeros(len(churning), np.bool_)), none, none)
    spans = _union(spans, first_lo, first_hi)
    spans = spans._replace(hot=np.zeros(len(spans.lo), np.bool_))  # round one: all whole
    while len(spans.lo):
        todo, spans = _round(spans, pos, history)
        got = _recount(table, config, order, pos, todo, vetoed, known_poll, wait)
        calls = order[todo]
        level[calls], detector[calls], count[calls] = got
        blocked = got[0] == 2
        changed = todo[blocked != vetoed[todo]]
        vetoed[todo] = blocked
        spans = _union(spans, *_reach(changed, history, ends))
    # Recover-once: a scope's first critical is recoverable, every later one terminal.
    seen = np.cumsum(vetoed)
    before = seen - vetoed - np.repeat(seen[scope_starts] - vetoed[scope_starts], sizes)
    terminal[order] = vetoed & (before > 0)
    return Codes(level, detector, count, terminal)


def _as_table(
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
    jobs: int = 1,
) -> ScanResult:
    """The verdict ``ToolLoopGuard.before_call`` would have returned before every call.

    ``events`` is a ``CallTable`` or an iterable of mappings with ``tool``,
    ``args``, ``result`` or ``error``, and optionally ``tool_call_id``,
    ``session``, ``run_id`` and ``ts``; a mapping with ``"type": "compaction"``
    (and the scope fields) marks a context compaction in that scope. A
    malformed event raises ``EventError`` naming its index and field. ``jobs``
    above 1 counts a large trace in that many threads: the result is the same.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs: expected a positive integer, got {jobs!r}")
    config = coerce_config(config)
    table = _as_table(events, normalizers, send_tools)
    window = config.post_compaction_guard.window_size
    index = scope_index(table)
    counted = stats(table, config.history_size, window, index, jobs)
    return ScanResult(table, config, counted, index)


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
    table = _as_table(events, normalizers, send_tools)
    cache: dict[tuple[int, int], Stats] = {}
    index = scope_index(table)  # one scope index for every result's summaries
    out = []
    for value in values:
        swept = with_setting(base, setting, value)
        shape = (swept.history_size, swept.post_compaction_guard.window_size)
        if shape not in cache:
            cache[shape] = stats(table, *shape, index)
        out.append((value, ScanResult(table, swept, cache[shape], index)))
    return out

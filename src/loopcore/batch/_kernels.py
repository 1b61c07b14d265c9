"""How often has each call of a trace been repeated, for every call at once? (SPEC §4, §8 counts)

The counting half of the batch scans: for each call, the numbers the verdict
table reads (``Stats``), over the records a gateway would hold before it,
computed with whole-array numpy operations:

- one stable sort puts each scope's calls together, in order;
- a second sort, by args hash and keeping time order, groups each scope's
  repeats of one call; within such a group a binary search finds the calls
  still inside the ``historySize`` window (the recent count), and run lengths
  over the repeats with a result, with the vetoes between them, give the
  no-progress streak (SPEC §8.1);
- the ping-pong tail (vetoes neutral, §12.4), the unknown-tool streak (vetoes
  skipped), the terminal exec streak (§8.4) and the post-compaction guard are
  run lengths of neighbour comparisons along each scope or along its
  non-veto, same-side or terminal records.

The argument-churn count (§8.3) needs the variants of a sliding tail: the
whole-array pass gives an upper bound (the tail), and the calls the verdict
table then judges a churn walk their tails back, a slab of offsets at a time,
all at once (``_churn.churn_counts``).

The counts do not depend on the thresholds, so a sweep over a threshold
computes them once; the records a scan turns into vetoes do, and are counted
again around them (``_scan``) with the same kernels on gathered rows.
"""

from __future__ import annotations

from itertools import pairwise
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from ._arrays import by_hash, equal_to, linked, prefix, previous, runs
from ._churn import churn_tails
from ._table import Block, Bools, CallTable, Ints

__all__ = [
    "COUNTS",
    "Block",
    "Bools",
    "Ints",
    "ScopeIndex",
    "Stats",
    "aborted_marks",
    "block_cuts",
    "counts",
    "scope_index",
]

#: Calls handled per block of whole scopes. A block's temporaries (a few hundred bytes a
#: call) then stay in the CPU caches: 2**15 ran 1.3x faster than 2**17 and 2x than 2**20.
_BLOCK = 1 << 15

I32 = npt.NDArray[np.int32]
#: ``scope_index``: trace indices in scope order, each scope's first place, each place's position
ScopeIndex = tuple[Ints, Ints, Ints]

#: Columns of the count matrix ``counts`` returns.
RECENT, STREAK, UNKNOWN_STREAK, PINGPONG, CHURN = range(5)
COUNTS = 5


class Stats(NamedTuple):
    """Per call, in trace order: every SPEC §4/§8 count the verdict table reads.

    Counted over the records as the trace has them (each call with its own
    outcome); ``_scan`` corrects the calls near the ones a scan blocks.
    """

    recent: I32
    streak: I32
    unknown_streak: I32
    pingpong: I32
    pingpong_no_progress: Bools
    #: an upper bound of the argument-churn count (``counts``)
    churn: I32
    #: the post-compaction guard, with this window size, aborts the run after this call
    aborted: Bools


def _window(order: Ints, starts: Bools, pos: Ints, history: int) -> tuple[Ints, Ints]:
    """Group numbers in sorted order, and each member's oldest group member in its window."""
    n = len(order)
    group = np.cumsum(starts) - 1
    # Keys rise through each group and jump between groups by more than any window,
    # so one binary search finds the oldest repeat still in the window. Most calls
    # have no repeat in it at all (the one before them in the group is too old or
    # in another group): only the others are searched.
    key = group * (n + history + 1) + order
    lowest = np.arange(n, dtype=np.int64)
    repeated = np.flatnonzero(previous(key, -n - history - 1) >= key - history)
    lowest[repeated] = np.searchsorted(key, key[repeated] - history)
    return group, lowest


# -- the counts ---------------------------------------------------------------------------------


def _repeats(b: Block, history: int) -> tuple[Ints, Ints]:
    """Recent count (same args hash) and no-progress streak (same tool too) of each call."""
    n = len(b.args)
    here = np.arange(n, dtype=np.int64)
    order = by_hash(b.args)  # scope order, and so time, kept within each hash
    grouped = b.args[order]
    # Scopes are contiguous here, so a call's index minus its position is where its
    # scope starts: an earlier call of the same hash lies before that in another scope.
    starts = np.ones(n, np.bool_)
    starts[1:] = (grouped[1:] != grouped[:-1]) | (order[:-1] < order[1:] - b.pos[order[1:]])
    group, lowest = _window(order, starts, b.pos, history)
    recent = np.empty(n, np.int64)
    recent[order] = here - lowest

    tools = b.tool[order]
    if np.any(~starts[1:] & (tools[1:] != tools[:-1])):
        # One args hash under several tool names (a table built from foreign columns):
        # the streak counts per tool and hash, so it takes a grouping of its own.
        order = np.lexsort((here, b.tool, b.args)).astype(np.int64)
        grouped, tools = b.args[order], b.tool[order]
        starts[1:] = (
            (grouped[1:] != grouped[:-1])
            | (tools[1:] != tools[:-1])
            | (order[:-1] < order[1:] - b.pos[order[1:]])
        )
        group, lowest = _window(order, starts, b.pos, history)
    streak = np.empty(n, np.int64)
    streak[order] = _streak(order, group, lowest, b)
    return recent, streak


def _streak(order: Ints, group: Ints, lowest: Ints, b: Block) -> Ints:
    """SPEC §8.1 over each call's group (sorted order): equal results, and the vetoes
    newer than the oldest of them; with no result in the window, the vetoes alone."""
    n = len(order)
    here = np.arange(n, dtype=np.int64)
    has = b.has_result[order]
    vetoes = b.veto.any()
    if vetoes:
        veto = b.veto[order]
        pending = prefix(veto)
        counted = prefix(veto | has)  # vetoes and results: what a streak adds up
        streak = pending[here] - pending[lowest]
    else:
        streak = np.zeros(n, np.int64)
    last = previous(np.maximum.accumulate(np.where(has, here, -1)), -1)
    live = np.flatnonzero(last >= lowest)  # the newest earlier result is in the window
    if not len(live):
        return streak
    before = prefix(has)  # results before each index
    members = np.flatnonzero(has)
    values = b.result[order[members]]
    same = np.zeros(len(members), np.bool_)
    same[1:] = (values[1:] == values[:-1]) & (group[members[1:]] == group[members[:-1]])
    run = runs(same)  # the run of equal results ending at a member starts run[k] back
    newest = before[last[live]]  # member index of the newest result
    if not vetoes:  # results only: the run, as far as the window reaches
        streak[live] = np.minimum(run[newest] + 1, newest + 1 - before[lowest[live]])
        return streak
    first = np.maximum(members[newest - run[newest]], lowest[live])
    oldest = members[before[first]]  # the oldest result of the run inside the window
    streak[live] = counted[live] - counted[oldest]
    return streak


def _terminal(b: Block, records: Ints, history: int) -> Ints:
    """SPEC §8.4: terminal exec failures of the newest records' tool, across changing args.

    Newest first, a record of another tool or a result that is not a terminal
    failure stops the walk; vetoes wait to be counted with the next failure.
    The newest failure is the anchor; an older one continues the chain if it
    has the anchor's result, or its args and failure identity.
    """
    n = len(b.args)
    out = np.zeros(n, np.int64)
    if not b.terminal.any():
        return out
    here = np.arange(n, dtype=np.int64)
    stops = b.has_result & ~b.terminal
    # Stretches a walk can cover: a scope's same-tool run, cut after each stopping result.
    cut = (b.pos == 0) | ~equal_to(b.tool, 1) | previous(stops, False)
    stretch = np.maximum.accumulate(np.where(cut, here, 0))
    fails = np.flatnonzero(b.terminal)
    chained = np.zeros(len(fails), np.bool_)
    chained[1:] = fails[:-1] >= stretch[fails[1:]]
    result, args, identity = b.result[fails], b.args[fails], b.identity[fails]
    same_result = chained & equal_to(result, 1)
    same_call = chained & equal_to(args, 1) & equal_to(identity, 1)
    by_result = np.arange(len(fails)) - runs(same_result)  # where each equal run starts
    by_call = np.arange(len(fails)) - runs(same_call)
    # Each failure as an anchor: walk its chain back a run at a time (an equal
    # result or the same call and identity), so a long loop takes few steps. No
    # call counts failures more than a window older than its anchor.
    chain = np.arange(len(fails))
    active = np.arange(len(fails))
    while len(active):
        at, anchor = chain[active], active
        back = at.copy()
        match_result = result[at] == result[anchor]
        match_call = (args[at] == args[anchor]) & (identity[at] == identity[anchor])
        back = np.where(match_result, np.minimum(back, by_result[at]), back)
        back = np.where(match_call, np.minimum(back, by_call[at]), back)
        jumped = back < at
        step = np.maximum(at - 1, 0)
        stepped = (
            ~jumped
            & chained[at]
            & (
                (result[step] == result[anchor])
                | ((args[step] == args[anchor]) & (identity[step] == identity[anchor]))
            )
        )
        moved = np.where(jumped, back, np.where(stepped, step, at))
        chain[active] = moved
        active = active[(jumped | stepped) & (fails[moved] > fails[anchor] + 1 - history)]
    start = fails[chain]  # each anchor's oldest chained failure

    # A call continues the chain of the newest failure before it, if nothing stops
    # the walk between them and that failure is in the window.
    newest_fail = previous(np.maximum.accumulate(np.where(b.terminal, here, -1)), -1)
    prior = np.maximum(here - 1, 0)
    floor = here - records
    calls = np.flatnonzero(
        (b.pos >= 1)
        & equal_to(b.tool, 1)
        & ~stops[prior]
        & (newest_fail >= stretch[prior])
        & (newest_fail >= floor)
    )
    if not len(calls):
        return out
    failures_before = prefix(b.terminal)
    anchor = failures_before[newest_fail[calls]]  # index into ``fails``
    first = np.maximum(start[anchor], floor[calls])
    oldest = fails[failures_before[first]]  # the oldest chained failure in the window
    counted = prefix(b.terminal | b.veto)
    out[calls] = counted[calls] - counted[oldest]
    return out


def _unknown(b: Block, records: Ints) -> Ints:
    """Newest-first failures of this tool naming one unknown tool; vetoes skipped (§8.1)."""
    n = len(b.args)
    if not b.has_unknown.any() or b.veto.all():
        return np.zeros(n, np.int64)
    here = np.arange(n, dtype=np.int64)
    if b.veto.any():
        kept = np.flatnonzero(~b.veto)  # the records the walk reads, in order
        tool, name, failed = b.tool[kept], b.unknown[kept], b.has_unknown[kept]
        joined = linked(kept, b.pos)
        before = prefix(~b.veto)
    else:  # no veto to skip: the records are the rows themselves
        tool, name, failed = b.tool, b.unknown, b.has_unknown
        joined = b.pos >= 1
        before = np.arange(n + 1, dtype=np.int64)
    same = joined & failed & previous(failed, False) & equal_to(tool, 1) & equal_to(name, 1)
    failing = np.where(failed, runs(same) + 1, 0)
    in_window = before[here] - before[here - records]
    newest = np.maximum(before[here] - 1, 0)  # the newest kept record before each call
    hit = (in_window > 0) & (tool[newest] == b.tool)
    return np.where(hit, np.minimum(failing[newest], in_window), 0)


def _pingpong(b: Block, records: Ints) -> tuple[Ints, Bools]:
    """SPEC §4 with §12.4: the alternation each call continues, and whether it shows no
    progress; veto records take part by their hash and are neutral for progress."""
    n = len(b.args)
    args, pos = b.args, b.pos
    # The newest record is index i-1. Its alternating tail is 2 plus the run of "equal
    # to the record two back" ending there, when it differs from the one before it.
    differs = ~equal_to(args, 1) & (pos >= 1)
    alternates = equal_to(args, 2) & (pos >= 2)
    tail_at = np.where(differs, 2 + runs(alternates), 1)
    tail = np.minimum(previous(tail_at, 1), records)
    continues = (records >= 2) & (tail >= 2) & equal_to(args, 2)
    count = np.where(continues, tail + 1, 0)
    no_progress = np.zeros(n, np.bool_)
    calls = np.flatnonzero(continues)
    if not len(calls):
        return count, no_progress
    if not b.veto.any():
        # No veto: every tail record needs a result equal to the one two back (its side's
        # previous), which is one run of neighbour comparisons.
        has = b.has_result
        steady_at = alternates & has & previous(previous(has, False), False)
        steady_at &= equal_to(b.result, 2)
        both = previous(has & previous(has, False), False)
        ok = both & (previous(runs(steady_at), 0) >= tail - 2)
        no_progress[calls] = ok[calls]
        return count, no_progress
    low = calls - tail[calls]
    kept = ~b.veto
    missing = prefix(kept & ~b.has_result)
    steady = missing[calls] == missing[low]
    # Each side (every other record) has a result, all equal, on its records that are
    # not vetoes: the run of equal results along that side covers all of them.
    parity = (np.arange(n) & 1).astype(np.bool_)
    for side_parity in (False, True):
        side = kept & (parity == side_parity)
        rows = np.flatnonzero(side)
        if not len(rows):
            steady[:] = False
            break
        has = b.has_result[rows]
        same = linked(rows, pos) & has & previous(has, False) & equal_to(b.result[rows], 1)
        run = runs(same) + 1
        before = prefix(side)
        on_side = before[calls] - before[low]
        newest = np.maximum(before[calls] - 1, 0)
        steady &= (on_side >= 1) & has[newest] & (run[newest] >= on_side)
    no_progress[calls] = steady
    return count, no_progress


def counts(b: Block, history: int) -> tuple[I32, Bools]:
    """Every call's counts (columns ``RECENT`` … ``CHURN``) and its ping-pong progress mark.

    ``CHURN`` is an upper bound of the argument-churn count: only the verdict
    table's row 8 reads it, so ``churn_counts`` takes the exact one for the calls
    that row then judges (with the bound below ``warningThreshold``, so is the count).
    """
    # A window longer than the block's longest scope holds that whole scope: clamping
    # changes no answer, and keeps the int64 keys below from overflowing on absurd settings.
    history = min(history, len(b.args))
    records = np.minimum(b.pos, history)  # records in the window before each call
    out = np.zeros((len(b.args), COUNTS), np.int32)
    recent, streak = _repeats(b, history)
    out[:, RECENT] = recent
    out[:, STREAK] = np.maximum(streak, _terminal(b, records, history))
    out[:, UNKNOWN_STREAK] = _unknown(b, records)
    pingpong, no_progress = _pingpong(b, records)
    out[:, PINGPONG] = pingpong
    if (b.stale & b.has_result).any():
        out[:, CHURN] = churn_tails(b, records)[0]
    return out, no_progress


def aborted_marks(b: Block, window: int) -> Bools:
    """Post-compaction guard: armed at a call flagged ``compaction``, it aborts after the
    window-th call if no compaction re-armed it and all of them are one triple."""
    n = len(b.args)
    if not b.compaction.any():
        return np.zeros(n, np.bool_)
    # A guard window longer than the block can never fill: clamping changes no answer.
    window = min(window, n + 2)
    here = np.arange(n, dtype=np.int64)
    armed_at = np.maximum.accumulate(np.where(b.compaction, here, -1))
    same_triple = (
        equal_to(b.tool, 1)
        & equal_to(b.args, 1)
        & equal_to(b.has_result, 1)
        & (equal_to(b.result, 1) | ~b.has_result)
        & (b.pos >= 1)
    )
    out: Bools = (armed_at == here - (window - 1)) & (runs(same_triple) >= window - 1)
    return out


def scope_index(table: CallTable) -> ScopeIndex:
    """Trace indices scope by scope in time order, each scope's first place in that order,
    and each place's position within its scope."""
    n = len(table)
    count = max(len(table.scopes), int(table.scope.max()) + 1 if n else 0)
    narrow = np.uint16 if count <= 1 << 16 else np.int64
    order = np.argsort(table.scope.astype(narrow), kind="stable")  # radix sort when narrow
    sizes = np.bincount(table.scope, minlength=count)
    first = np.cumsum(sizes) - sizes
    return order, first, np.arange(n, dtype=np.int64) - first[table.scope[order]]


def block_cuts(pos: Ints, size: int = 0) -> list[tuple[int, int]]:
    """``(lo, hi)`` places of blocks of whole scopes, about ``_BLOCK`` calls each."""
    n = len(pos)
    scope_starts = np.flatnonzero(pos == 0)
    at = np.searchsorted(scope_starts, np.arange(0, n, size or _BLOCK))
    # Picked in order (``at`` never falls), so the repeats are neighbours: dropped here, as
    # ``np.unique`` would, without its sort and its import of ``numpy.ma`` (10 ms a process).
    picked = scope_starts[at[at < len(scope_starts)]]
    cuts = picked[np.concatenate(([True], picked[1:] != picked[:-1]))] if len(picked) else picked
    return list(pairwise([*cuts.tolist(), n]))

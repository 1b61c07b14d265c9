"""How long is each call's argument churn, for the calls of a trace at once? (SPEC §8.3)

The churn half of the batch kernels: ``churn_tails`` gives every call an
upper bound (the run of equal stale results its walk reads), and
``churn_counts`` the exact count for the calls the verdict table would judge a
churn on that bound, their tails walked back a slab of offsets at a time.
"""

from __future__ import annotations

import numpy as np

from .._counts import STABLE_VARIANT
from ._arrays import by_hash, equal_to, linked, prefix, runs
from ._table import Block, Ints

__all__ = ["churn_counts", "churn_tails"]

#: Tail records the churn count looks at per step (offsets times calls).
_SLAB = 1 << 16


def churn_tails(b: Block, records: Ints) -> tuple[Ints, Ints, Ints]:
    """SPEC §8.3: an upper bound of each call's argument-churn count (0: it has none).

    Newest first over the window, in the newest records' same-tool run, the
    walk reads results (pending calls and vetoes have none) up to the first one
    that is not stale. A churn's results are all equal, so its tail is the run of
    equal stale results ending at the newest one; it needs two stable variants
    (six records) and more than one args hash. Also returns, per call, the
    number of the newest result before it and the oldest row its walk may read.
    """
    n = len(b.args)
    here = np.arange(n, dtype=np.int64)
    region = np.maximum.accumulate(np.where((b.pos == 0) | ~equal_to(b.tool, 1), here, 0))
    done = np.flatnonzero(b.has_result)  # the records the walk reads
    stale, args = b.stale[done], b.args[done]
    same = np.zeros(len(done), np.bool_)
    same[1:] = (done[:-1] >= region[done[1:]]) & stale[1:] & stale[:-1]
    same &= equal_to(b.result[done], 1)
    run = runs(same)  # the equal stale run ending at k starts run[k] back
    one_variant = runs(same & equal_to(args, 1))
    before = prefix(b.has_result)
    floor = np.maximum(here - records, region[np.maximum(here - 1, 0)])
    in_window = before[here] - before[floor]
    newest = np.maximum(before[here] - 1, 0)
    tail = np.minimum(run[newest] + 1, in_window)
    possible = (
        (b.pos >= 1)
        & equal_to(b.tool, 1)
        & (in_window > 0)
        & stale[newest]
        & (tail >= 2 * STABLE_VARIANT)  # two stable variants at least
        & (np.minimum(one_variant[newest] + 1, in_window) < tail)  # more than one
    )
    return np.where(possible, tail, 0), newest, floor


def churn_counts(b: Block, history: int, wanted: Ints) -> Ints:
    """SPEC §8.3: the argument-churn count of the calls ``wanted`` (rows of ``b``).

    A tail (``churn_tails``) is a churn unless the result just past it is a
    stale one of a variant the tail lacks (a second result), and if it has two
    variants or more, each seen three times or more (``STABLE_VARIANT``), this
    call's among them.
    """
    history = min(history, len(b.args))
    bound, newest, floor = churn_tails(b, np.minimum(b.pos, history))
    out = np.zeros(len(wanted), np.int64)
    picked = np.flatnonzero(bound[wanted] > 0)
    if not len(picked):
        return out
    calls = wanted[picked]
    done = np.flatnonzero(b.has_result)
    before = prefix(b.has_result)
    stale, args = b.stale[done], b.args[done]
    # Each variant's previous and next record among the results of its scope.
    by_args = by_hash(b.args)
    rows = by_args[b.has_result[by_args]]  # grouped by args hash, in time order
    link = equal_to(b.args[rows], 1) & linked(rows, b.pos)
    ranks = before[rows]  # the results' own numbering
    later, earlier = ranks[1:][link[1:]], ranks[:-1][link[1:]]
    previous = np.full(len(done), -1, np.int64)
    following = np.full(len(done), len(done), np.int64)
    previous[later], following[earlier] = earlier, later
    second = np.where(previous >= 0, previous[np.maximum(previous, 0)], -1)

    top, size = newest[calls], bound[calls]
    low = top - size + 1
    past = np.maximum(low - 1, 0)  # the result just past the tail, in the window or not
    poison = (low >= 1) & (done[past] >= floor[calls]) & stale[past]
    own, other = b.args[calls], args[past]
    variants = np.zeros(len(calls), np.int64)
    stable = np.zeros(len(calls), np.int64)
    own_seen = np.zeros(len(calls), np.int64)
    other_seen = np.zeros(len(calls), np.int64)
    # Tails walked back a slab of offsets at a time, every tail at once: a record is its
    # variant's newest in the tail when its next is past the top, and that variant is
    # stable when its second previous record is still inside.
    depth = 0
    slab = max(1, _SLAB // len(calls))
    while depth < int(size.max()):
        offsets = np.arange(depth, depth + slab)
        inside = offsets < size[:, None]
        k = np.where(inside, top[:, None] - offsets, 0)
        newest_of_variant = inside & (following[k] > top[:, None])
        variants += newest_of_variant.sum(1)
        stable += (newest_of_variant & (second[k] >= low[:, None])).sum(1)
        own_seen += (inside & (args[k] == own[:, None])).sum(1)
        other_seen += (inside & (args[k] == other[:, None])).sum(1)
        depth += slab
    churn = (variants >= 2) & (stable == variants) & (own_seen >= STABLE_VARIANT)
    churn &= ~poison | (other_seen > 0)
    out[picked] = np.where(churn, size, 0)
    return out

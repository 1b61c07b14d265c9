"""Which whole-array steps do the batch kernels share? (runs, shifts, prefix counts, grouping)

Every array is one block of a trace's calls in scope order (``_table.Block``);
each helper is one numpy pass and no Python loop over calls.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ._table import Bools, Ints

__all__ = ["U64", "by_hash", "equal_to", "linked", "prefix", "previous", "runs"]

U64 = npt.NDArray[np.uint64]


def runs(flags: Bools) -> Ints:
    """For each index, how many consecutive True values end there (0 where False)."""
    index = np.arange(len(flags), dtype=np.int64)
    last_false = np.maximum.accumulate(np.where(flags, -1, index))
    return index - last_false


def previous(values: npt.NDArray[Any], fill: Any) -> npt.NDArray[Any]:
    """``values`` shifted one place later: element i is ``values[i - 1]``."""
    out = np.empty_like(values)
    if len(values):
        out[0] = fill
        out[1:] = values[:-1]
    return out


def equal_to(values: npt.NDArray[Any], lag: int) -> Bools:
    """``values[i] == values[i - lag]`` (False where ``i < lag``)."""
    out = np.zeros(len(values), np.bool_)
    if len(values) > lag:
        np.equal(values[lag:], values[:-lag], out=out[lag:])
    return out


def prefix(flags: Bools) -> Ints:
    """``out[i]``: how many of ``flags[:i]`` are True (length ``n + 1``)."""
    out = np.zeros(len(flags) + 1, np.int64)
    np.cumsum(flags, out=out[1:])
    return out


def linked(rows: Ints, pos: Ints) -> Bools:
    """Of rows picked in order, which follow the previous pick in the same scope."""
    out = np.zeros(len(rows), np.bool_)
    if len(rows) > 1:
        out[1:] = rows[:-1] >= rows[1:] - pos[rows[1:]]
    return out


def by_hash(args: U64) -> Ints:
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

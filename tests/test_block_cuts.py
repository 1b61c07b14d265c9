"""``batch._kernels.block_cuts``: blocks of whole scopes, each cut where a scope starts, once."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from loopcore.batch._kernels import block_cuts


@given(st.lists(st.integers(1, 40), max_size=30), st.integers(1, 60))
def test_cuts_are_the_scope_starts_nearest_each_block(runs: list[int], size: int) -> None:
    pos = np.concatenate([np.arange(k) for k in runs]) if runs else np.zeros(0, np.int64)
    starts = np.flatnonzero(pos == 0)
    at = np.searchsorted(starts, np.arange(0, len(pos), size))
    want = list(pairwise([*np.unique(starts[at[at < len(starts)]]).tolist(), len(pos)]))
    assert block_cuts(pos, size) == want
    assert all(lo < hi and pos[lo] == 0 for lo, hi in block_cuts(pos, size))

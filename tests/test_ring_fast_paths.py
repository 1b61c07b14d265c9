"""Do the compiled ring's per-call fast paths answer as the reference does?

The compiled ring counts a row's args hashes equal to the call's in one pass
that first compares only the hashes' low 32 bits, four at a time, and compares
whole hashes only when one of those matches (``_ring_count.h``). These tests
feed both ring stores hashes that share their low half but not their high one
(and the reverse), over histories of every length modulo four, and hold every
scan to the pure-Python store's and to a plain count. The per-call steps take
exact-str names as given and send a str subclass round once through ``exact``:
the names they store must be the exact str, as the reference keeps them. The
timestamps, read from the system clock directly on Linux, must be time.time()'s.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopcore import _ring_py

from .conftest import TWINS

pytestmark = pytest.mark.skipif(
    "cython" not in TWINS, reason="the compiled twin is not built in this install"
)

if "cython" in TWINS:
    from loopcore import _ring_c

LOW = [0, 1, 0xFFFFFFFF, 0x9E3779B9]
HIGH = [0, 1, 0xFFFFFFFF, 0x7F4A7C15]
#: Hashes pairwise equal in one half and not the other.
HASHES = sorted({high << 32 | low for low in LOW for high in HIGH})
KEY = ("s", "r")


def stores(history_size: int) -> tuple[Any, Any]:
    return _ring_py.RingStore(history_size, 4), _ring_c.RingStore(history_size, 4)


@settings(max_examples=300, deadline=None)
@given(
    history_size=st.integers(1, 40),
    calls=st.lists(st.sampled_from(HASHES), min_size=0, max_size=60),
    probe=st.sampled_from(HASHES),
)
def test_recent_counts_agree_with_the_reference(
    history_size: int, calls: list[int], probe: int
) -> None:
    python, compiled = stores(history_size)
    for args_hash in calls:
        for store in (python, compiled):
            store.append(KEY, "read", args_hash, None)
    window = calls[-history_size:]
    if not window:
        assert compiled.scan(KEY, "read", probe) == python.scan(KEY, "read", probe)
        return
    want = python.scan(KEY, "read", probe)
    got = compiled.scan(KEY, "read", probe)
    assert got == want
    # alarm 0: every scan of a non-empty row reports its counts.
    stats = compiled.scan(KEY, "read", probe, 0, 0)
    assert stats is not None
    assert stats.recent == window.count(probe)
    assert stats == python.scan(KEY, "read", probe, 0, 0)


@pytest.mark.parametrize("history_size", [1, 2, 3, 4, 5, 7, 8, 9, 30, 33])
def test_half_equal_hashes_are_not_counted(history_size: int) -> None:
    python, compiled = stores(history_size)
    probe = 0x12345678_9ABCDEF0
    # The same low half with another high half, and the reverse: never the call's.
    near = [0x00000001_9ABCDEF0, 0x12345678_00000001]
    for i in range(history_size):
        for store in (python, compiled):
            store.append(KEY, "read", near[i % 2], None)
    for store in (python, compiled):
        stats = store.scan(KEY, "read", probe, 0, 0)
        assert stats is not None
        assert stats.recent == 0
    # One real match among them, at every position of the row in turn.
    for position in range(history_size):
        python, compiled = stores(history_size)
        for i in range(history_size):
            args_hash = probe if i == position else near[i % 2]
            for store in (python, compiled):
                store.append(KEY, "read", args_hash, None)
        got = compiled.scan(KEY, "read", probe, 0, 0)
        assert got is not None
        assert got.recent == 1, position
        assert got == python.scan(KEY, "read", probe, 0, 0)


class Name(str):
    """A str subclass: the store keeps the exact str it equals."""


def test_str_subclass_names_are_kept_as_exact_str() -> None:
    python, compiled = stores(8)
    for store in (python, compiled):
        assert store.scan_append(KEY, Name("read"), 1, Name("c1"), 5, 5) is None
        store.append(KEY, Name("read"), 2, Name("c2"))
        store.attach(KEY, Name("read"), 2, Name("c2"), 7, Name("zap"))
        store.attach(KEY, Name("read"), 1, None, 8, None)
    got, want = compiled.history(KEY), python.history(KEY)
    assert [record.tool_name for record in got] == ["read", "read"]
    assert [(r.tool_call_id, r.unknown_tool_name, r.result_hash) for r in got] == [
        (r.tool_call_id, r.unknown_tool_name, r.result_hash) for r in want
    ]
    for record in got:
        assert type(record.tool_name) is str
        assert type(record.tool_call_id) is str
    assert type(got[1].unknown_tool_name) is str


def test_timestamps_read_the_clock_time_time_reads() -> None:
    # On Linux the compiled store reads CLOCK_REALTIME itself (_ring_clock.h).
    _, compiled = stores(4)
    for args_hash in range(2000):
        before = time.time()
        compiled.append(KEY, "read", args_hash, None)
        after = time.time()
        stamp = compiled.window(KEY)[-1][3]
        assert type(stamp) is float
        assert before <= stamp <= after
    before = time.time()
    record = compiled.attach(KEY, "exec", 1, None, 5, None)
    assert before <= record.timestamp <= time.time()

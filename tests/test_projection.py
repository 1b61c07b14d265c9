"""``Projection`` (before_batch's incremental counts) equals ``scan_window`` over the
projection built in full: the history followed by one veto placeholder per earlier
call of the batch (SPEC §8.2, §12.17)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from loopcore._counts import scan_window
from loopcore._projection import Projection
from loopcore._records import KIND_NONE, KIND_TERMINAL_EXEC, KIND_VETO, ScanStats

TOOLS = ["read", "exec", "write"]


@st.composite
def records(draw: st.DrawFn) -> list[Any]:
    tool = draw(st.sampled_from(TOOLS))
    h = TOOLS.index(tool) * 10 + draw(st.integers(0, 2))
    kind = draw(st.sampled_from([KIND_NONE, KIND_NONE, KIND_VETO, KIND_TERMINAL_EXEC]))
    if kind == KIND_VETO:
        return [tool, h, None, 0.0, None, None, kind, None, False]
    result = draw(st.sampled_from([None, 100, 100, 101]))
    if result is None:
        return [tool, h, None, 0.0, None, None, KIND_NONE, None, False]
    unknown = draw(st.sampled_from([None, None, "ghost", "phantom"]))
    identity = draw(st.sampled_from([7, 8])) if kind == KIND_TERMINAL_EXEC else None
    stale = draw(st.booleans())
    return [tool, h, None, 0.0, result, unknown, kind, identity, stale]


calls = st.tuples(st.sampled_from(TOOLS), st.integers(0, 2)).map(
    lambda c: (c[0], TOOLS.index(c[0]) * 10 + c[1])
)


@settings(max_examples=400, deadline=None)
@given(history=st.lists(records(), max_size=25), batch=st.lists(calls, min_size=1, max_size=12))
def test_incremental_counts_equal_a_full_rescan(
    history: list[list[Any]], batch: list[tuple[str, int]]
) -> None:
    projection = Projection(history)
    built = [list(r) for r in history]
    for tool, h in batch:
        expected = scan_window(built, tool, h) if built else ScanStats()
        assert projection.stats(tool, h) == expected
        projection.add(tool, h)
        built.append([tool, h, None, 0.0, None, None, KIND_VETO, None, False])


def test_a_long_batch_over_a_long_history_counts_every_placeholder() -> None:
    history = [
        ["read", i % 50, None, 0.0, i % 7, None, KIND_NONE, None, False] for i in range(5000)
    ]
    projection = Projection(history)
    for i in range(5000):
        assert projection.stats("read", i % 50).recent == 100 + i // 50
        projection.add("read", i % 50)

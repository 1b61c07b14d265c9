"""What calls do the benchmarks make? The shared workload data, leg factories and timed cycles.

Every timed function here is one *cycle* (one tool call's worth of work);
``benchmark.pedantic(cycle, iterations=N, rounds=R)`` times N cycles per round
and pytest-benchmark divides by N, so every reported time is per cycle.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Protocol

from baseline import BaselineDetector
from loopcore import LoopDetector, ToolLoopGuard

__all__ = [
    "ARGS",
    "CONFIG",
    "RESULT",
    "TEXT",
    "TOOL",
    "Detector",
    "Gateway",
    "gateway_cycle",
    "make_detector",
    "make_guard",
    "per_call_cycle",
    "read_args",
    "timed_round",
]

TOOL = "read"
#: 200 characters of a source file, the text a typical ``read`` returns.
TEXT = ("def main() -> None:\n    print('hello from the app')\n" * 5)[:200]
assert len(TEXT) == 200
RESULT: dict[str, Any] = {
    "content": [{"type": "text", "text": TEXT}],
    "details": {"lines": 200, "truncated": False},
}
CONFIG: dict[str, Any] = {"enabled": True}


def read_args(distinct: int) -> list[dict[str, Any]]:
    """``distinct`` prebuilt args dicts of the typical ``read`` call (offsets 0..distinct-1)."""
    return [{"path": "/src/app/main.py", "offset": i, "limit": 200} for i in range(distinct)]


#: The typical call's args: offset ``i % 50``, so no call repeats within a history of 30.
ARGS = read_args(50)


class Detector(Protocol):
    """What the per-call cycle calls: ``LoopDetector`` or the baseline."""

    def check(
        self, tool_name: str, args: Any, *, session: Hashable = ..., run_id: str | None = ...
    ) -> Any: ...

    def record_call(
        self,
        tool_name: str,
        args: Any,
        tool_call_id: str | None = ...,
        *,
        session: Hashable = ...,
        run_id: str | None = ...,
    ) -> None: ...

    def record_outcome(
        self,
        tool_name: str,
        args: Any,
        *,
        result: Any = ...,
        error: Any = ...,
        tool_call_id: str | None = ...,
        session: Hashable = ...,
        run_id: str | None = ...,
    ) -> Any: ...


class Gateway(Protocol):
    """What the gateway cycle calls: ``ToolLoopGuard`` or the baseline."""

    def before_call(
        self,
        tool_name: str,
        args: Any,
        *,
        tool_call_id: str | None = ...,
        session: Hashable = ...,
        run_id: str | None = ...,
    ) -> Any: ...

    def after_call(
        self,
        tool_name: str,
        args: Any,
        *,
        result: Any = ...,
        error: Any = ...,
        tool_call_id: str | None = ...,
        session: Hashable = ...,
        run_id: str | None = ...,
    ) -> Any: ...


def make_detector(
    leg: str, config: Mapping[str, Any] = CONFIG, *, max_scopes: int = 100_000
) -> LoopDetector | BaselineDetector:
    """The leg's detector; build it inside ``use_twin(leg)`` (the ``leg`` fixture does)."""
    if leg == "baseline":
        return BaselineDetector(config, max_scopes=max_scopes)
    return LoopDetector(config, max_scopes=max_scopes)


def make_guard(
    leg: str, config: Mapping[str, Any] = CONFIG, *, max_scopes: int = 100_000
) -> ToolLoopGuard | BaselineDetector:
    """The leg's gateway hook; build it inside ``use_twin(leg)``."""
    if leg == "baseline":
        return BaselineDetector(config, max_scopes=max_scopes)
    return ToolLoopGuard(config, max_scopes=max_scopes)


def per_call_cycle(
    detector: Detector,
    *,
    args: Sequence[Any] = ARGS,
    result: Any = RESULT,
    run_ids: Sequence[str] = ("r",),
    start: int = 0,
) -> Callable[[], None]:
    """``check`` + ``record_call`` + ``record_outcome`` of cycle i, i = start, start+1, ...

    Cycle i uses run id ``run_ids[i % len(run_ids)]`` and, within that scope,
    the next args dict in turn: ``args[(i // len(run_ids)) % len(args)]``.
    """
    check = detector.check
    record_call = detector.record_call
    record_outcome = detector.record_outcome
    counter = itertools.count(start)
    n_args = len(args)

    if len(run_ids) == 1:
        run_id = run_ids[0]

        def one_scope() -> None:
            call_args = args[next(counter) % n_args]
            check(TOOL, call_args, run_id=run_id)
            record_call(TOOL, call_args, run_id=run_id)
            record_outcome(TOOL, call_args, result=result, run_id=run_id)

        return one_scope

    n_scopes = len(run_ids)

    def round_robin() -> None:
        i = next(counter)
        run_id = run_ids[i % n_scopes]
        call_args = args[(i // n_scopes) % n_args]
        check(TOOL, call_args, run_id=run_id)
        record_call(TOOL, call_args, run_id=run_id)
        record_outcome(TOOL, call_args, result=result, run_id=run_id)

    return round_robin


def gateway_cycle(
    guard: Gateway, *, args: Sequence[Any] = ARGS, result: Any = RESULT, run_id: str = "r"
) -> Callable[[], None]:
    """``before_call`` + ``after_call`` of the typical call, args in turn."""
    before_call = guard.before_call
    after_call = guard.after_call
    counter = itertools.count()
    n_args = len(args)

    def cycle() -> None:
        call_args = args[next(counter) % n_args]
        before_call(TOOL, call_args, run_id=run_id)
        after_call(TOOL, call_args, result=result, run_id=run_id)

    return cycle


def timed_round(cycle: Callable[[], None], count: int, warm: int) -> float:
    """Seconds per cycle of ``count`` cycles, timed after ``warm`` untimed ones.

    For legs timed in turn: the leg timed before has evicted this one's lines
    (code and data) from the caches, which a gateway running only this leg
    would have kept.
    """
    for _ in range(warm):
        cycle()
    started = time.perf_counter()
    for _ in range(count):
        cycle()
    return (time.perf_counter() - started) / count

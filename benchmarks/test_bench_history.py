"""Does the per-call cost grow with the history size? The cycle at 30, 300, 3,000 (workload 5).

Same typical ``read`` call, but the offset cycles through ``history_size + 20``
prebuilt args dicts, so the ring is full (it is filled before timing) and no
call's args are still in it when it repeats: no verdict fires, every scan walks
the whole ring. At 30 this is exactly the per-call cycle. Times are per cycle.
"""

from __future__ import annotations

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from workloads import TOOL, make_detector, per_call_cycle, read_args

ROUNDS = 50
#: cycles per round, smaller for longer histories (a 3,000 scan in pure Python is slow)
CYCLES_PER_ROUND = {30: 100, 300: 50, 3_000: 10}


@pytest.mark.parametrize("history", list(CYCLES_PER_ROUND), ids=lambda n: f"history{n}")
def test_history_length(benchmark: BenchmarkFixture, leg: str, history: int) -> None:
    args = read_args(history + 20)
    detector = make_detector(leg, {"enabled": True, "historySize": history})
    cycle = per_call_cycle(detector, args=args)
    for _ in range(history):
        cycle()
    assert len(detector.history(run_id="r")) == history

    benchmark.group = f"history: {history:,}"
    benchmark.extra_info["per"] = "cycle"
    benchmark.pedantic(cycle, rounds=ROUNDS, iterations=CYCLES_PER_ROUND[history], warmup_rounds=1)

    assert len(detector.history(run_id="r")) == history
    assert not detector.check(TOOL, args[0], run_id="r")

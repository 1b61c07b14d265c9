"""What does the gateway hook cost per tool call? ``before_call`` + ``after_call`` (workload 2).

The same typical ``read`` call as the per-call cycle, through ``ToolLoopGuard``
(the baseline: its ``before_call`` / ``after_call``). Times are per cycle.
"""

from __future__ import annotations

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from workloads import TOOL, gateway_cycle, make_guard

ROUNDS = 100
CYCLES_PER_ROUND = 100


@pytest.mark.benchmark(group="gateway cycle")
def test_gateway_cycle(benchmark: BenchmarkFixture, leg: str) -> None:
    guard = make_guard(leg)
    cycle = gateway_cycle(guard)
    benchmark.extra_info["per"] = "cycle"
    benchmark.pedantic(cycle, rounds=ROUNDS, iterations=CYCLES_PER_ROUND, warmup_rounds=1)

    decision = guard.before_call(TOOL, {"path": "/elsewhere"}, run_id="r")
    assert not decision.blocked
    assert decision.warning is None

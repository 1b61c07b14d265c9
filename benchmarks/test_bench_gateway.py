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


@pytest.mark.benchmark(group="blocked retry")
def test_blocked_retry(benchmark: BenchmarkFixture, leg: str) -> None:
    """One ``before_call`` of a call the guard keeps blocking (a loop storm), per retry.

    Compare with the gateway cycle: a blocked retry should cost at most twice a
    normal ``before_call`` + ``after_call`` (storm control keeps the log quiet).
    """
    guard = make_guard(leg)
    args = {"path": "/stuck"}
    for _ in range(40):  # past the generic critical and the breaker
        if guard.before_call(TOOL, args, run_id="r").blocked:
            continue
        guard.after_call(TOOL, args, result="the same", run_id="r")
    before_call = guard.before_call

    def retry() -> None:
        before_call(TOOL, args, run_id="r")

    benchmark.extra_info["per"] = "blocked before_call"
    benchmark.pedantic(retry, rounds=ROUNDS, iterations=CYCLES_PER_ROUND, warmup_rounds=1)

    decision = guard.before_call(TOOL, args, run_id="r")
    assert decision.blocked
    # loopcore counts each blocked retry (a veto), so the breaker takes over; the
    # baseline (the seed's rules) keeps blocking on the generic critical.
    expected = "generic_repeat" if leg == "baseline" else "global_circuit_breaker"
    assert decision.verdict.detector == expected

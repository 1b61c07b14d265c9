"""What does a call cost when the agent is stuck and verdicts fire on every call? (workload 3)

The identical ``read`` call with the identical result, over and over, through
``check`` + ``record_call`` + ``record_outcome``: after 10 calls the generic
warning fires, after 20 the generic critical, after 30 (history 30, the
defaults) the global circuit breaker, on every call. The run is warmed up until
the verdict is critical, then timed; times are per cycle.

Also here, untimed: the baseline gives the same verdicts (level, detector,
count) as loopcore on the stuck run and a few other loops, on each twin.
"""

from __future__ import annotations

from typing import Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from baseline import BaselineDetector
from loopcore import LoopDetector
from twins import TWINS, use_twin
from workloads import ARGS, CONFIG, RESULT, TOOL, Detector, make_detector, per_call_cycle

ROUNDS = 100
CYCLES_PER_ROUND = 100
STUCK_ARGS = ARGS[0]


def _verdict(detector: Detector) -> Any:
    return detector.check(TOOL, STUCK_ARGS, run_id="r")


@pytest.mark.benchmark(group="stuck run")
def test_stuck_run(benchmark: BenchmarkFixture, leg: str) -> None:
    detector = make_detector(leg)
    cycle = per_call_cycle(detector, args=[STUCK_ARGS])
    for _ in range(100):  # warm up until the verdict is critical
        if _verdict(detector).level == "critical":
            break
        cycle()
    assert _verdict(detector).stuck
    assert _verdict(detector).level == "critical"

    benchmark.extra_info["per"] = "cycle"
    benchmark.pedantic(cycle, rounds=ROUNDS, iterations=CYCLES_PER_ROUND, warmup_rounds=1)

    verdict = _verdict(detector)
    assert verdict.stuck
    assert (verdict.level, verdict.detector) == ("critical", "global_circuit_breaker")


# -- the baseline is correct enough to compare against (untimed) ----------------------------

Step = tuple[str, Any, dict[str, Any]]


def _scenarios() -> dict[str, list[Step]]:
    text_a = {"content": [{"type": "text", "text": "a"}]}
    text_b = {"content": [{"type": "text", "text": "b"}]}
    poll = {"action": "poll", "sessionId": "build-1"}
    running = {"content": [{"type": "text", "text": "building"}], "details": {"status": "running"}}
    return {
        "stuck": [(TOOL, STUCK_ARGS, {"result": RESULT})] * 40,
        "ping-pong": [
            (TOOL, ARGS[i % 2], {"result": text_a if i % 2 else text_b}) for i in range(30)
        ],
        "unknown tool": [("browse", {"url": "x"}, {"error": "Unknown tool: browse"})] * 15,
        "known poll": [("process", poll, {"result": running})] * 25,
        "changing results": [
            (TOOL, STUCK_ARGS, {"result": {"content": [{"type": "text", "text": str(i)}]}})
            for i in range(25)
        ],
    }


def _verdicts(detector: Detector, steps: list[Step], run_id: str) -> list[tuple[Any, ...]]:
    seen = []
    for tool, args, outcome in steps:
        verdict = detector.check(tool, args, run_id=run_id)
        seen.append((verdict.level, verdict.detector, verdict.count))
        detector.record_call(tool, args, run_id=run_id)
        detector.record_outcome(tool, args, run_id=run_id, **outcome)
    return seen


@pytest.mark.parametrize("twin", TWINS)
def test_baseline_verdicts_match_loopcore(twin: str) -> None:
    baseline = BaselineDetector(CONFIG)
    with use_twin(twin):
        detector = LoopDetector(CONFIG)
        for name, steps in _scenarios().items():
            expected = _verdicts(detector, steps, name)
            assert _verdicts(baseline, steps, name) == expected, name

    # The stuck run: warning from the 11th call, critical from the 21st, on every call.
    levels = [
        level for level, _, _ in _verdicts(BaselineDetector(CONFIG), _scenarios()["stuck"], "r")
    ]
    assert levels == [None] * 10 + ["warning"] * 10 + ["critical"] * 20

"""What does one typical tool call cost? check + record_call + record_outcome (workload 1).

The call is ``read`` with ``{"path": "/src/app/main.py", "offset": i % 50,
"limit": 200}`` (the 50 args dicts are prebuilt), its result a 200-character
text, ``run_id="r"``, history 30: no verdict ever fires. Times are per cycle.
"""

from __future__ import annotations

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from workloads import ARGS, TOOL, make_detector, per_call_cycle

ROUNDS = 100
CYCLES_PER_ROUND = 100


@pytest.mark.benchmark(group="per-call cycle")
def test_per_call_cycle(benchmark: BenchmarkFixture, leg: str) -> None:
    detector = make_detector(leg)
    cycle = per_call_cycle(detector)
    benchmark.extra_info["per"] = "cycle"
    benchmark.pedantic(cycle, rounds=ROUNDS, iterations=CYCLES_PER_ROUND, warmup_rounds=1)

    assert len(detector.history(run_id="r")) == 30
    assert not any(detector.check(TOOL, args, run_id="r") for args in ARGS)

"""What are the cycle ratios when the compiled core and the baseline take turns? (workloads 1, 2)

``test_bench_per_call.py`` and ``test_bench_gateway.py`` time each leg in a
run of its own: the compiled leg's 10,000 cycles take about 10 ms, the
baseline's about 0.3 s, seconds apart. A shared machine's speed changes over
seconds (on the 2-core machines this project is measured on, a plain Python
loop has been seen to run 1.5x slower for a while, then fast again), so the
ratio of those two medians moves by as much as the change of speed between
them: one run said 40x, the next 21x, with no change of code.

Here the two legs of a cycle are built side by side and timed in alternate
rounds: a round of the compiled leg, then a round of the baseline, and so on
(each round about 0.2-0.6 ms, after a tenth of its cycles untimed, so that
neither side pays for the caches the other emptied), so both sides see the
same machine. The reported ratio is the baseline's median round over the
compiled leg's median round, the figure the targets summary reads for the
cycle targets; pytest-benchmark's own time here is that of one pair of
rounds. The workloads are exactly those of the two benchmarks above.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from conftest import EXTENSIONS_DISABLED
from twins import use_twin
from workloads import gateway_cycle, make_detector, make_guard, per_call_cycle, timed_round

ROUNDS = 200
#: Cycles per round: about the same wall time for each side of a pair.
CYCLES = {"compiled": 200, "baseline": 10}
WORKLOADS: dict[str, Callable[[str], Callable[[], None]]] = {
    "per-call cycle": lambda leg: per_call_cycle(make_detector(leg)),
    "gateway cycle": lambda leg: gateway_cycle(make_guard(leg)),
}


@pytest.mark.skipif(EXTENSIONS_DISABLED, reason="times the compiled core")
@pytest.mark.parametrize("group", list(WORKLOADS))
def test_cycle_legs_in_turn(benchmark: BenchmarkFixture, group: str) -> None:
    cycles: dict[str, Callable[[], None]] = {}
    for leg in CYCLES:
        with use_twin(leg):
            cycles[leg] = WORKLOADS[group](leg)
    seconds: dict[str, list[float]] = {leg: [] for leg in CYCLES}

    def pair() -> None:
        for leg, cycle in cycles.items():
            seconds[leg].append(timed_round(cycle, CYCLES[leg], CYCLES[leg] // 10))

    benchmark.group = f"{group}, legs in turn"
    # Timed inside the compiled leg's twin: the choosers must point at the
    # compiled twins while its cycles run (the baseline uses none of them).
    with use_twin("compiled"):
        benchmark.pedantic(pair, rounds=ROUNDS, iterations=1, warmup_rounds=1)

    medians = {leg: statistics.median(times[1:]) for leg, times in seconds.items()}
    ratio = medians["baseline"] / medians["compiled"]
    benchmark.extra_info.update(
        per="pair of rounds",
        cycle=group,
        compiled_ns=round(medians["compiled"] * 1e9, 1),
        baseline_ns=round(medians["baseline"] * 1e9, 1),
        ratio=round(ratio, 3),
    )
    print(
        f"\n{group}, legs in turn: compiled {medians['compiled'] * 1e9:.0f} ns, "
        f"baseline {medians['baseline'] * 1e9:.0f} ns: {ratio:.2f}x"
    )
    assert len(seconds["compiled"]) == len(seconds["baseline"]) == ROUNDS + 1
    assert ratio > 1.0

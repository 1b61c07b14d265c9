"""Does the per-call cost stay flat as live scopes grow, and what does a scope weigh? (workload 4)

Timing: the per-call cycle with ``run_id`` round-robin over 1, 1,000 and
100,000 live scopes (history 30, ``max_scopes=100_000``). Every scope's ring is
first filled with 30 ``record_call``; then the cycles visit the scopes in turn
(in a fixed shuffled order), each scope continuing its own sequence of
offsets, so no verdict fires. Times are per cycle. ``LOOPCORE_BENCH_SCALE_MAX``
adds a leg of that many scopes (e.g. 1000000: filling them takes the baseline
leg minutes, so it is not run by default).

The legs above run one after another, so a change of the machine's load
between them moves their ratio (the spread). ``test_live_scopes_in_turn``
builds the compiled core's legs side by side and times them round by round in
turn (a round of each scope count, then the next round), so a load that comes
and goes weighs on every leg alike; it prints each count's median and the
spread of the medians, which is the figure the targets summary reads. It holds
every count's scopes at once. In the same rounds it times the floor of any
store of scopes: the same cycle where each call only looks its run id up in a
dict of every scope (at 100,000 scopes in a shuffled order, the run id's str
and the dict's lines are rarely in cache either), so the spread can be read
against what merely finding a scope costs on this machine.

The pure-Python twin's legs at 100,000 scopes (timing and memory) run only
with ``LOOPCORE_BENCH_FULL=1``: filling them takes about two minutes.

Memory: resident-set growth for 100,000 scopes with 30 recorded calls each,
without call ids and with a unique ``tool_call_id`` per call, measured by
``memory_probe.py`` in a fresh subprocess per leg; reported as bytes per scope
in the summary table. Nothing about either is asserted.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from baseline import BaselineDetector
from conftest import EXTENSIONS_DISABLED
from loopcore import LoopDetector
from twins import use_twin
from workloads import ARGS, TOOL, make_detector, per_call_cycle, timed_round

if TYPE_CHECKING:
    from conftest import Figures

HISTORY = 30
ROUNDS = 100
CYCLES_PER_ROUND = 100
#: Untimed cycles before each round timed in turn.
WARM_CYCLES = 20
SCOPE_COUNTS = [1, 1_000, 100_000]
SCALE_MAX = int(os.environ.get("LOOPCORE_BENCH_SCALE_MAX", "0"))
if SCOPE_COUNTS[-1] < SCALE_MAX:
    SCOPE_COUNTS.append(SCALE_MAX)
# The pure-Python twin's legs at 100,000 scopes fill 3,000,000 records call by
# call: about two minutes of a run, for figures no target reads.
FULL = bool(os.environ.get("LOOPCORE_BENCH_FULL"))
MEMORY_SCOPES = 100_000
PROBE = Path(__file__).with_name("memory_probe.py")


def _filled(
    leg: str, scopes: int
) -> tuple[LoopDetector | BaselineDetector, list[str], Callable[[], None]]:
    """The leg's detector with every scope's ring full, its run ids, and the timed cycle."""
    detector = make_detector(leg, max_scopes=max(scopes, 100_000))
    run_ids = [f"run-{k}" for k in range(scopes)]
    for run_id in run_ids:
        for offset in range(HISTORY):
            detector.record_call(TOOL, ARGS[offset], run_id=run_id)
    cycle = per_call_cycle(detector, run_ids=_shuffled(run_ids), start=HISTORY * scopes)
    return detector, run_ids, cycle


def _shuffled(run_ids: list[str]) -> list[str]:
    """Round-robin in a shuffled order: a gateway's scopes are not touched in allocation order."""
    order = run_ids[:]
    random.Random(0).shuffle(order)
    return order


class _LookupOnly:
    """The floor of any store of scopes: each of the cycle's three calls only looks its
    run id up in a dict of every scope, the least a lookup by key must read."""

    def __init__(self, run_ids: list[str]) -> None:
        self.states = dict.fromkeys(run_ids, 0)

    def check(self, tool_name: str, args: Any, *, run_id: str) -> int:
        return self.states[run_id]

    def record_call(self, tool_name: str, args: Any, *, run_id: str) -> int:
        return self.states[run_id]

    def record_outcome(self, tool_name: str, args: Any, *, result: Any, run_id: str) -> int:
        return self.states[run_id]


@pytest.mark.parametrize("scopes", SCOPE_COUNTS, ids=lambda n: f"scopes{n}")
def test_live_scopes(benchmark: BenchmarkFixture, leg: str, scopes: int) -> None:
    if scopes >= MEMORY_SCOPES:
        _python_at_scale(leg)
    detector, run_ids, cycle = _filled(leg, scopes)

    benchmark.group = f"live scopes: {scopes:,}"
    benchmark.extra_info["per"] = "cycle"
    benchmark.pedantic(cycle, rounds=ROUNDS, iterations=CYCLES_PER_ROUND, warmup_rounds=1)

    for run_id in (run_ids[0], run_ids[-1]):
        assert len(detector.history(run_id=run_id)) == HISTORY


@pytest.mark.skipif(EXTENSIONS_DISABLED, reason="times the compiled core")
def test_live_scopes_in_turn(benchmark: BenchmarkFixture) -> None:
    with use_twin("compiled"):
        legs = {scopes: _filled("compiled", scopes) for scopes in SCOPE_COUNTS}
    floors: dict[int, Callable[[], None]] = {}
    for scopes, (_, run_ids, _) in legs.items():
        floors[scopes] = per_call_cycle(_LookupOnly(run_ids), run_ids=_shuffled(run_ids))
    seconds: dict[int, list[float]] = {scopes: [] for scopes in SCOPE_COUNTS}
    floor_seconds: dict[int, list[float]] = {scopes: [] for scopes in SCOPE_COUNTS}

    def in_turn() -> None:
        for scopes, (_, _, cycle) in legs.items():
            seconds[scopes].append(timed_round(cycle, CYCLES_PER_ROUND, WARM_CYCLES))
            floor_seconds[scopes].append(timed_round(floors[scopes], CYCLES_PER_ROUND, WARM_CYCLES))

    benchmark.group = "live scopes, counts in turn"
    with use_twin("compiled"):
        benchmark.pedantic(in_turn, rounds=ROUNDS, iterations=1, warmup_rounds=1)

    medians = {scopes: statistics.median(times[1:]) for scopes, times in seconds.items()}
    floor = {scopes: statistics.median(times[1:]) for scopes, times in floor_seconds.items()}
    spread = max(medians.values()) / min(medians.values())
    benchmark.extra_info.update(
        per="round of every scope count",
        medians_ns={f"{scopes:,}": round(median * 1e9, 1) for scopes, median in medians.items()},
        spread=round(spread, 3),
        # The same rounds' dict look-ups alone: what finding a scope by its run id costs.
        floor_ns={f"{scopes:,}": round(median * 1e9, 1) for scopes, median in floor.items()},
    )
    shown = ", ".join(f"{scopes:,}: {median * 1e9:.0f} ns" for scopes, median in medians.items())
    floors_shown = ", ".join(
        f"{scopes:,}: {median * 1e9:.0f} ns" for scopes, median in floor.items()
    )
    print(
        f"\nlive scopes in turn (compiled, per cycle): {shown}; spread {spread:.2f}x"
        f"\nthe same rounds' dict look-ups by run id alone: {floors_shown}"
    )

    for detector, run_ids, _ in legs.values():
        for run_id in (run_ids[0], run_ids[-1]):
            assert len(detector.history(run_id=run_id)) == HISTORY


def _python_at_scale(leg: str) -> None:
    if leg == "python" and not FULL:
        pytest.skip("the pure-Python leg at 100,000 scopes: set LOOPCORE_BENCH_FULL=1")


def _probe(leg: str, *args: str) -> dict[str, object]:
    """Run ``memory_probe.py`` for ``leg`` in a fresh process; its JSON report."""
    done = subprocess.run(
        [sys.executable, str(PROBE), leg, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"memory probe for the {leg} leg failed:\n{done.stderr}")
    report: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(report))
    return report


@pytest.mark.parametrize("ids", [False, True], ids=["no-ids", "unique-ids"])
def test_memory_per_scope(leg: str, figures: Figures, ids: bool) -> None:
    _python_at_scale(leg)
    report = _probe(leg, str(MEMORY_SCOPES), str(HISTORY), *(["ids"] * ids))
    figures.add(
        f"memory: {MEMORY_SCOPES:,} scopes x {HISTORY} calls"
        f"{', unique call ids' if ids else ''} (per scope)",
        leg,
        float(report["bytes_per_scope"]),  # type: ignore[arg-type]
        "B",
    )


@pytest.mark.parametrize("history", [30, 1000], ids=lambda h: f"history{h}")
def test_memory_of_one_call_scopes(leg: str, figures: Figures, history: int) -> None:
    # A scope costs what it holds, not what it could hold (20,000 one-call scopes).
    report = _probe(leg, "20000", str(history), "calls=1")
    figures.add(
        f"memory: 20,000 one-call scopes, history {history} (per scope)",
        leg,
        float(report["bytes_per_scope"]),  # type: ignore[arg-type]
        "B",
    )

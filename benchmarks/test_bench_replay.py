"""What does ``loopcore replay`` cost end to end, and a ``--sweep`` of 11 values next to it?

A generated loopcore JSONL trace (``make_trace.py``: 100,000 calls in runs of
about 1,000, some stuck) is replayed through ``loopcore.cli.main`` exactly as
the console script runs it, JSON parsing, fingerprinting, the scan and the
JSON report included (stdout captured). The sweep evaluates 11 values of
``warningThreshold`` on the same trace; the issue asks that it cost at most 3x
one plain replay, since the trace is read and fingerprinted once. The same
replay with the operator's table instead of JSON comes last: the JSON report
should cost at most 1.5x the table (``extra_info["json_over_table"]``).

Times are per replay; ``extra_info`` holds calls/s, and on the sweep, its
ratio to the plain replay of the same run. The core is whichever
``loopcore.IMPLEMENTATION`` chose (the compiled one when it is built).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

import loopcore
from conftest import REPLAY_GROUP, Figures
from loopcore.cli import main
from make_trace import write_trace

CALLS = 100_000
ROUNDS = 3
#: Medians of this run, so the sweep can report its ratio to the plain replay.
MEDIANS: dict[str, float] = {}


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "trace.jsonl"
    assert write_trace(str(path), CALLS, seed=1) == CALLS
    return path


def _replay(*args: str) -> int:
    with contextlib.redirect_stdout(io.StringIO()):
        return main(["replay", *args])


def _time(benchmark: BenchmarkFixture, figures: Figures, name: str, *args: str) -> None:
    benchmark.extra_info["core"] = loopcore.IMPLEMENTATION
    benchmark.extra_info["calls"] = CALLS
    code = benchmark.pedantic(_replay, args=args, rounds=ROUNDS, iterations=1)
    assert code == 1  # the generated trace has stuck runs
    median = benchmark.stats.stats.median
    MEDIANS[name] = median
    benchmark.extra_info["calls_per_s"] = round(CALLS / median)
    figures.add(REPLAY_GROUP, name, median / CALLS, "s")


@pytest.mark.benchmark(group="replay 100k calls")
def test_replay(benchmark: BenchmarkFixture, figures: Figures, trace: Path) -> None:
    _time(benchmark, figures, "replay", str(trace), "--enable", "--format", "json")


@pytest.mark.benchmark(group="replay 100k calls")
def test_replay_sweep_11_values(benchmark: BenchmarkFixture, figures: Figures, trace: Path) -> None:
    sweep = ("--sweep", "warningThreshold=5:15", "--format", "json")
    _time(benchmark, figures, "sweep", str(trace), "--enable", *sweep)
    if "replay" in MEDIANS:
        benchmark.extra_info["sweep_over_replay"] = round(MEDIANS["sweep"] / MEDIANS["replay"], 2)


@pytest.mark.benchmark(group="replay 100k calls")
def test_replay_table(benchmark: BenchmarkFixture, figures: Figures, trace: Path) -> None:
    _time(benchmark, figures, "table", str(trace), "--enable", "--format", "table")
    if "replay" in MEDIANS:
        benchmark.extra_info["json_over_table"] = round(MEDIANS["replay"] / MEDIANS["table"], 2)

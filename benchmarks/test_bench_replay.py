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

Replay against parsing (group ``replay vs json.loads``): on one trace of
``LOOPCORE_BENCH_REPLAY_CALLS`` calls (default 100,000; the issue's figure is
for 1,000,000), merely running ``json.loads`` over its lines in Python (the
plain-Python yardstick), then ``loopcore replay`` with the reference ``json``
reading path, with the msgspec path, both ``--jobs 1``, and ``--jobs`` 2 and
the number of cores (the ``--jobs`` scaling). The run ends with one line
giving each leg's calls/s and its ratio to the ``json.loads`` leg.

At the issue's size (group ``replay at full size``): the targets name a
1,000,000-call trace, and at 100,000 calls a replay's fixed costs (starting a
worker, the report) weigh a tenth as much per call as they do at a million.
So the run also generates a trace of ``LOOPCORE_BENCH_REPLAY_FULL_CALLS``
calls (default 1,000,000; 0 leaves the group out, as does a comparison group
already that large) and times only the yardstick (one round: it reads the
whole trace) and ``loopcore replay`` with the default ``--jobs``. The targets
summary reads this group when it ran, else the comparison group.

Phases (group ``replay phases``): on the same trace, ``formats.load`` alone with
``--jobs`` 1 and the default, and ``batch.scan`` of the loaded table alone, so
the closing line's replay figures can be split into reading and scanning. The
run prints one line of them.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

import loopcore
from conftest import REPLAY_GROUP, Figures
from loopcore import LoopDetectionConfig
from loopcore.batch import scan
from loopcore.cli import main
from loopcore.cli.options import default_jobs
from loopcore.formats import load
from loopcore.formats._fast import REFERENCE_ENV
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


# -- replay against parsing ------------------------------------------------------------------

PARSE_CALLS = int(os.environ.get("LOOPCORE_BENCH_REPLAY_CALLS", "100000"))
PARSE_GROUP = f"replay vs json.loads: {PARSE_CALLS:,} calls"
#: Seconds per call of each leg of this run, for the closing line.
PARSE_MEDIANS: dict[str, float] = {}
#: The legs: (name, ``--jobs``, reference reading path?)
PARSE_LEGS = [
    ("replay reference --jobs 1", 1, True),
    ("replay --jobs 1", 1, False),
    ("replay --jobs 2", 2, False),
]
if default_jobs() > 2:
    PARSE_LEGS.append((f"replay --jobs {default_jobs()}", default_jobs(), False))


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay-parse") / "trace.jsonl"
    # Only the events are counted: the trace's compactions are extra lines.
    assert write_trace(str(path), PARSE_CALLS, seed=1) == PARSE_CALLS
    return path


def _time_jobs(benchmark: BenchmarkFixture, trace: Path, jobs: int) -> float:
    """Time ``loopcore replay --enable --format json --jobs N`` of ``trace``; its median."""
    benchmark.extra_info["core"] = loopcore.IMPLEMENTATION
    benchmark.extra_info["jobs"] = jobs
    args = (str(trace), "--enable", "--format", "json", "--jobs", str(jobs))
    code = benchmark.pedantic(_replay, args=args, rounds=ROUNDS, iterations=1)
    assert code == 1  # the generated trace has stuck runs
    return float(benchmark.stats.stats.median)


def _json_loads_lines(path: Path) -> int:
    loads = json.loads
    count = 0
    with open(path, "rb") as stream:
        for line in stream:
            loads(line)
            count += 1
    return count


def _per_call(benchmark: BenchmarkFixture, name: str) -> None:
    median = benchmark.stats.stats.median
    PARSE_MEDIANS[name] = median / PARSE_CALLS
    benchmark.extra_info["calls_per_s"] = round(PARSE_CALLS / median)


@pytest.mark.benchmark(group=PARSE_GROUP)
def test_json_loads_lines(benchmark: BenchmarkFixture, big_trace: Path) -> None:
    """The yardstick: ``json.loads`` over every line, nothing else."""
    lines = benchmark.pedantic(_json_loads_lines, args=(big_trace,), rounds=ROUNDS, iterations=1)
    assert lines >= PARSE_CALLS
    _per_call(benchmark, "json.loads")


@pytest.mark.benchmark(group=PARSE_GROUP)
@pytest.mark.parametrize(("name", "jobs", "reference"), PARSE_LEGS, ids=[n for n, *_ in PARSE_LEGS])
def test_replay_against_parsing(
    benchmark: BenchmarkFixture,
    big_trace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    jobs: int,
    reference: bool,
) -> None:
    if reference:
        monkeypatch.setenv(REFERENCE_ENV, "1")
    else:
        monkeypatch.delenv(REFERENCE_ENV, raising=False)
    _time_jobs(benchmark, big_trace, jobs)
    _per_call(benchmark, name)
    if "json.loads" in PARSE_MEDIANS:
        ratio = PARSE_MEDIANS["json.loads"] / PARSE_MEDIANS[name]
        benchmark.extra_info["over_json_loads"] = round(ratio, 2)
    if name == PARSE_LEGS[-1][0]:
        with capsys.disabled():  # printed as the run goes, past pytest's capture
            print(f"\n{_parsing_line()}")


def _parsing_line() -> str:
    """Every leg's calls/s, and its throughput over the ``json.loads`` leg's."""
    base = PARSE_MEDIANS.get("json.loads")
    parts = []
    for name, per_call in PARSE_MEDIANS.items():
        ratio = f" ({base / per_call:.2f}x json.loads)" if base and name != "json.loads" else ""
        parts.append(f"{name}: {1 / per_call:,.0f} calls/s{ratio}")
    return f"{PARSE_GROUP}: " + "; ".join(parts)


# -- at the size ---------------------------------------------------------------------

FULL_CALLS = int(os.environ.get("LOOPCORE_BENCH_REPLAY_FULL_CALLS", "1000000"))
FULL_GROUP = f"replay at full size: {FULL_CALLS:,} calls"
#: Left out when the comparison group is already at least this large.
FULL_RUNS = FULL_CALLS > PARSE_CALLS
FULL_MEDIANS: dict[str, float] = {}
full_size = pytest.mark.skipif(
    not FULL_RUNS,
    reason="LOOPCORE_BENCH_REPLAY_FULL_CALLS is 0 or within the comparison group's size",
)


@pytest.fixture(scope="module")
def full_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay-full") / "trace.jsonl"
    assert write_trace(str(path), FULL_CALLS, seed=1) == FULL_CALLS
    return path


@full_size
@pytest.mark.benchmark(group=FULL_GROUP)
def test_json_loads_full(benchmark: BenchmarkFixture, full_trace: Path) -> None:
    """The yardstick at full size: one round, a few seconds of ``json.loads``."""
    lines = benchmark.pedantic(_json_loads_lines, args=(full_trace,), rounds=1, iterations=1)
    assert lines >= FULL_CALLS
    FULL_MEDIANS["json.loads"] = benchmark.stats.stats.median / FULL_CALLS
    benchmark.extra_info["calls_per_s"] = round(FULL_CALLS / benchmark.stats.stats.median)


@full_size
@pytest.mark.benchmark(group=FULL_GROUP)
def test_replay_full(
    benchmark: BenchmarkFixture,
    full_trace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv(REFERENCE_ENV, raising=False)
    jobs = default_jobs()
    median = _time_jobs(benchmark, full_trace, jobs)
    benchmark.extra_info["calls_per_s"] = round(FULL_CALLS / median)
    line = f"{FULL_GROUP}: replay --jobs {jobs}: {FULL_CALLS / median:,.0f} calls/s"
    if "json.loads" in FULL_MEDIANS:
        ratio = FULL_MEDIANS["json.loads"] * FULL_CALLS / median
        benchmark.extra_info["over_json_loads"] = round(ratio, 2)
        line += f" ({ratio:.2f}x json.loads, {1 / FULL_MEDIANS['json.loads']:,.0f} calls/s)"
    with capsys.disabled():
        print(f"\n{line}")


# -- phases ----------------------------------------------------------------------------------

PHASE_GROUP = f"replay phases: {PARSE_CALLS:,} calls"
#: Seconds per call of each phase of this run, for the closing line.
PHASE_MEDIANS: dict[str, float] = {}
PHASES = [("load --jobs 1", 1), (f"load --jobs {default_jobs()}", default_jobs()), ("scan", 0)]


@pytest.mark.benchmark(group=PHASE_GROUP)
@pytest.mark.parametrize(("name", "jobs"), PHASES, ids=[n for n, _ in PHASES])
def test_replay_phases(
    benchmark: BenchmarkFixture,
    big_trace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
    jobs: int,
) -> None:
    monkeypatch.delenv(REFERENCE_ENV, raising=False)
    benchmark.extra_info["core"] = loopcore.IMPLEMENTATION
    err = io.StringIO()
    if jobs:
        traces = benchmark.pedantic(
            load,
            args=([str(big_trace)],),
            kwargs={"err": err, "progress": False, "jobs": jobs},
            rounds=ROUNDS,
            iterations=1,
        )
        assert len(traces.table) == PARSE_CALLS
    else:
        table = load([str(big_trace)], err=err, progress=False).table
        config = LoopDetectionConfig(enabled=True)
        result = benchmark.pedantic(scan, args=(table, config), rounds=ROUNDS, iterations=1)
        assert result is not None
    median = benchmark.stats.stats.median
    PHASE_MEDIANS[name] = median / PARSE_CALLS
    benchmark.extra_info["us_per_call"] = round(median / PARSE_CALLS * 1e6, 3)
    if name == PHASES[-1][0]:
        with capsys.disabled():
            parts = [f"{n}: {per_call * 1e6:.2f} us/call" for n, per_call in PHASE_MEDIANS.items()]
            print(f"\n{PHASE_GROUP}: " + "; ".join(parts))

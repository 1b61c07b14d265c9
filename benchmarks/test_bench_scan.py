"""How fast is a batch scan of a recorded trace? 5,000,000 pre-fingerprinted calls (issue 4).

One ``CallTable`` of 5,000,000 calls over 1,000 interleaved runs, history 30
(``scan_workload.py``), scanned three ways in the same run:

- ``vectorised``: ``loopcore.batch.scan(table)``, the numpy batch scan;
- ``sequential``: the same table fed call by call through a ``LoopDetector``
  on the compiled core (``check``, ``record_call``, ``record_outcome``);
- ``baseline``: the plain-Python baseline detector fed the first 100,000 calls
  (it takes about 20 µs a call; a verdict depends only on earlier calls, so a
  prefix is a fair sample of the per-call cost).

Figures are seconds per call. After timing, every verdict of the sequential
leg, and of the baseline's prefix, is compared with the batch scan's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from baseline import BaselineDetector
from loopcore import LoopDetector
from loopcore.batch import DETECTORS, CallTable, scan
from scan_workload import feed, make_table
from twins import use_twin

CALLS = 5_000_000
SCOPES = 1_000
BASELINE_CALLS = 100_000
CONFIG = {"enabled": True, "historySize": 30}
GROUP = "batch scan: 5,000,000 calls"
LEVEL_CODES = {None: 0, "warning": 1, "critical": 2}


@pytest.fixture(scope="module")
def table() -> CallTable:
    return make_table(CALLS, SCOPES)


@pytest.fixture(scope="module")
def scanned(table: CallTable) -> Any:
    return scan(table, CONFIG)


def _record(
    request: pytest.FixtureRequest, benchmark: BenchmarkFixture, leg: str, calls: int
) -> None:
    figures = request.getfixturevalue("figures")
    figures.add(GROUP, leg, benchmark.stats.stats.median / calls, "s")
    benchmark.extra_info["calls"] = calls
    benchmark.extra_info["calls_per_second"] = round(calls / benchmark.stats.stats.median)


def _agree(verdicts: list[tuple[str | None, str | None, int]], scanned: Any) -> None:
    n = len(verdicts)
    level = np.array([LEVEL_CODES[v[0]] for v in verdicts], np.int8)
    detector = np.array([DETECTORS.index(v[1]) for v in verdicts], np.int8)
    count = np.array([v[2] for v in verdicts], np.int32)
    assert np.array_equal(level, scanned.level[:n])
    assert np.array_equal(detector, scanned.detector[:n])
    assert np.array_equal(count, scanned.count[:n])


def test_vectorised_scan(
    benchmark: BenchmarkFixture, request: pytest.FixtureRequest, table: CallTable, scanned: Any
) -> None:
    benchmark.group = GROUP
    result = benchmark.pedantic(scan, args=(table, CONFIG), rounds=5, iterations=1, warmup_rounds=1)
    _record(request, benchmark, "vectorised", CALLS)
    assert np.array_equal(result.level, scanned.level)
    # The workload is meant to look like real traffic: mostly quiet, every detector firing.
    assert 0.05 < np.count_nonzero(result.level) / CALLS < 0.5
    assert set(np.unique(result.detector).tolist()) == set(range(len(DETECTORS)))


# ``twin`` names the core for conftest, which deselects compiled legs when extensions are off.
@pytest.mark.parametrize("twin", ["compiled"])
def test_sequential_compiled_detector(
    benchmark: BenchmarkFixture,
    request: pytest.FixtureRequest,
    table: CallTable,
    scanned: Any,
    twin: str,
) -> None:
    benchmark.group = GROUP
    with use_twin(twin):
        runs = [feed(table, LoopDetector(CONFIG, max_scopes=SCOPES)) for _ in range(3)]
        rounds = iter(runs)
        verdicts = benchmark.pedantic(
            lambda: next(rounds)(), rounds=2, iterations=1, warmup_rounds=0
        )
    _record(request, benchmark, "sequential", CALLS)
    _agree(verdicts, scanned)


def test_plain_python_baseline(
    benchmark: BenchmarkFixture, request: pytest.FixtureRequest, table: CallTable, scanned: Any
) -> None:
    benchmark.group = GROUP
    prefix = CallTable(
        table.scope[:BASELINE_CALLS],
        table.hashes[:BASELINE_CALLS],
        table.flags[:BASELINE_CALLS],
        table.scopes,
        table.names,
    )
    runs = iter([feed(prefix, BaselineDetector(CONFIG)) for _ in range(3)])
    verdicts = benchmark.pedantic(lambda: next(runs)(), rounds=2, iterations=1, warmup_rounds=0)
    _record(request, benchmark, "baseline", BASELINE_CALLS)
    _agree(verdicts, scanned)

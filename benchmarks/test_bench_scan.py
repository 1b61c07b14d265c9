"""How fast is a batch scan of a recorded trace? 5,000,000 pre-fingerprinted calls (issue 4).

One ``CallTable`` of 5,000,000 calls over 1,000 interleaved runs, history 30
(``scan_workload.py``, its error outcomes marked no-progress as the outcome
rules mark every error, SPEC §8.0), scanned three ways in the same run:

- ``vectorised``: ``loopcore.batch.scan(table)``, the numpy batch scan, which
  answers for a gateway that records blocked calls as vetoes (SPEC §8.1);
- ``sequential``: the table's first 1,000,000 calls fed call by call through
  that gateway, a ``ToolLoopGuard`` on the compiled core (``before_call``, then
  ``after_call`` for the calls it lets run; the whole table took 95 s of CI);
- ``baseline``: the plain-Python baseline detector fed the first 100,000 calls
  (it takes about 20 µs a call; a verdict depends only on earlier calls, so a
  prefix is a fair sample of the per-call cost).

Figures are seconds per call. After timing, every verdict of the sequential
leg is compared with the batch scan's, and so is every verdict of the
baseline's prefix up to each run's first critical: the baseline keeps the seed
rules, where a blocked call leaves no veto behind.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from baseline import BaselineDetector
from loopcore import ToolLoopGuard
from loopcore.batch import DETECTORS, CallTable, scan
from loopcore.batch._table import NO_PROGRESS
from scan_workload import feed, make_table
from twins import use_twin

CALLS = 5_000_000
SCOPES = 1_000
BASELINE_CALLS = 100_000
# The compiled guard fed call by call: a prefix too (all of it took 95 s of CI's time).
SEQUENTIAL_CALLS = 1_000_000
CONFIG = {"enabled": True, "historySize": 30}
GROUP = "batch scan: 5,000,000 calls"
LEVEL_CODES = {None: 0, "warning": 1, "critical": 2}


@pytest.fixture(scope="module")
def table() -> CallTable:
    made = make_table(CALLS, SCOPES)
    flags = made.flags.copy()
    flags[:, NO_PROGRESS] = made.has_unknown  # its only errors: the unknown-tool retries
    return CallTable(made.scope, made.hashes, flags, made.scopes, made.names)


def gateway_feed(table: CallTable, guard: Any) -> Callable[[], list[tuple[Any, Any, int]]]:
    """A function that replays ``table`` through a gateway and returns its verdicts.

    As ``scan_workload.feed``, with ``before_call`` and, for a call it lets run,
    ``after_call``: a blocked call is recorded by the guard as a veto.
    """
    names = table.names
    runs = [key[1] for key in table.scopes]
    errors = {h: f"unknown tool: {name}" for h, name in names.items()}
    one = np.uint64(1)

    def run() -> list[tuple[Any, Any, int]]:
        before_call, after_call = guard.before_call, guard.after_call
        verdicts = []
        for start in range(0, len(table), 65_536):
            part = slice(start, start + 65_536)
            rows = zip(
                [names[h] for h in table.tool_hash[part].tolist()],
                (table.args_hash[part] >> one).tolist(),
                [runs[s] for s in table.scope[part].tolist()],
                table.has_result[part].tolist(),
                (table.result_hash[part] >> one).tolist(),
                table.has_unknown[part].tolist(),
                table.unknown_hash[part].tolist(),
                strict=True,
            )
            for tool, arg, run_id, done, result, failed, unknown in rows:
                decision = before_call(tool, arg, session=None, run_id=run_id)
                verdict = decision.verdict
                verdicts.append((verdict.level, verdict.detector, verdict.count))
                if decision.blocked:
                    continue
                if failed:
                    after_call(tool, arg, error=errors[unknown], session=None, run_id=run_id)
                elif done:
                    after_call(tool, arg, result=result, session=None, run_id=run_id)
        return verdicts

    return run


@pytest.fixture(scope="module")
def scanned(table: CallTable) -> Any:
    return scan(table, CONFIG)


def _prefix(table: CallTable, calls: int) -> CallTable:
    """The table's first ``calls`` calls (a run's verdicts depend only on its earlier calls)."""
    return CallTable(
        table.scope[:calls], table.hashes[:calls], table.flags[:calls], table.scopes, table.names
    )


def _record(
    request: pytest.FixtureRequest, benchmark: BenchmarkFixture, leg: str, calls: int
) -> None:
    figures = request.getfixturevalue("figures")
    figures.add(GROUP, leg, benchmark.stats.stats.median / calls, "s")
    benchmark.extra_info["calls"] = calls
    benchmark.extra_info["calls_per_second"] = round(calls / benchmark.stats.stats.median)


def _agree(
    verdicts: list[tuple[str | None, str | None, int]], scanned: Any, upto: Any = None
) -> None:
    """The verdicts equal the scan's (only where ``upto`` is set, when given)."""
    n = len(verdicts)
    level = np.array([LEVEL_CODES[v[0]] for v in verdicts], np.int8)
    detector = np.array([DETECTORS.index(v[1]) for v in verdicts], np.int8)
    count = np.array([v[2] for v in verdicts], np.int32)
    picked = np.ones(n, np.bool_) if upto is None else upto[:n]
    assert np.array_equal(level[picked], scanned.level[:n][picked])
    assert np.array_equal(detector[picked], scanned.detector[:n][picked])
    assert np.array_equal(count[picked], scanned.count[:n][picked])


def _until_first_critical(scanned: Any) -> Any:
    """Per call: is it at or before its run's first critical (where no veto is recorded)?"""
    order, _, pos = scanned._by_scope()
    critical = scanned.level[order] == 2
    seen = np.cumsum(critical)
    starts = np.flatnonzero(pos == 0)
    sizes = np.diff(starts, append=len(order))
    before = seen - critical - np.repeat(seen[starts] - critical[starts], sizes)
    out = np.zeros(len(order), np.bool_)
    out[order] = before == 0
    return out


def test_vectorised_scan(
    benchmark: BenchmarkFixture, request: pytest.FixtureRequest, table: CallTable, scanned: Any
) -> None:
    benchmark.group = GROUP
    result = benchmark.pedantic(scan, args=(table, CONFIG), rounds=5, iterations=1, warmup_rounds=1)
    _record(request, benchmark, "vectorised", CALLS)
    assert np.array_equal(result.level, scanned.level)
    # The workload is meant to look like real traffic: mostly quiet, every detector of the
    # seed table firing (its only stale outcomes, the unknown-tool retries, are blocked
    # before they could churn: argument churn needs ten of them, as the unknown streak).
    assert 0.05 < np.count_nonzero(result.level) / CALLS < 0.5
    fired = set(np.unique(result.detector).tolist())
    assert fired == set(range(len(DETECTORS))) - {DETECTORS.index("argument_churn")}


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
        prefix = _prefix(table, SEQUENTIAL_CALLS)
        runs = [gateway_feed(prefix, ToolLoopGuard(CONFIG, max_scopes=SCOPES)) for _ in range(3)]
        rounds = iter(runs)
        verdicts = benchmark.pedantic(
            lambda: next(rounds)(), rounds=2, iterations=1, warmup_rounds=0
        )
    _record(request, benchmark, "sequential", SEQUENTIAL_CALLS)
    assert len(verdicts) == SEQUENTIAL_CALLS
    _agree(verdicts, scanned)


def test_plain_python_baseline(
    benchmark: BenchmarkFixture, request: pytest.FixtureRequest, table: CallTable, scanned: Any
) -> None:
    benchmark.group = GROUP
    prefix = _prefix(table, BASELINE_CALLS)
    runs = iter([feed(prefix, BaselineDetector(CONFIG)) for _ in range(3)])
    verdicts = benchmark.pedantic(lambda: next(runs)(), rounds=2, iterations=1, warmup_rounds=0)
    _record(request, benchmark, "baseline", BASELINE_CALLS)
    _agree(verdicts, scanned, _until_first_critical(scanned))

"""How is each benchmark leg selected, and how are the legs compared? Fixtures and the summary.

Run with ``python -m pytest benchmarks`` (pytest-benchmark: ``pip install '.[bench]'``).

Every workload is one ``benchmark.group`` with three legs, the ``leg`` fixture:
``compiled`` (both choosers pointed at the ``_c`` twins), ``python`` (both at the
``_py`` twins) and ``baseline`` (``baseline.py``, no loopcore). The twin stays
selected for the whole test, timed loop included. The compiled leg imports the
``_c`` modules directly and fails when they are not built; with
``LOOPCORE_NO_EXTENSIONS`` set it is deselected instead.

Benchmarks use ``benchmark.pedantic(..., iterations=N)``, so pytest-benchmark's
own statistics are already per cycle (per operation), not per round. After the
run, a table gives per group the median of each leg and the ratios
baseline/compiled, python/compiled and baseline/python, plus the memory figures
recorded with the ``figures`` fixture.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from targets import Run, report
from twins import LEGS, use_twin

EXTENSIONS_DISABLED = bool(os.environ.get("LOOPCORE_NO_EXTENSIONS"))


@dataclass(frozen=True)
class Figure:
    """One leg's figure in one group: seconds per operation, or bytes."""

    group: str
    leg: str
    value: float
    unit: str  # "s" (median seconds per operation) or "B" (bytes)
    payload_bytes: int | None = None  # bytes processed per operation, for MB/s


class Figures:
    """The figures of this run, in the order they were recorded."""

    def __init__(self) -> None:
        self.items: list[Figure] = []

    def add(
        self, group: str, leg: str, value: float, unit: str, payload_bytes: int | None = None
    ) -> None:
        self.items.append(Figure(group, leg, value, unit, payload_bytes))


FIGURES = pytest.StashKey[Figures]()
#: Benchmarks without a ``leg``, for the targets: test id -> (median seconds, group, extra_info).
OTHERS = pytest.StashKey[dict[str, tuple[float, str, dict[str, object]]]]()


#: pytest-benchmark's own table, trimmed to what matters here (``--benchmark-columns`` wins).
COLUMNS = ["median", "iqr", "min", "max", "rounds", "iterations"]

#: Summary rows follow the workload order of the issue; groups are matched by prefix.
GROUP_ORDER = (
    "per-call cycle",
    "gateway cycle",
    "stuck run",
    "live scopes",
    "memory",
    "history",
    "large args",
)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.stash[FIGURES] = Figures()
    config.stash[OTHERS] = {}
    if not any(arg.startswith("--benchmark-columns") for arg in config.invocation_params.args):
        config.option.benchmark_columns = COLUMNS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``LOOPCORE_NO_EXTENSIONS`` set, deselect every compiled leg."""
    if not EXTENSIONS_DISABLED:
        return
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        params = callspec.params if callspec is not None else {}
        is_compiled = "compiled" in (params.get("leg"), params.get("twin"))
        (drop if is_compiled else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(params=LEGS)
def leg(request: pytest.FixtureRequest) -> Iterator[str]:
    """The leg under test; its twin is selected for the whole test."""
    name: str = request.param
    with use_twin(name):
        yield name


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> Figures:
    """Where a test records a figure that is not a pytest-benchmark timing (memory)."""
    return request.config.stash[FIGURES]


@pytest.fixture(autouse=True)
def _record_timing(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a benchmark test, record its median per operation under its group and leg."""
    yield
    funcargs = getattr(request.node, "funcargs", None) or {}
    benchmark = funcargs.get("benchmark")
    stats = getattr(benchmark, "stats", None)
    callspec = getattr(request.node, "callspec", None)
    leg = callspec.params.get("leg") if callspec is not None else None
    if benchmark is None or stats is None:
        return
    if leg is None:
        others = request.config.stash[OTHERS]
        group = benchmark.group or request.node.name
        others[request.node.name] = (stats.stats.median, group, dict(benchmark.extra_info))
        return
    request.config.stash[FIGURES].add(
        benchmark.group or request.node.name,
        leg,
        stats.stats.median,
        "s",
        benchmark.extra_info.get("payload_bytes"),
    )


# -- the summary table ---------------------------------------------------------------------


def _format(figure: Figure | None) -> str:
    if figure is None:
        return "-"
    value = figure.value
    if figure.unit == "B":
        return f"{value:,.0f} B"
    if value < 1e-6:
        text = f"{value * 1e9:.0f} ns"
    elif value < 1e-3:
        text = f"{value * 1e6:.2f} µs"
    else:
        text = f"{value * 1e3:.2f} ms"
    if figure.payload_bytes:
        text += f" ({figure.payload_bytes / value / 1e6:,.0f} MB/s)"
    return text


def _ratio(numerator: Figure | None, denominator: Figure | None) -> str:
    if numerator is None or denominator is None or denominator.value <= 0:
        return "-"
    return f"{numerator.value / denominator.value:.1f}x"


def _group_rank(group: str) -> int:
    for rank, prefix in enumerate(GROUP_ORDER):
        if group.startswith(prefix):
            return rank
    return len(GROUP_ORDER)


#: ``loopcore replay`` end to end, and a sweep of 11 values of the same trace (per call).
REPLAY_GROUP = "replay: 100,000 calls"

#: The legs of a batch-scan group: the numpy scan, the compiled per-call detector, the baseline.
BATCH_LEGS = ("vectorised", "sequential", "baseline")


def _write_table(terminalreporter: pytest.TerminalReporter, rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for index, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)
        ]
        terminalreporter.write_line("  ".join(cells))
        if index == 0:
            terminalreporter.write_line("  ".join("-" * width for width in widths))


def _batch_summary(
    terminalreporter: pytest.TerminalReporter, by_group: dict[str, dict[str, Figure]]
) -> None:
    """Batch-scan groups: seconds per call and calls per second of each leg, and the ratios."""
    groups = [group for group, legs in by_group.items() if BATCH_LEGS[0] in legs]
    if not groups and REPLAY_GROUP not in by_group:
        return
    rows: list[tuple[str, ...]] = [("group", *BATCH_LEGS, "seq/vec", "base/vec")]
    for group in groups:
        legs = by_group[group]
        vectorised, sequential, baseline = (legs.get(name) for name in BATCH_LEGS)
        cells = [
            "-" if f is None else f"{_format(f)} ({1 / f.value / 1e6:.2f} M calls/s)"
            for f in (vectorised, sequential, baseline)
        ]
        rows.append((group, *cells, _ratio(sequential, vectorised), _ratio(baseline, vectorised)))
    terminalreporter.write_sep("=", "loopcore: batch scan vs per-call detector vs baseline")
    if groups:
        terminalreporter.write_line("medians per call; ratios > 1 mean the first is slower")
        _write_table(terminalreporter, rows)
    replay = by_group.get(REPLAY_GROUP, {})
    plain, swept = replay.get("replay"), replay.get("sweep")
    if plain is not None:
        line = f"{REPLAY_GROUP}: {1 / plain.value:,.0f} calls/s end to end (JSON parsing included)"
        if swept is not None:
            line += f"; --sweep of 11 values / one replay: {_ratio(swept, plain)}"
        terminalreporter.write_line(line)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    items = terminalreporter.config.stash[FIGURES].items
    if items:
        _legs_summary(terminalreporter, items)
    _targets_summary(terminalreporter, items, terminalreporter.config.stash[OTHERS])


def _legs_summary(terminalreporter: pytest.TerminalReporter, items: list[Figure]) -> None:
    by_group: dict[str, dict[str, Figure]] = {}
    for figure in items:
        by_group.setdefault(figure.group, {})[figure.leg] = figure
    _batch_summary(terminalreporter, by_group)
    groups = sorted(
        (g for g in by_group if BATCH_LEGS[0] not in by_group[g] and g != REPLAY_GROUP),
        key=_group_rank,
    )
    if not groups:
        return
    header = ("group", *LEGS, "base/comp", "py/comp", "base/py")
    rows: list[tuple[str, ...]] = [header]
    for group in groups:
        legs = by_group[group]
        compiled, python, baseline = (legs.get(name) for name in LEGS)
        rows.append(
            (
                group,
                _format(compiled),
                _format(python),
                _format(baseline),
                _ratio(baseline, compiled),
                _ratio(python, compiled),
                _ratio(baseline, python),
            )
        )
    terminalreporter.write_sep("=", "loopcore: compiled vs pure Python vs plain-Python baseline")
    terminalreporter.write_line(
        "medians per operation (a call cycle, or one fingerprint); memory in bytes per scope; "
        "ratios > 1 mean the first is slower / larger"
    )
    _write_table(terminalreporter, rows)


def _targets_summary(
    terminalreporter: pytest.TerminalReporter,
    items: list[Figure],
    others: dict[str, tuple[float, str, dict[str, object]]],
) -> None:
    """The performance targets, each with this run's figure: met or not."""
    if not items and not others:
        return
    from loopcore.cli.options import default_jobs

    run = Run(others=dict(others))
    for figure in items:
        run.legs.setdefault(figure.group, {})[figure.leg] = figure.value
        if figure.payload_bytes:
            run.payload[figure.group] = figure.payload_bytes
    terminalreporter.write_sep("=", "loopcore: performance targets (this run)")
    for line in report(run, default_jobs()):
        terminalreporter.write_line(line)

"""Did this benchmark run meet the performance targets? One line per target, at the end of a run.

The targets are the ones the project set itself for the compiled core on a
2-core machine: ratios to the plain-Python baseline timed in the same run (so
a slow or busy machine moves both sides), plus a few absolute figures that
are the point of the exercise (bytes per scope, GB/s, calls/s, the slowest
call). A target whose benchmark did not run in this session is listed as not
measured; a figure from a smaller run than the target names (the tail and
replay benchmarks take their sizes from the environment) says its size, so a
quick run is never mistaken for the full one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Run", "Target", "report", "targets"]


@dataclass
class Run:
    """What the summary needs of one run.

    ``legs`` maps a group to its legs' median seconds per operation (or bytes,
    for the memory groups); ``payload`` a group to the bytes one operation of it
    processes; ``others`` a benchmark without a ``leg`` (its test id) to its
    median seconds, its group and its ``extra_info``.
    """

    legs: dict[str, dict[str, float]] = field(default_factory=dict)
    payload: dict[str, int] = field(default_factory=dict)
    others: dict[str, tuple[float, str, Mapping[str, Any]]] = field(default_factory=dict)

    def leg(self, group: str, leg: str) -> float | None:
        return self.legs.get(group, {}).get(leg)

    def ratio(self, group: str) -> float | None:
        """The baseline leg's median over the compiled leg's, in ``group``."""
        compiled, baseline = self.leg(group, "compiled"), self.leg(group, "baseline")
        if compiled is None or baseline is None or compiled <= 0:
            return None
        return baseline / compiled


Measure = Callable[[Run], "tuple[float, str] | None"]


@dataclass(frozen=True)
class Target:
    """``measure`` gives the figure and what it was measured on, or None when not run."""

    name: str
    goal: float
    at_least: bool  # met when the figure is >= goal (else <= goal)
    unit: str
    measure: Measure

    def line(self, run: Run) -> str:
        sign = ">=" if self.at_least else "<="
        wanted = f"{sign} {_number(self.goal, self.unit)}"
        measured = self.measure(run)
        if measured is None:
            return f"{self.name}: {wanted}: not measured in this run"
        value, where = measured
        met = value >= self.goal if self.at_least else value <= self.goal
        verdict = "met" if met else "NOT met"
        return f"{self.name}: {wanted}: {_number(value, self.unit)} ({where}): {verdict}"


def _number(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "calls/s":
        return f"{value:,.0f} calls/s"
    if unit == "GB/s":
        return f"{value:.1f} GB/s"
    if unit == "ms":
        return f"{value:.2f} ms"
    return f"{value:,.0f} {unit}"


def _cycle(group: str) -> Measure:
    """The ratio of ``group``'s legs timed in turn, else of its legs timed one after another.

    In turn (``test_bench_paired.py``) both legs see the same machine; one
    after another, a change of the machine's speed between them moves the
    ratio, so that figure is only the fallback (and is shown beside the other).
    """

    def measure(run: Run) -> tuple[float, str] | None:
        ratio = run.ratio(group)
        compiled = run.leg(group, "compiled")
        sequential = None if ratio is None else f"{ratio:.2f}x"
        paired = run.others.get(f"test_cycle_legs_in_turn[{group}]")
        if paired is not None and "ratio" in paired[2]:
            info = paired[2]
            where = f"legs in turn, compiled {float(info['compiled_ns']):.0f} ns"
            if sequential is not None:
                where += f"; one after another {sequential}"
            return float(info["ratio"]), where
        if ratio is None or compiled is None:
            return None
        return ratio, f"compiled {compiled * 1e9:.0f} ns"

    return measure


def _spread(run: Run) -> tuple[float, str] | None:
    """The spread of the scope counts timed in turn, else of those timed one after another."""
    medians = {
        group: legs["compiled"]
        for group, legs in run.legs.items()
        if group.startswith("live scopes:") and "compiled" in legs
    }
    sequential = max(medians.values()) / min(medians.values()) if len(medians) > 1 else None
    in_turn = run.others.get("test_live_scopes_in_turn")
    if in_turn is not None and "spread" in in_turn[2]:
        info = in_turn[2]
        counts = ", ".join(info.get("medians_ns", {}))
        where = f"slowest over fastest of {counts} scopes, in turn"
        where += _floor_note(info.get("medians_ns", {}), info.get("floor_ns", {}))
        if sequential is not None:
            where += f"; one after another {sequential:.2f}x"
        return float(info["spread"]), where
    if sequential is None:
        return None
    counts = ", ".join(group.removeprefix("live scopes: ") for group in medians)
    return sequential, f"slowest over fastest of {counts} scopes"


def _floor_note(medians: Mapping[str, float], floor: Mapping[str, float]) -> str:
    """How much of the slowest count's extra cost a dict look-up by run id alone takes."""
    if len(medians) < 2 or not set(medians) <= set(floor):
        return ""
    slow = max(medians, key=lambda count: medians[count])
    fast = min(medians, key=lambda count: medians[count])
    extra = float(medians[slow]) - float(medians[fast])
    lookup = float(floor[slow]) - float(floor[fast])
    return (
        f"; {extra:.0f} ns more at {slow} than at {fast}, "
        f"{lookup:.0f} ns of it in a dict look-up by run id alone"
    )


def _memory(run: Run) -> tuple[float, str] | None:
    for group, legs in run.legs.items():
        if group.startswith("memory:") and "unique call ids" in group and "compiled" in legs:
            return legs["compiled"], group.removeprefix("memory: ")
    return None


def _large_args(run: Run) -> tuple[float, str] | None:
    for group, legs in run.legs.items():
        if group.startswith("large args") and "compiled" in legs and group in run.payload:
            seconds = legs["compiled"]
            return run.payload[group] / seconds / 1e9, f"{run.payload[group]:,} bytes"
    return None


def _tail(key: str, scale: float, relative: bool) -> Measure:
    def measure(run: Run) -> tuple[float, str] | None:
        found = run.others.get("test_no_single_call_pauses")
        if found is None or key not in found[2]:
            return None
        info = found[2]
        value = float(info[key])
        if relative:
            value /= max(float(info["median_ns"]), 1.0)
        where = str(info.get("per", "tail run"))
        if key == "max_ns" and "floor_max_ns" in info:
            # The same loop with only its clock reads: a pause of the machine's own.
            where += f"; the machine's own slowest gap {float(info['floor_max_ns']) / 1e6:.2f} ms"
        return value / scale, where

    return measure


def _replay_leg(run: Run, jobs: int) -> tuple[float, Mapping[str, Any], str, float] | None:
    """The default ``--jobs`` leg: its median, extra_info and group; the json.loads median.

    At the issue's size (``test_replay_full``) when that ran, else in the comparison group.
    """
    full, full_base = run.others.get("test_replay_full"), run.others.get("test_json_loads_full")
    if full is not None and full_base is not None and full[0] > 0:
        return full[0], full[2], full[1], full_base[0]
    base = run.others.get("test_json_loads_lines")
    leg = run.others.get(f"test_replay_against_parsing[replay --jobs {jobs}]")
    if base is None or leg is None or leg[0] <= 0:
        return None
    return leg[0], leg[2], leg[1], base[0]


def _replay_over_parsing(jobs: int) -> Measure:
    def measure(run: Run) -> tuple[float, str] | None:
        found = _replay_leg(run, jobs)
        if found is None:
            return None
        median, _, group, base = found
        return base / median, f"--jobs {jobs}, {group}"

    return measure


def _replay_rate(jobs: int) -> Measure:
    def measure(run: Run) -> tuple[float, str] | None:
        found = _replay_leg(run, jobs)
        if found is None or "calls_per_s" not in found[1]:
            return None
        return float(found[1]["calls_per_s"]), f"--jobs {jobs}, {found[2]}"

    return measure


def targets(jobs: int) -> list[Target]:
    """The targets, with ``loopcore replay``'s default ``--jobs`` (the number of cores)."""
    return [
        Target("gateway cycle vs baseline", 35.0, True, "x", _cycle("gateway cycle")),
        Target("per-call cycle vs baseline", 30.0, True, "x", _cycle("per-call cycle")),
        Target("cost spread across live scopes", 1.5, False, "x", _spread),
        Target("memory per live scope, unique call ids", 2_500.0, False, "B", _memory),
        Target("20,000-char argument hashed", 5.0, True, "GB/s", _large_args),
        Target("slowest single cycle", 1.0, False, "ms", _tail("max_ns", 1e6, False)),
        Target("p99.9 cycle over the median", 10.0, False, "x", _tail("p999_ns", 1.0, True)),
        Target("replay over json.loads", 2.0, True, "x", _replay_over_parsing(jobs)),
        Target("replay throughput", 1_000_000.0, True, "calls/s", _replay_rate(jobs)),
    ]


def report(run: Run, jobs: int) -> list[str]:
    """One line per target: the goal, this run's figure and where it came from, met or not."""
    return [target.line(run) for target in targets(jobs)]

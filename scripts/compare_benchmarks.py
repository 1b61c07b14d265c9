"""Did a benchmark run get slower than the stored baseline? Ratios, not times.

Reads the JSON that ``pytest benchmarks --benchmark-json=FILE`` writes. For every
workload (a ``benchmark.group``) timed with the three legs of the ``leg`` fixture,
it takes the median of each leg and the ratios the README reports: how many
times faster the compiled core, and the pure-Python core, are than the
plain-Python baseline timed in the same run. Runners differ in speed from run to
run; a ratio of two legs timed side by side much less so. Two more of the same
kind are compared too: each ``loopcore replay`` leg against ``json.loads`` over
the same lines (``replay vs json.loads``, and ``replay at full size``), and the
spread of the compiled per-call cycle across the live-scope counts (``live
scopes spread``, fastest over slowest, so that a fall is a regression like the
others). The same ratios
timed with their legs in turn (``test_bench_paired.py`` and
``test_live_scopes_in_turn``, figures in ``extra_info``) are compared under
their own groups (``..., legs in turn``, ``live scopes, counts in turn``).

    python scripts/compare_benchmarks.py bench.json                 # exit 1 on a regression
    python scripts/compare_benchmarks.py bench.json [more.json] --write  # store the baseline

With several files, each ratio is the median over them. A ratio that fell by
more than ``--tolerance`` (default 20%) below the baseline fails the comparison;
workloads or ratios that the baseline does not have, or that this run lacks,
are listed and do not fail it. Benchmarks without a ``leg`` parameter (other
comparisons, such as the batch scan's) are listed as not compared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DEFAULT_BASELINE = Path(__file__).resolve().parent.parent / "benchmarks" / "baseline-ratios.json"
DEFAULT_TOLERANCE = 0.20

#: Each ratio is the numerator leg's median over the denominator leg's: > 1 is faster.
RATIOS = {
    "baseline/compiled": ("baseline", "compiled"),
    "baseline/python": ("baseline", "python"),
}

Ratios = dict[str, dict[str, float]]


#: The replay groups, each with its yardstick: ``json.loads`` over the trace's lines
#: (the comparison group at 100,000 calls, and the targets' group at full size).
REPLAY_YARDSTICKS = {
    "replay vs json.loads": "test_json_loads_lines",
    "replay at full size": "test_json_loads_full",
}
SCOPES_GROUP_PREFIX = "live scopes: "


def leg_medians(results: dict[str, Any]) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Median seconds per leg, per workload; and the benchmarks that have no leg.

    The replay-against-parsing group has no ``leg`` parameter: its benchmarks are
    kept under their test names, so that ``derived_ratios`` can compare them.
    """
    medians: dict[str, dict[str, float]] = {}
    unlegged: list[str] = []
    for bench in results.get("benchmarks", []):
        group = bench.get("group") or bench["name"]
        leg = (bench.get("params") or {}).get("leg")
        if leg is None and _yardstick(group) is not None:
            leg = str(bench["name"])
        if leg is None and _in_turn(bench):
            continue  # compared by in_turn_ratios
        if leg is None:
            unlegged.append(str(bench.get("fullname") or bench.get("name")))
            continue
        medians.setdefault(group, {})[leg] = float(bench["stats"]["median"])
    return medians, unlegged


def _yardstick(group: str) -> str | None:
    """The ``json.loads`` benchmark of a replay group, or None for any other group."""
    for prefix, name in REPLAY_YARDSTICKS.items():
        if group.startswith(prefix):
            return name
    return None


def derived_ratios(medians: dict[str, dict[str, float]]) -> Ratios:
    """The issue's ratios that are not baseline/leg: > 1 (or nearer 1) is better too.

    ``replay vs json.loads``: ``json.loads`` over the lines, per replay leg (how many
    times faster the replay is than merely parsing). ``live scopes spread``: the
    fastest compiled per-call cycle over the slowest across the scope counts (1 is
    flat).
    """
    out: Ratios = {}
    for group, legs in medians.items():
        parsing = _yardstick(group)
        if parsing is not None and parsing in legs:
            for name, median in legs.items():
                if name != parsing and median > 0.0:
                    label = name.partition("[")[2].rstrip("]") or name
                    out.setdefault(group, {})[f"json.loads/{label}"] = legs[parsing] / median
    compiled = [
        legs["compiled"]
        for group, legs in medians.items()
        if group.startswith(SCOPES_GROUP_PREFIX) and legs.get("compiled", 0.0) > 0.0
    ]
    if len(compiled) >= 2:
        out["live scopes spread"] = {"fastest/slowest compiled": min(compiled) / max(compiled)}
    return out


def _in_turn(bench: dict[str, Any]) -> dict[str, float] | None:
    """The ratio in the ``extra_info`` of a benchmark whose legs were timed in turn, named as
    the gate names it (``baseline/compiled``, or the spread as fastest/slowest); else None."""
    info = bench.get("extra_info") or {}
    if isinstance(info.get("ratio"), (int, float)) and info["ratio"] > 0:
        return {"baseline/compiled": float(info["ratio"])}
    if isinstance(info.get("spread"), (int, float)) and info["spread"] > 0:
        return {"fastest/slowest compiled": 1.0 / float(info["spread"])}
    return None


def in_turn_ratios(results: dict[str, Any]) -> Ratios:
    """The ratios of benchmarks that time their legs in turn, under their groups."""
    out: Ratios = {}
    for bench in results.get("benchmarks", []):
        found = _in_turn(bench)
        if found is not None:
            out.setdefault(bench.get("group") or bench["name"], {}).update(found)
    return out


def ratios_of(medians: dict[str, dict[str, float]]) -> Ratios:
    out: Ratios = {}
    for group, legs in medians.items():
        for name, (numerator, denominator) in RATIOS.items():
            if numerator in legs and legs.get(denominator, 0.0) > 0.0:
                out.setdefault(group, {})[name] = legs[numerator] / legs[denominator]
    return out


def median_ratios(runs: Sequence[Ratios]) -> Ratios:
    collected: dict[str, dict[str, list[float]]] = {}
    for run in runs:
        for group, ratios in run.items():
            for name, value in ratios.items():
                collected.setdefault(group, {}).setdefault(name, []).append(value)
    return {
        group: {name: statistics.median(values) for name, values in sorted(ratios.items())}
        for group, ratios in sorted(collected.items())
    }


def load_run(path: Path) -> tuple[Ratios, list[str]]:
    with path.open(encoding="utf-8") as f:
        results = json.load(f)
    medians, unlegged = leg_medians(results)
    return {**ratios_of(medians), **derived_ratios(medians), **in_turn_ratios(results)}, unlegged


def compare(current: Ratios, stored: Ratios, tolerance: float) -> tuple[list[str], list[str]]:
    """Report lines, and the lines that are regressions."""
    lines: list[str] = []
    regressions: list[str] = []
    width = max((len(group) for group in {*current, *stored}), default=10)
    for group in sorted({*current, *stored}):
        now, then = current.get(group, {}), stored.get(group, {})
        for name in sorted({*now, *then}):
            label = f"{group:<{width}}  {name:<26}"
            if name not in then:
                lines.append(f"{label}  {now[name]:7.2f}x  new: not in the baseline, not compared")
                continue
            if name not in now:
                lines.append(f"{label}  {'-':>8}  baseline {then[name]:.2f}x, not in this run")
                continue
            change = now[name] / then[name] - 1.0
            line = f"{label}  {now[name]:7.2f}x  baseline {then[name]:6.2f}x  {change:+7.1%}"
            if change < -tolerance:
                line += f"  REGRESSION (more than {tolerance:.0%} lower)"
                regressions.append(line)
            lines.append(line)
    return lines, regressions


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("results", nargs="+", type=Path, help="pytest-benchmark JSON file(s)")
    parser.add_argument("--baseline", type=Path, default=DEFAULT_BASELINE)
    parser.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help="largest allowed drop of a ratio, as a fraction (default 0.20)",
    )
    parser.add_argument(
        "--write", action="store_true", help="store this run's ratios as the baseline"
    )
    args = parser.parse_args(argv)

    runs = [load_run(path) for path in args.results]
    current = median_ratios([ratios for ratios, _ in runs])
    unlegged = sorted({name for _, names in runs for name in names})
    if not current:
        print("compare-benchmarks: no three-leg workload in the results", file=sys.stderr)
        return 2

    if args.write:
        document = {
            "about": "baseline/<leg> median ratios per workload, json.loads/<replay leg> "
            "and the live-scopes spread (fastest/slowest), also with legs timed in turn; "
            "written by scripts/compare_benchmarks.py --write",
            "runs": len(args.results),
            "ratios": {
                group: {name: round(value, 3) for name, value in ratios.items()}
                for group, ratios in current.items()
            },
        }
        args.baseline.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        print(
            f"compare-benchmarks: wrote {sum(map(len, current.values()))} ratios of "
            f"{len(current)} workloads to {args.baseline}"
        )
        return 0

    if not args.baseline.is_file():
        print(f"compare-benchmarks: no baseline at {args.baseline} (make one with --write)")
        return 2
    stored: Ratios = json.loads(args.baseline.read_text(encoding="utf-8"))["ratios"]
    lines, regressions = compare(current, stored, args.tolerance)
    print("\n".join(lines))
    for name in unlegged:
        print(f"not compared (no leg parameter): {name}")
    if regressions:
        print(f"compare-benchmarks: FAIL, {len(regressions)} ratio(s) regressed:")
        print("\n".join(regressions))
        return 1
    compared = sum(1 for line in lines if "baseline " in line and "not in this run" not in line)
    print(f"compare-benchmarks: OK, {compared} ratios within {args.tolerance:.0%} of the baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())

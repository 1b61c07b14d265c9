"""Does the regression gate compare the replay and spread ratios as it says? (no timing)

``scripts/compare_benchmarks.py`` on hand-made pytest-benchmark results.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import compare_benchmarks

REPLAY = "replay vs json.loads: 100,000 calls"


def _bench(name: str, group: str, median: float, leg: str | None = None) -> dict[str, Any]:
    params = {"leg": leg} if leg is not None else None
    return {"name": name, "fullname": f"x.py::{name}", "group": group, "params": params,
            "stats": {"median": median}}  # fmt: skip


def _results(replay: float, slowest: float) -> dict[str, Any]:
    return {
        "benchmarks": [
            _bench("test_json_loads_lines", REPLAY, 4.0),
            _bench("test_replay_against_parsing[replay --jobs 2]", REPLAY, replay),
            _bench("test_live[compiled-1]", "live scopes: 1", 1.0, "compiled"),
            _bench("test_live[baseline-1]", "live scopes: 1", 20.0, "baseline"),
            _bench("test_live[compiled-2]", "live scopes: 100,000", slowest, "compiled"),
            _bench("test_scan", "batch scan", 1.0),
        ]
    }


def _write(tmp_path: Path, name: str, results: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(results), encoding="utf-8")
    return path


def test_replay_and_spread_ratios_are_derived(tmp_path: Path) -> None:
    ratios, unlegged = compare_benchmarks.load_run(_write(tmp_path, "a.json", _results(2.0, 1.6)))
    assert ratios[REPLAY] == {"json.loads/replay --jobs 2": 2.0}
    assert ratios["live scopes spread"] == {"fastest/slowest compiled": 1.0 / 1.6}
    assert ratios["live scopes: 1"] == {"baseline/compiled": 20.0}
    assert unlegged == ["x.py::test_scan"]


def test_the_full_size_replay_is_compared_to_its_own_yardstick(tmp_path: Path) -> None:
    full = "replay at full size: 1,000,000 calls"
    results = _results(2.0, 1.6)
    results["benchmarks"] += [
        _bench("test_json_loads_full", full, 40.0),
        _bench("test_replay_full", full, 8.0),
    ]
    ratios, unlegged = compare_benchmarks.load_run(_write(tmp_path, "a.json", results))
    assert ratios[full] == {"json.loads/test_replay_full": 5.0}
    assert ratios[REPLAY] == {"json.loads/replay --jobs 2": 2.0}  # each with its own
    assert unlegged == ["x.py::test_scan"]


def test_a_slower_replay_or_a_wider_spread_is_a_regression(tmp_path: Path) -> None:
    baseline = tmp_path / "ratios.json"
    stored = _write(tmp_path, "a.json", _results(2.0, 1.5))
    assert compare_benchmarks.main([str(stored), "--write", "--baseline", str(baseline)]) == 0
    same = _write(tmp_path, "b.json", _results(2.1, 1.6))
    assert compare_benchmarks.main([str(same), "--baseline", str(baseline)]) == 0
    slower = _write(tmp_path, "c.json", _results(3.0, 1.5))  # 4/3 against 4/2: -33%
    assert compare_benchmarks.main([str(slower), "--baseline", str(baseline)]) == 1
    wider = _write(tmp_path, "d.json", _results(2.0, 2.5))  # 1/2.5 against 1/1.5: -40%
    assert compare_benchmarks.main([str(wider), "--baseline", str(baseline)]) == 1


def test_ratios_of_legs_timed_in_turn_are_compared(tmp_path: Path) -> None:
    def results(ratio: float, spread: float) -> dict[str, Any]:
        paired = _bench(
            "test_cycle_legs_in_turn[gateway cycle]", "gateway cycle, legs in turn", 1.0
        )
        paired["extra_info"] = {"ratio": ratio, "compiled_ns": 600.0}
        scopes = _bench("test_live_scopes_in_turn", "live scopes, counts in turn", 1.0)
        scopes["extra_info"] = {"spread": spread, "medians_ns": {"1": 800.0}}
        return {"benchmarks": [paired, scopes, _bench("test_scan", "batch scan", 1.0)]}

    ratios, unlegged = compare_benchmarks.load_run(_write(tmp_path, "a.json", results(30.0, 2.0)))
    assert ratios["gateway cycle, legs in turn"] == {"baseline/compiled": 30.0}
    assert ratios["live scopes, counts in turn"] == {"fastest/slowest compiled": 0.5}
    assert unlegged == ["x.py::test_scan"]
    baseline = tmp_path / "ratios.json"
    stored = _write(tmp_path, "b.json", results(30.0, 2.0))
    assert compare_benchmarks.main([str(stored), "--write", "--baseline", str(baseline)]) == 0
    assert compare_benchmarks.main([str(_write(tmp_path, "c.json", results(27.0, 2.3))),
                                    "--baseline", str(baseline)]) == 0  # fmt: skip
    slower = _write(tmp_path, "d.json", results(20.0, 2.0))  # -33%
    assert compare_benchmarks.main([str(slower), "--baseline", str(baseline)]) == 1
    wider = _write(tmp_path, "e.json", results(30.0, 3.0))  # 1/3 against 1/2: -33%
    assert compare_benchmarks.main([str(wider), "--baseline", str(baseline)]) == 1

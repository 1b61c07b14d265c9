"""Does the targets summary judge a run's figures as it says? (``targets.py``, no timing)"""

from __future__ import annotations

from targets import Run, report

JOBS = 2


def _lines(run: Run) -> dict[str, str]:
    """Each target's line, by target name."""
    return {line.split(":", 1)[0]: line for line in report(run, JOBS)}


def test_nothing_measured_is_said_so() -> None:
    lines = _lines(Run())
    assert len(lines) == 9
    assert all(line.endswith("not measured in this run") for line in lines.values())


def test_cycle_ratios_are_baseline_over_compiled() -> None:
    run = Run(legs={"gateway cycle": {"compiled": 500e-9, "baseline": 20e-6, "python": 30e-6}})
    run.legs["per-call cycle"] = {"compiled": 1e-6, "baseline": 20e-6}
    lines = _lines(run)
    assert lines["gateway cycle vs baseline"].endswith("40.00x (compiled 500 ns): met")
    assert lines["per-call cycle vs baseline"].endswith("20.00x (compiled 1000 ns): NOT met")


def test_a_cycle_without_its_baseline_is_not_measured() -> None:
    lines = _lines(Run(legs={"gateway cycle": {"compiled": 500e-9}}))
    assert lines["gateway cycle vs baseline"].endswith("not measured in this run")


def test_spread_is_the_slowest_scope_count_over_the_fastest() -> None:
    run = Run(
        legs={
            "live scopes: 1": {"compiled": 1.0e-6, "baseline": 9.0},
            "live scopes: 1,000": {"compiled": 1.2e-6},
            "live scopes: 100,000": {"compiled": 1.4e-6},
        }
    )
    line = _lines(run)["cost spread across live scopes"]
    assert "1.40x" in line
    assert "1, 1,000, 100,000 scopes" in line
    assert line.endswith(": met")
    run.legs["live scopes: 100,000"]["compiled"] = 3.0e-6
    assert _lines(run)["cost spread across live scopes"].endswith(
        "3.00x (slowest over fastest of 1, 1,000, 100,000 scopes): NOT met"
    )


def test_one_scope_count_is_no_spread() -> None:
    run = Run(legs={"live scopes: 1": {"compiled": 1.0e-6}})
    assert _lines(run)["cost spread across live scopes"].endswith("not measured in this run")


def test_memory_reads_the_unique_ids_figure() -> None:
    run = Run(
        legs={
            "memory: 100 scopes x 30 calls (per scope)": {"compiled": 9_999.0},
            "memory: 100 scopes x 30 calls, unique call ids (per scope)": {"compiled": 2_400.0},
        }
    )
    line = _lines(run)["memory per live scope, unique call ids"]
    assert "2,400 B" in line
    assert line.endswith(": met")


def test_large_args_throughput_uses_the_payload() -> None:
    group = "large args: 20,000-char string"
    run = Run(legs={group: {"compiled": 4e-6}}, payload={group: 20_000})
    assert _lines(run)["20,000-char argument hashed"].endswith("5.0 GB/s (20,000 bytes): met")
    run.legs[group]["compiled"] = 8e-6
    assert _lines(run)["20,000-char argument hashed"].endswith("2.5 GB/s (20,000 bytes): NOT met")


def test_tail_figures_come_from_the_tail_benchmark() -> None:
    info = {"per": "10 cycles over 2 scopes", "median_ns": 1_000, "p999_ns": 12_000,
            "max_ns": 900_000}  # fmt: skip
    run = Run(others={"test_no_single_call_pauses": (1.0, "tail latency", info)})
    lines = _lines(run)
    assert lines["slowest single cycle"].endswith("0.90 ms (10 cycles over 2 scopes): met")
    assert lines["p99.9 cycle over the median"].endswith(
        "12.00x (10 cycles over 2 scopes): NOT met"
    )
    # The machine's own floor, when the run measured it, goes beside the slowest cycle.
    info["floor_max_ns"] = 2_500_000
    lines = _lines(run)
    assert lines["slowest single cycle"].endswith(
        "0.90 ms (10 cycles over 2 scopes; the machine's own slowest gap 2.50 ms): met"
    )
    assert lines["p99.9 cycle over the median"].endswith("(10 cycles over 2 scopes): NOT met")


def test_replay_is_judged_on_the_default_jobs_leg() -> None:
    group = "replay vs json.loads: 1,000 calls"
    run = Run(
        others={
            "test_json_loads_lines": (3.0, group, {}),
            "test_replay_against_parsing[replay --jobs 1]": (1.0, group, {"calls_per_s": 9e9}),
            f"test_replay_against_parsing[replay --jobs {JOBS}]": (
                2.0,
                group,
                {"calls_per_s": 500_000},
            ),
        }
    )
    lines = _lines(run)
    assert lines["replay over json.loads"].endswith(f"1.50x (--jobs {JOBS}, {group}): NOT met")
    assert lines["replay throughput"].endswith(f"500,000 calls/s (--jobs {JOBS}, {group}): NOT met")


def test_replay_at_full_size_wins_over_the_comparison_group() -> None:
    group, full = "replay vs json.loads: 1,000 calls", "replay at full size: 10,000 calls"
    run = Run(
        others={
            "test_json_loads_lines": (3.0, group, {}),
            f"test_replay_against_parsing[replay --jobs {JOBS}]": (
                2.0,
                group,
                {"calls_per_s": 500_000},
            ),
            "test_json_loads_full": (30.0, full, {}),
            "test_replay_full": (10.0, full, {"calls_per_s": 1_000_000}),
        }
    )
    lines = _lines(run)
    assert lines["replay over json.loads"].endswith(f"3.00x (--jobs {JOBS}, {full}): met")
    assert lines["replay throughput"].endswith(f"1,000,000 calls/s (--jobs {JOBS}, {full}): met")
    # Without its yardstick the full-size leg is not judged: the comparison group is.
    del run.others["test_json_loads_full"]
    assert _lines(run)["replay throughput"].endswith(f"(--jobs {JOBS}, {group}): NOT met")


def test_cycle_legs_in_turn_win_over_legs_one_after_another() -> None:
    run = Run(legs={"gateway cycle": {"compiled": 500e-9, "baseline": 20e-6}})
    info = {"compiled_ns": 800.0, "baseline_ns": 24_000.0, "ratio": 30.0}
    run.others["test_cycle_legs_in_turn[gateway cycle]"] = (1e-3, "gateway cycle, in turn", info)
    line = _lines(run)["gateway cycle vs baseline"]
    assert line.endswith(
        "30.00x (legs in turn, compiled 800 ns; one after another 40.00x): NOT met"
    )
    # The per-call cycle has no figure in turn here: its legs one after another decide.
    run.legs["per-call cycle"] = {"compiled": 1e-6, "baseline": 31e-6}
    assert _lines(run)["per-call cycle vs baseline"].endswith("31.00x (compiled 1000 ns): met")


def test_a_cycle_timed_in_turn_alone_is_measured() -> None:
    info = {"compiled_ns": 500.0, "baseline_ns": 20_000.0, "ratio": 40.0}
    run = Run(others={"test_cycle_legs_in_turn[per-call cycle]": (1e-3, "g", info)})
    line = _lines(run)["per-call cycle vs baseline"]
    assert line.endswith("40.00x (legs in turn, compiled 500 ns): met")


def test_spread_in_turn_wins_over_counts_one_after_another() -> None:
    run = Run(
        legs={"live scopes: 1": {"compiled": 1.0e-6}, "live scopes: 1,000": {"compiled": 3e-6}}
    )
    info = {"medians_ns": {"1": 900.0, "1,000": 1_000.0, "100,000": 1_260.0}, "spread": 1.4}
    run.others["test_live_scopes_in_turn"] = (1e-3, "live scopes, counts in turn", info)
    line = _lines(run)["cost spread across live scopes"]
    assert line.endswith(
        "1.40x (slowest over fastest of 1, 1,000, 100,000 scopes, in turn; "
        "one after another 3.00x): met"
    )
    info["floor_ns"] = {"1": 300.0, "1,000": 400.0, "100,000": 600.0}
    assert _lines(run)["cost spread across live scopes"].endswith(
        "1.40x (slowest over fastest of 1, 1,000, 100,000 scopes, in turn; 360 ns more at "
        "100,000 than at 1, 300 ns of it in a dict look-up by run id alone; "
        "one after another 3.00x): met"
    )
    del info["floor_ns"]
    info["spread"] = 1.6
    del run.legs["live scopes: 1,000"]
    assert _lines(run)["cost spread across live scopes"].endswith(
        "1.60x (slowest over fastest of 1, 1,000, 100,000 scopes, in turn): NOT met"
    )

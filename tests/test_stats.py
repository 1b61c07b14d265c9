"""The guard's counters and their frozen snapshots (SPEC §9.6, §12.14)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections import Counter as Tally
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore._stats import ACTIONS, Counters, GuardStats

GENERIC = "generic_repeat"
POLL = "known_poll_no_progress"
ABORT_KEY = ("compaction_loop_persisted", "critical", "aborted")


def test_a_fresh_tally_is_all_zero() -> None:
    stats = Counters().snapshot(calls=0, live_scopes=0)
    assert stats == GuardStats()
    assert dict(stats.by_detector) == {}
    assert dict(stats.by_outcome) == {}


def test_warnings_count_per_detector_and_outcome() -> None:
    counters = Counters()
    counters.warned(GENERIC, "warning")
    counters.warned(GENERIC, "warning")
    counters.warned(POLL, "warning")
    stats = counters.snapshot(calls=30, live_scopes=1)
    assert (stats.calls, stats.warnings, stats.blocks, stats.live_scopes) == (30, 3, 0, 1)
    assert dict(stats.by_detector) == {GENERIC: 2, POLL: 1}
    assert dict(stats.by_outcome) == {
        (GENERIC, "warning", "warned"): 2,
        (POLL, "warning", "warned"): 1,
    }


def test_a_terminal_block_counts_in_blocks_and_terminations_and_once_in_by_outcome() -> None:
    counters = Counters()
    counters.blocked(GENERIC, "critical", terminal=False)
    counters.blocked(GENERIC, "critical", terminal=True)
    stats = counters.snapshot(calls=2, live_scopes=1)
    assert (stats.blocks, stats.terminations) == (2, 1)
    assert dict(stats.by_detector) == {GENERIC: 2}
    assert dict(stats.by_outcome) == {
        (GENERIC, "critical", "blocked"): 1,
        (GENERIC, "critical", "terminated"): 1,
    }


def test_an_abort_is_counted_under_compaction_loop_persisted() -> None:
    counters = Counters()
    counters.aborted()
    stats = counters.snapshot(calls=5, live_scopes=1)
    assert (stats.aborts, stats.blocks, stats.terminations) == (1, 0, 0)
    assert dict(stats.by_outcome) == {ABORT_KEY: 1}
    # by_detector is warnings and blocks only.
    assert dict(stats.by_detector) == {}


def test_a_run_stop_ends_the_run_under_the_cutoff_name() -> None:
    counters = Counters()
    counters.run_stopped("turnLimit")
    counters.run_stopped("turnLimit")
    counters.run_stopped("maxIdleRepeatCalls")
    stats = counters.snapshot(calls=0, live_scopes=0)
    assert (stats.run_stops, stats.terminations, stats.blocks) == (3, 0, 0)
    assert dict(stats.by_outcome) == {
        ("turnLimit", "critical", "terminated"): 2,
        ("maxIdleRepeatCalls", "critical", "terminated"): 1,
    }
    assert dict(stats.by_detector) == {}


def test_shadow_actions_have_their_own_counters_and_the_shadow_action() -> None:
    counters = Counters()
    counters.shadow(GENERIC, "critical", "block")
    counters.shadow(GENERIC, "critical", "block")
    counters.shadow("compaction_loop_persisted", "critical", "abort")
    counters.shadow("turnLimit", "critical", "run_stop")
    stats = counters.snapshot(calls=9, live_scopes=1)
    assert (stats.shadow_blocks, stats.shadow_aborts) == (2, 1)
    # Nothing was really blocked, aborted or stopped.
    assert (stats.blocks, stats.terminations, stats.aborts, stats.run_stops) == (0, 0, 0, 0)
    assert dict(stats.by_detector) == {}
    assert dict(stats.by_outcome) == {
        (GENERIC, "critical", "shadow"): 2,
        ("compaction_loop_persisted", "critical", "shadow"): 1,
        ("turnLimit", "critical", "shadow"): 1,
    }


def test_an_unknown_shadow_kind_is_refused_and_counts_nothing() -> None:
    counters = Counters()
    with pytest.raises(ValueError, match=r"^kind: expected 'block', 'abort' or 'run_stop', got"):
        counters.shadow(GENERIC, "critical", "warn")  # type: ignore[arg-type]
    assert counters.snapshot(calls=0, live_scopes=0) == GuardStats()


def test_scope_counts_come_from_the_tally_unless_the_caller_gives_them() -> None:
    counters = Counters()
    counters.ended()
    counters.ended(3)
    counters.evicted(2)
    counters.store_error()
    own = counters.snapshot(calls=1, live_scopes=7)
    assert (own.ended_scopes, own.evicted_scopes, own.store_errors, own.live_scopes) == (4, 2, 1, 7)
    native = counters.snapshot(
        calls=1, live_scopes=7, evicted_scopes=40, ended_scopes=50, store_errors=60
    )
    assert (native.evicted_scopes, native.ended_scopes, native.store_errors) == (40, 50, 60)


@pytest.mark.parametrize("n", [-1, True, 1.0, "2"])
def test_scope_increments_must_be_non_negative_ints(n: Any) -> None:
    counters = Counters()
    with pytest.raises(ValueError, match=r"^n: expected a non-negative integer, got "):
        counters.ended(n)
    with pytest.raises(ValueError, match=r"^n: expected a non-negative integer, got "):
        counters.evicted(n)
    assert counters.snapshot(calls=0, live_scopes=0) == GuardStats()


@pytest.mark.parametrize(
    ("keyword", "value", "shown"),
    [("calls", -3, "-3"), ("live_scopes", True, "True"), ("evicted_scopes", 2.5, "2.5")],
)
def test_snapshot_numbers_are_checked(keyword: str, value: Any, shown: str) -> None:
    kwargs: dict[str, Any] = {"calls": 0, "live_scopes": 0, keyword: value}
    with pytest.raises(ValueError, match=rf"^{keyword}: expected a non-negative integer, got "):
        Counters().snapshot(**kwargs)
    with pytest.raises(ValueError, match=rf"got {shown}$"):
        GuardStats(**{keyword: value})


def test_a_snapshot_never_changes_after_it_is_taken() -> None:
    counters = Counters()
    counters.warned(GENERIC, "warning")
    counters.blocked(GENERIC, "critical", terminal=False)
    before = counters.snapshot(calls=3, live_scopes=1)
    counters.warned(POLL, "warning")
    counters.blocked(GENERIC, "critical", terminal=True)
    counters.evicted()
    assert before.warnings == 1
    assert before.blocks == 1
    assert before.evicted_scopes == 0
    assert dict(before.by_detector) == {GENERIC: 2}
    assert dict(before.by_outcome) == {
        (GENERIC, "warning", "warned"): 1,
        (GENERIC, "critical", "blocked"): 1,
    }
    with pytest.raises(TypeError):
        before.by_detector[GENERIC] = 0  # type: ignore[index]
    with pytest.raises(TypeError):
        before.by_outcome[(GENERIC, "warning", "warned")] = 0  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.blocks = 9  # type: ignore[misc]


def test_a_snapshot_built_from_dicts_holds_copies() -> None:
    by_detector = {GENERIC: 1}
    by_outcome = {(GENERIC, "warning", "warned"): 1}
    stats = GuardStats(warnings=1, by_detector=by_detector, by_outcome=by_outcome)
    by_detector[GENERIC] = 99
    by_outcome[(POLL, "warning", "warned")] = 5
    assert dict(stats.by_detector) == {GENERIC: 1}
    assert dict(stats.by_outcome) == {(GENERIC, "warning", "warned"): 1}


def test_snapshots_pickle_copy_and_replace() -> None:
    counters = Counters()
    counters.warned(GENERIC, "warning")
    counters.blocked(POLL, "critical", terminal=True)
    stats = counters.snapshot(calls=4, live_scopes=2, evicted_scopes=1)
    for clone in (pickle.loads(pickle.dumps(stats)), copy.deepcopy(stats), copy.copy(stats)):
        assert clone == stats
        assert clone.by_outcome == stats.by_outcome
        with pytest.raises(TypeError):
            clone.by_detector[GENERIC] = 0  # type: ignore[index]
    replaced = dataclasses.replace(stats, calls=10)
    assert (replaced.calls, replaced.blocks) == (10, 1)
    assert dict(replaced.by_detector) == dict(stats.by_detector)


def test_as_dict_gives_plain_copies() -> None:
    counters = Counters()
    counters.warned(GENERIC, "warning")
    stats = counters.snapshot(calls=1, live_scopes=1)
    out = stats.as_dict()
    assert type(out["by_detector"]) is dict
    assert type(out["by_outcome"]) is dict
    out["by_detector"][GENERIC] = 50
    assert stats.by_detector[GENERIC] == 1
    assert set(out) == {f.name for f in dataclasses.fields(GuardStats)}
    assert GuardStats(**out).by_detector == {GENERIC: 50}


def test_counters_have_no_instance_dict() -> None:
    with pytest.raises(AttributeError):
        Counters().calls = 1  # type: ignore[attr-defined]


# --- a property: any sequence of events is tallied as a plain model counts it -------------

DETECTORS = st.sampled_from([GENERIC, POLL, "ping_pong", "loop_admission_failure"])
EVENTS = st.one_of(
    st.tuples(st.just("warned"), DETECTORS),
    st.tuples(st.just("blocked"), DETECTORS, st.booleans()),
    st.tuples(st.just("aborted")),
    st.tuples(st.just("run_stopped"), st.sampled_from(["turnLimit", "maxIdleRepeatCalls"])),
    st.tuples(st.just("shadow"), DETECTORS, st.sampled_from(["block", "abort", "run_stop"])),
)


@given(st.lists(EVENTS, max_size=60))
def test_any_event_sequence_matches_a_model(events: list[tuple[Any, ...]]) -> None:
    counters = Counters()
    outcome: Tally[tuple[str, str, str]] = Tally()
    detector: Tally[str] = Tally()
    totals: Tally[str] = Tally()
    for event in events:
        name = event[0]
        if name == "warned":
            counters.warned(event[1], "warning")
            outcome[(event[1], "warning", "warned")] += 1
            detector[event[1]] += 1
            totals["warnings"] += 1
        elif name == "blocked":
            counters.blocked(event[1], "critical", terminal=event[2])
            outcome[(event[1], "critical", "terminated" if event[2] else "blocked")] += 1
            detector[event[1]] += 1
            totals["blocks"] += 1
            totals["terminations"] += event[2]
        elif name == "aborted":
            counters.aborted()
            outcome[ABORT_KEY] += 1
            totals["aborts"] += 1
        elif name == "run_stopped":
            counters.run_stopped(event[1])
            outcome[(event[1], "critical", "terminated")] += 1
            totals["run_stops"] += 1
        else:
            counters.shadow(event[1], "critical", event[2])
            outcome[(event[1], "critical", "shadow")] += 1
            totals["shadow_blocks"] += event[2] == "block"
            totals["shadow_aborts"] += event[2] == "abort"
    stats = counters.snapshot(calls=len(events), live_scopes=0)
    assert dict(stats.by_outcome) == dict(outcome)
    assert dict(stats.by_detector) == dict(detector)
    for name in ("warnings", "blocks", "terminations", "aborts", "run_stops"):
        assert getattr(stats, name) == totals[name], name
    assert (stats.shadow_blocks, stats.shadow_aborts) == (
        totals["shadow_blocks"],
        totals["shadow_aborts"],
    )
    assert stats.terminations <= stats.blocks
    assert {key[2] for key in stats.by_outcome} <= set(ACTIONS)

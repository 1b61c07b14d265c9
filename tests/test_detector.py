"""LoopDetector: history (SPEC §3) and the detection table (SPEC §4)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore import (
    UNSET,
    DetectorSwitches,
    LoopDetectionConfig,
    LoopDetector,
    hash_call,
    hash_outcome,
)

# Runs on both twins (see conftest).
pytestmark = pytest.mark.usefixtures("twin")

# Small thresholds so every edge is a handful of calls away.
WARN, CRIT, GLOBAL, UNKNOWN, HISTORY = 3, 5, 7, 3, 20

LOOP_VETO = {"details": {"status": "blocked", "deniedReason": "tool-loop"}}

READ_A = ("read", {"path": "a.txt"})
READ_B = ("read", {"path": "b.txt"})
WRITE_B = ("write", {"path": "b.txt", "text": "hi"})
LIST_C = ("list", {"dir": "/tmp"})
STATUS = ("command_status", {"commandId": "cmd-1"})
POLL = ("process", {"action": "poll", "sessionId": "p-1"})
LOG = ("process", {"action": "log", "sessionId": "p-1"})
KILL = ("process", {"action": "kill", "sessionId": "p-1"})


def make(
    *,
    enabled: bool | None = True,
    history: int = HISTORY,
    warning: int = WARN,
    critical: int = CRIT,
    global_: int = GLOBAL,
    unknown: int = UNKNOWN,
    generic: bool = True,
    known_poll: bool = True,
    ping_pong: bool = True,
    **kwargs: Any,
) -> LoopDetector:
    config = LoopDetectionConfig(
        enabled=enabled,
        history_size=history,
        warning_threshold=warning,
        critical_threshold=critical,
        unknown_tool_threshold=unknown,
        global_circuit_breaker_threshold=global_,
        detectors=DetectorSwitches(
            generic_repeat=generic, known_poll_no_progress=known_poll, ping_pong=ping_pong
        ),
    )
    return LoopDetector(config, **kwargs)


def run(
    det: LoopDetector,
    call: tuple[str, Any],
    *,
    result: Any = UNSET,
    error: Any = UNSET,
    **scope: Any,
) -> None:
    """One executed call as a gateway reports it: record first, outcome afterwards."""
    tool, args = call
    det.record_call(tool, args, **scope)
    det.record_outcome(tool, args, result=result, error=error, **scope)


def repeat(det: LoopDetector, n: int, call: tuple[str, Any], result: Any = "same") -> None:
    for _ in range(n):
        run(det, call, result=result)


def alternate(det: LoopDetector, n: int, first: tuple, second: tuple) -> None:
    """n records reading first, second, first, ... each with a constant result per side."""
    for i in range(n):
        run(det, first if i % 2 == 0 else second, result="r-first" if i % 2 == 0 else "r-second")


def check(det: LoopDetector, call: tuple[str, Any], **scope: Any) -> Any:
    return det.check(call[0], call[1], **scope)


def assert_clear(verdict: Any) -> None:
    assert verdict.stuck is False
    assert not verdict
    assert verdict.level is None
    assert verdict.detector is None
    assert verdict.count == 0
    assert verdict.message is None
    assert verdict.paired_tool_name is None
    assert verdict.warning_key is None


def assert_verdict(
    verdict: Any, level: str, detector: str, count: int, tool: str, *words: str
) -> None:
    assert (verdict.level, verdict.detector, verdict.count) == (level, detector, count)
    assert verdict.stuck is True
    assert bool(verdict) is True
    message = verdict.message
    assert message.startswith("WARNING:" if level == "warning" else "CRITICAL:")
    assert re.search(rf"(?<!\d){count} times", message), message
    assert tool in message
    for word in words:
        assert word in message
    assert verdict.warning_key is not None


def fields(record: Any) -> tuple:
    return (
        record.tool_name,
        record.args_hash,
        record.tool_call_id,
        record.session,
        record.run_id,
        record.result_hash,
        record.unknown_tool_name,
    )


# --------------------------------------------------------------------------- history (§3)


def test_call_record_fields() -> None:
    det = make()
    before = time.time()
    assert det.record_call("read", {"path": "a"}, "call-1", session="s1", run_id=" r1 ") is None
    after = time.time()
    (record,) = det.history(session="s1", run_id="r1")
    assert record.tool_name == "read"
    assert record.args_hash == hash_call("read", {"path": "a"})
    assert record.tool_call_id == "call-1"
    assert record.session == "s1"
    assert record.run_id == "r1"
    assert record.result_hash is None
    assert record.unknown_tool_name is None
    assert isinstance(record.timestamp, float)
    assert before - 1.0 <= record.timestamp <= after + 1.0


def test_run_id_is_normalised_everywhere() -> None:
    det = make()
    det.record_call("read", {}, run_id=" r1 ")
    det.record_call("read", {}, run_id="r1")
    det.record_call("read", {}, run_id="   ")
    det.record_call("read", {}, run_id="")
    assert [r.run_id for r in det.history(run_id="r1")] == ["r1", "r1"]
    assert len(det.history(run_id="\tr1\n")) == 2
    unscoped = det.history()
    assert [r.run_id for r in unscoped] == [None, None]
    assert len(det.history(run_id="  ")) == 2


def test_history_is_oldest_first_and_ring_drops_oldest() -> None:
    det = make(history=4)
    for i in range(6):
        det.record_call("read", {"i": i})
    hashes = [r.args_hash for r in det.history()]
    assert hashes == [hash_call("read", {"i": i}) for i in range(2, 6)]


def test_record_call_without_result_stays_pending() -> None:
    det = make()
    det.record_call("read", {"p": 1}, "c1")
    det.record_call("read", {"p": 1})
    assert [r.result_hash for r in det.history()] == [None, None]
    assert [r.tool_call_id for r in det.history()] == ["c1", None]


def test_record_outcome_fills_newest_pending_first() -> None:
    det = make()
    det.record_call("read", {"p": 1})
    det.record_call("read", {"p": 1})
    first = det.record_outcome("read", {"p": 1}, result="one")
    h_one = hash_outcome("read", {"p": 1}, result="one")[0]
    h_two = hash_outcome("read", {"p": 1}, result="two")[0]
    h_three = hash_outcome("read", {"p": 1}, result="three")[0]
    assert [r.result_hash for r in det.history()] == [None, h_one]
    assert first is not None
    assert fields(first) == fields(det.history()[1])

    second = det.record_outcome("read", {"p": 1}, result="two")
    assert [r.result_hash for r in det.history()] == [h_two, h_one]
    assert fields(second) == fields(det.history()[0])

    # Nothing pending any more: the outcome becomes a record of its own.
    third = det.record_outcome("read", {"p": 1}, result="three")
    history = det.history()
    assert [r.result_hash for r in history] == [h_two, h_one, h_three]
    assert fields(third) == fields(history[2])
    assert third.args_hash == hash_call("read", {"p": 1})


def test_record_outcome_only_fills_same_tool_and_args() -> None:
    det = make()
    det.record_call("read", {"p": 1})
    det.record_call("write", {"p": 2})
    det.record_outcome("read", {"p": 2}, result="x")
    det.record_outcome("cat", {"p": 1}, result="x")
    history = det.history()
    assert len(history) == 4
    assert history[0].result_hash is None
    assert history[1].result_hash is None
    assert (history[2].tool_name, history[2].args_hash) == ("read", hash_call("read", {"p": 2}))
    assert (history[3].tool_name, history[3].args_hash) == ("cat", hash_call("cat", {"p": 1}))
    # The pending write is filled by its own outcome even though a newer read record exists.
    det.record_outcome("write", {"p": 2}, result="y")
    assert det.history()[1].result_hash == hash_outcome("write", {"p": 2}, result="y")[0]
    assert len(det.history()) == 4


def test_record_outcome_respects_tool_call_id() -> None:
    det = make()
    det.record_call("read", {"p": 1}, "c1")
    det.record_call("read", {"p": 1}, "c2")
    record = det.record_outcome("read", {"p": 1}, result="for-c1", tool_call_id="c1")
    history = det.history()
    assert record.tool_call_id == "c1"
    assert history[0].result_hash == hash_outcome("read", {"p": 1}, result="for-c1")[0]
    assert history[1].result_hash is None

    # SPEC §9.1 (c): an id no pending record carries fills the newest pending
    # record of the same call (the host rewrote the id), keeping its id.
    other = det.record_outcome("read", {"p": 1}, result="x", tool_call_id="c3")
    history = det.history()
    assert len(history) == 2
    assert history[1].tool_call_id == "c2"
    assert history[1].result_hash == hash_outcome("read", {"p": 1}, result="x")[0]
    assert fields(other) == fields(history[1])

    # With nothing pending, an outcome is appended as a record of its own.
    det.record_outcome("read", {"p": 1}, result="y")
    history = det.history()
    assert len(history) == 3
    assert history[2].result_hash == hash_outcome("read", {"p": 1}, result="y")[0]


def test_record_outcome_with_same_id_but_other_args_appends() -> None:
    det = make()
    det.record_call("read", {"p": 1}, "c1")
    det.record_outcome("read", {"p": 2}, result="x", tool_call_id="c1")
    history = det.history()
    assert len(history) == 2
    assert history[0].result_hash is None


def test_record_outcome_appended_record_carries_scope_and_error() -> None:
    det = make()
    before = time.time()
    record = det.record_outcome(
        "ghost", {"q": 1}, error="Unknown tool: ghost", tool_call_id="t9", session="s", run_id="r"
    )
    after = time.time()
    expected_hash, expected_name = hash_outcome("ghost", {"q": 1}, error="Unknown tool: ghost")
    assert record.result_hash == expected_hash
    assert record.unknown_tool_name == expected_name == "ghost"
    assert (record.session, record.run_id, record.tool_call_id) == ("s", "r", "t9")
    assert before - 1.0 <= record.timestamp <= after + 1.0
    assert [fields(r) for r in det.history(session="s", run_id="r")] == [fields(record)]


def test_record_outcome_records_a_loop_veto() -> None:
    # SPEC §8.1: a veto fills the pending call (no result hash), else it is appended.
    det = make()
    det.record_call("read", {"p": 1})
    veto = det.record_outcome("read", {"p": 1}, result=LOOP_VETO)
    assert veto is not None
    assert (veto.result_hash, veto.outcome_kind) == (None, "tool-loop-veto")
    assert veto.complete
    det.record_outcome("other", {"p": 1}, result=LOOP_VETO, tool_call_id="v1")
    again = det.record_outcome("other", {"p": 1}, result=LOOP_VETO, tool_call_id="v1")
    assert again is not None
    assert again.tool_call_id == "v1"
    assert [r.outcome_kind for r in det.history()] == ["tool-loop-veto"] * 2  # idempotent


@pytest.mark.parametrize(
    "outcome",
    [{}, {"error": None}],
    ids=["nothing", "error-none"],
)
def test_record_outcome_without_hash_records_nothing(outcome: dict) -> None:
    det = make()
    det.record_call("read", {"p": 1})
    assert det.record_outcome("read", {"p": 1}, **outcome) is None
    assert [r.result_hash for r in det.history()] == [None]
    assert det.record_outcome("other", {"p": 1}, **outcome) is None
    assert len(det.history()) == 1


def test_result_none_is_a_real_outcome() -> None:
    det = make()
    det.record_call("read", {"p": 1})
    record = det.record_outcome("read", {"p": 1}, result=None)
    assert record is not None
    assert record.result_hash is not None
    assert det.history()[0].result_hash == record.result_hash


# --------------------------------------------------------------------------- scoping


def test_sessions_and_runs_have_separate_histories() -> None:
    det = make()
    scopes = [
        {},
        {"session": "s1"},
        {"session": "s2"},
        {"run_id": "r1"},
        {"session": "s1", "run_id": "r1"},
        {"session": "s1", "run_id": "r2"},
    ]
    for n, scope in enumerate(scopes, start=1):
        for i in range(n):
            det.record_call("read", {"i": i}, **scope)
    for n, scope in enumerate(scopes, start=1):
        history = det.history(**scope)
        assert len(history) == n
        assert all(r.session == scope.get("session") for r in history)
        assert all(r.run_id == scope.get("run_id") for r in history)


def test_one_scope_never_pushes_out_another() -> None:
    det = make(history=3)
    det.record_call("read", {"keep": 1}, run_id="r1")
    det.record_call("read", {"keep": 2}, run_id="r1")
    for i in range(10):
        det.record_call("read", {"i": i}, run_id="r2")
        det.record_call("read", {"i": i})
    kept = det.history(run_id="r1")
    assert [r.args_hash for r in kept] == [
        hash_call("read", {"keep": 1}),
        hash_call("read", {"keep": 2}),
    ]
    assert len(det.history(run_id="r2")) == 3
    assert len(det.history()) == 3


def test_check_only_sees_its_own_scope() -> None:
    det = make()
    for _ in range(CRIT):
        run(det, READ_A, result="same", session="s", run_id="r1")
    assert check(det, READ_A, session="s", run_id="r1").level == "critical"
    assert_clear(check(det, READ_A, session="s", run_id="r2"))
    assert_clear(check(det, READ_A, session="s"))
    assert_clear(check(det, READ_A, run_id="r1"))
    assert_clear(check(det, READ_A))


def test_end_run_frees_only_that_scope() -> None:
    det = make()
    for scope in ({"session": "s", "run_id": "r1"}, {"session": "s", "run_id": "r2"}, {}):
        repeat_scoped(det, CRIT, READ_A, scope)
    det.end_run(session="s", run_id="r1")
    assert det.history(session="s", run_id="r1") == []
    assert_clear(check(det, READ_A, session="s", run_id="r1"))
    assert len(det.history(session="s", run_id="r2")) == CRIT
    assert len(det.history()) == CRIT
    # Recording again after end_run starts a fresh history.
    run(det, READ_A, result="same", session="s", run_id="r1")
    assert len(det.history(session="s", run_id="r1")) == 1


def test_end_session_frees_all_its_runs() -> None:
    det = make()
    scopes = [
        {"session": "s"},
        {"session": "s", "run_id": "r1"},
        {"session": "t", "run_id": "r1"},
        {},
    ]
    for scope in scopes:
        repeat_scoped(det, 2, READ_A, scope)
    det.end_session("s")
    assert det.history(session="s") == []
    assert det.history(session="s", run_id="r1") == []
    assert len(det.history(session="t", run_id="r1")) == 2
    assert len(det.history()) == 2


def repeat_scoped(det: LoopDetector, n: int, call: tuple[str, Any], scope: dict) -> None:
    for _ in range(n):
        run(det, call, result="same", **scope)


# --------------------------------------------------------------------------- disabled


@pytest.mark.parametrize(
    "build",
    [
        lambda: LoopDetector(),
        lambda: LoopDetector(None),
        lambda: LoopDetector(LoopDetectionConfig()),
        lambda: LoopDetector({}),
        lambda: LoopDetector(LoopDetectionConfig(enabled=False)),
        lambda: LoopDetector({"enabled": False}),
        lambda: make(enabled=None),
        lambda: make(enabled=False),
    ],
    ids=["none", "none-explicit", "default-config", "empty-mapping", "false", "false-mapping",
         "small-unset", "small-false"],
)  # fmt: skip
def test_disabled_is_never_stuck_but_still_records(build: Any) -> None:
    det = build()
    for _ in range(50):
        run(det, READ_A, result="same")
        run(det, ("ghost", {}), error="unknown tool: ghost")
    for _ in range(50):
        run(det, STATUS, result="same")
    assert_clear(check(det, READ_A))
    assert_clear(check(det, STATUS))
    assert_clear(check(det, ("ghost", {})))
    size = det.config.history_size
    history = det.history()
    assert len(history) == size
    assert all(r.args_hash == hash_call(*STATUS) for r in history)
    assert all(r.result_hash is not None for r in history)


def test_config_mapping_is_accepted() -> None:
    det = LoopDetector(
        {
            "enabled": True,
            "historySize": 12,
            "warningThreshold": 2,
            "criticalThreshold": 4,
            "detectors": {"genericRepeat": True},
        }
    )
    assert det.config.history_size == 12
    repeat(det, 1, READ_A)
    assert_clear(check(det, READ_A))
    repeat(det, 1, READ_A)
    assert_verdict(check(det, READ_A), "warning", "generic_repeat", 2, "read")


# --------------------------------------------------------------------------- generic_repeat


def test_generic_warning_from_recent_count_even_when_results_change() -> None:
    det = make()
    run(det, READ_A, result="v1")
    run(det, READ_A, result="v2")
    assert_clear(check(det, READ_A))
    run(det, READ_A, result="v3")
    first = check(det, READ_A)
    assert_verdict(first, "warning", "generic_repeat", 3, "read")
    for i in range(4, 12):
        run(det, READ_A, result=f"v{i}")
    later = check(det, READ_A)
    # Results keep changing: never critical, count is the recent count.
    assert_verdict(later, "warning", "generic_repeat", 11, "read")
    assert later.warning_key == first.warning_key


def test_generic_recent_count_includes_pending_and_ignores_other_args() -> None:
    det = make(ping_pong=False)  # the interleaving would otherwise read as a ping-pong
    det.record_call(*READ_A)
    run(det, READ_B, result="x")
    det.record_call(*READ_A)
    run(det, LIST_C, result="x")
    assert_clear(check(det, READ_A))
    det.record_call(*READ_A)
    assert_verdict(check(det, READ_A), "warning", "generic_repeat", 3, "read")
    assert_clear(check(det, READ_B))


def test_generic_critical_from_identical_outcome_streak() -> None:
    det = make()
    repeat(det, CRIT - 1, READ_A)
    assert_verdict(check(det, READ_A), "warning", "generic_repeat", CRIT - 1, "read")
    repeat(det, 1, READ_A)
    at = check(det, READ_A)
    assert_verdict(at, "critical", "generic_repeat", CRIT, "read", "identical outcomes")
    repeat(det, 1, READ_A)
    above = check(det, READ_A)
    assert_verdict(above, "critical", "generic_repeat", CRIT + 1, "read", "identical outcomes")
    assert above.warning_key == at.warning_key


def test_generic_warning_count_is_recent_count_not_streak() -> None:
    det = make()
    repeat(det, 3, READ_A, "old")
    repeat(det, 2, READ_A, "new")
    assert_verdict(check(det, READ_A), "warning", "generic_repeat", 5, "read")


def test_generic_streak_stops_at_first_different_result() -> None:
    det = make()
    repeat(det, 4, READ_A, "x")
    run(det, READ_A, result="y")
    repeat(det, 3, READ_A, "x")
    # Streak is 3 ("x" back to the "y"), recent count 8: warning only.
    assert_verdict(check(det, READ_A), "warning", "generic_repeat", 8, "read")
    repeat(det, 2, READ_A, "x")
    assert_verdict(check(det, READ_A), "critical", "generic_repeat", 5, "read")


def test_generic_streak_skips_records_without_results() -> None:
    det = make()
    repeat(det, 2, READ_A)
    det.record_call(READ_A[0], READ_A[1], "pending")
    # Later calls complete under their own ids, so the pending record stays pending.
    for i in range(3):
        det.record_call(READ_A[0], READ_A[1], f"later-{i}")
        det.record_outcome(READ_A[0], READ_A[1], result="same", tool_call_id=f"later-{i}")
    assert [r.result_hash is None for r in det.history()] == [False, False, True] + [False] * 3
    assert_verdict(check(det, READ_A), "critical", "generic_repeat", 5, "read")


def test_generic_critical_key_depends_on_reference_result() -> None:
    det_x, det_y = make(), make()
    repeat(det_x, CRIT, READ_A, "x")
    repeat(det_y, CRIT, READ_A, "y")
    kx, ky = check(det_x, READ_A).warning_key, check(det_y, READ_A).warning_key
    assert kx is not None
    assert ky is not None
    assert kx != ky


def test_generic_warning_key_depends_on_call() -> None:
    det = make()
    repeat(det, WARN, READ_A)
    repeat(det, WARN, READ_B)
    ka, kb = check(det, READ_A).warning_key, check(det, READ_B).warning_key
    assert check(det, READ_A).detector == check(det, READ_B).detector == "generic_repeat"
    assert ka != kb


# --------------------------------------------------------------------------- global breaker


def test_global_circuit_breaker_fires_with_all_detectors_off() -> None:
    det = make(generic=False, known_poll=False, ping_pong=False)
    repeat(det, GLOBAL - 1, READ_A)
    assert_clear(check(det, READ_A))
    repeat(det, 1, READ_A)
    assert_verdict(
        check(det, READ_A), "critical", "global_circuit_breaker", GLOBAL, "read",
        "global circuit breaker",
    )  # fmt: skip
    repeat(det, 1, READ_A)
    assert_verdict(
        check(det, READ_A), "critical", "global_circuit_breaker", GLOBAL + 1, "read",
    )  # fmt: skip


def test_global_circuit_breaker_needs_identical_results() -> None:
    det = make(generic=False, known_poll=False, ping_pong=False)
    for i in range(15):
        run(det, READ_A, result=i % 2)
    assert_clear(check(det, READ_A))


def test_global_key_depends_on_reference_result() -> None:
    det_x = make(generic=False, known_poll=False, ping_pong=False)
    det_y = make(generic=False, known_poll=False, ping_pong=False)
    repeat(det_x, GLOBAL, STATUS, "x")
    repeat(det_y, GLOBAL, STATUS, "y")
    vx, vy = check(det_x, STATUS), check(det_y, STATUS)
    assert vx.detector == vy.detector == "global_circuit_breaker"
    assert vx.warning_key != vy.warning_key


# --------------------------------------------------------------------------- known poll


@pytest.mark.parametrize("call", [STATUS, POLL, LOG], ids=["command_status", "poll", "log"])
def test_known_poll_warning_then_critical(call: tuple[str, Any]) -> None:
    det = make()
    tool = call[0]
    repeat(det, WARN - 1, call)
    assert_clear(check(det, call))
    repeat(det, 1, call)
    warning = check(det, call)
    assert_verdict(warning, "warning", "known_poll_no_progress", WARN, tool, "no progress")
    repeat(det, 1, call)
    later_warning = check(det, call)
    assert_verdict(later_warning, "warning", "known_poll_no_progress", WARN + 1, tool)
    assert later_warning.warning_key == warning.warning_key
    repeat(det, 1, call)
    assert_verdict(
        check(det, call), "critical", "known_poll_no_progress", CRIT, tool, "no progress"
    )
    repeat(det, 1, call)
    assert_verdict(check(det, call), "critical", "known_poll_no_progress", CRIT + 1, tool)


def test_known_poll_progress_resets_streak() -> None:
    det = make()
    repeat(det, CRIT - 1, STATUS, "running: 10%")
    assert check(det, STATUS).level == "warning"
    repeat(det, 1, STATUS, "running: 20%")
    assert_clear(check(det, STATUS))
    repeat(det, WARN - 1, STATUS, "running: 20%")
    assert_verdict(check(det, STATUS), "warning", "known_poll_no_progress", WARN, "command_status")


def test_known_poll_changing_results_never_generic() -> None:
    # A poll whose output changes is progress, however often it is called.
    det = make()
    for i in range(12):
        run(det, POLL, result=f"line {i}")
    assert_clear(check(det, POLL))


def test_known_poll_skips_records_without_results() -> None:
    det = make()
    repeat(det, 2, STATUS)
    det.record_call(STATUS[0], STATUS[1], "pending")
    det.record_call(STATUS[0], STATUS[1], "other")
    det.record_outcome(STATUS[0], STATUS[1], result="same", tool_call_id="other")
    assert det.history()[2].result_hash is None
    assert_verdict(check(det, STATUS), "warning", "known_poll_no_progress", 3, "command_status")


def test_known_poll_key_depends_on_reference_result() -> None:
    det = make()
    repeat(det, WARN, STATUS, "x")
    kx = check(det, STATUS).warning_key
    repeat(det, WARN, STATUS, "y")
    ky = check(det, STATUS)
    assert ky.detector == "known_poll_no_progress"
    assert ky.count == WARN
    assert kx != ky.warning_key


def test_process_other_actions_are_not_known_polls() -> None:
    det = make()
    repeat(det, WARN, KILL)
    assert_verdict(check(det, KILL), "warning", "generic_repeat", WARN, "process")
    repeat(det, CRIT - WARN, KILL)
    assert_verdict(check(det, KILL), "critical", "generic_repeat", CRIT, "process")


def test_process_without_mapping_args_is_not_a_known_poll() -> None:
    det = make()
    call = ("process", ["poll"])
    repeat(det, WARN, call)
    assert check(det, call).detector == "generic_repeat"


# --------------------------------------------------------------------------- unknown tool


def test_unknown_tool_repeat_threshold() -> None:
    det = make()
    for i in range(UNKNOWN - 1):
        run(det, ("browse", {"q": i}), error="Unknown tool: browse")
    assert_clear(check(det, ("browse", {"q": 99})))
    run(det, ("browse", {"q": 50}), error="Unknown tool: browse")
    # The streak is per tool: args of the call about to run do not matter.
    at = check(det, ("browse", {"q": 99}))
    assert_verdict(at, "critical", "unknown_tool_repeat", UNKNOWN, "browse")
    run(det, ("browse", {"q": 51}), error="unknown tool browse")
    above = check(det, ("browse", {"q": 0}))
    assert_verdict(above, "critical", "unknown_tool_repeat", UNKNOWN + 1, "browse")
    assert above.warning_key == at.warning_key
    assert_clear(check(det, ("read", {"q": 0})))


def test_unknown_tool_message_names_the_unknown_name() -> None:
    det = make()
    for i in range(UNKNOWN):
        run(det, ("mcp_call", {"i": i}), error="Tool 'weather_v2' not found")
    verdict = check(det, ("mcp_call", {"i": 9}))
    assert_verdict(verdict, "critical", "unknown_tool_repeat", UNKNOWN, "weather_v2")


def test_unknown_streak_broken_by_different_tool() -> None:
    det = make()
    for i in range(2):
        run(det, ("browse", {"q": i}), error="unknown tool: browse")
    run(det, READ_A, result="ok")
    for i in range(2):
        run(det, ("browse", {"q": 10 + i}), error="unknown tool: browse")
    assert_clear(check(det, ("browse", {"q": 20})))
    run(det, ("browse", {"q": 30}), error="unknown tool: browse")
    assert check(det, ("browse", {"q": 20})).detector == "unknown_tool_repeat"


def test_unknown_streak_broken_by_success() -> None:
    det = make()
    for i in range(2):
        run(det, ("browse", {"q": i}), error="unknown tool: browse")
    run(det, ("browse", {"q": 5}), result="it worked")
    for i in range(2):
        run(det, ("browse", {"q": 10 + i}), error="unknown tool: browse")
    assert_clear(check(det, ("browse", {"q": 20})))


def test_unknown_streak_broken_by_other_error() -> None:
    det = make()
    for i in range(2):
        run(det, ("browse", {"q": i}), error="unknown tool: browse")
    run(det, ("browse", {"q": 5}), error="timeout")
    for i in range(2):
        run(det, ("browse", {"q": 10 + i}), error="unknown tool: browse")
    assert_clear(check(det, ("browse", {"q": 20})))


def test_unknown_streak_broken_by_different_unknown_name() -> None:
    det = make()
    for i in range(2):
        run(det, ("mcp", {"q": i}), error="unknown tool: alpha")
    for i in range(2):
        run(det, ("mcp", {"q": 10 + i}), error="unknown tool: beta")
    assert_clear(check(det, ("mcp", {"q": 20})))
    run(det, ("mcp", {"q": 30}), error="Unknown tool: BETA")
    beta = check(det, ("mcp", {"q": 20}))
    assert_verdict(beta, "critical", "unknown_tool_repeat", 3, "beta")

    other = make()
    for i in range(3):
        run(other, ("mcp", {"q": i}), error="unknown tool: alpha")
    alpha = check(other, ("mcp", {"q": 20}))
    assert alpha.detector == "unknown_tool_repeat"
    assert alpha.warning_key != beta.warning_key


def test_unknown_tool_not_governed_by_detector_switches() -> None:
    det = make(generic=False, known_poll=False, ping_pong=False)
    for i in range(UNKNOWN):
        run(det, ("ghost", {"q": i}), error="unknown tool: ghost")
    assert check(det, ("ghost", {})).detector == "unknown_tool_repeat"


# --------------------------------------------------------------------------- ping-pong


def pp_detector(**kwargs: Any) -> LoopDetector:
    # warning 4 makes "threshold - 1" reachable: the smallest ping-pong count is 3.
    return make(warning=4, critical=6, global_=10, **kwargs)


def test_ping_pong_edges_and_count_includes_this_call() -> None:
    det = pp_detector()
    alternate(det, 2, READ_A, WRITE_B)
    assert_clear(check(det, READ_A))  # count 3
    alternate_more(det, 3, READ_A, WRITE_B)
    warning = check(det, WRITE_B)
    assert_verdict(warning, "warning", "ping_pong", 4, "write", "ping-pong loop")
    assert warning.paired_tool_name == "read"
    run(det, WRITE_B, result="r-second")
    above = check(det, READ_A)
    assert_verdict(above, "warning", "ping_pong", 5, "read", "ping-pong loop")
    assert above.paired_tool_name == "write"
    assert above.warning_key == warning.warning_key
    run(det, READ_A, result="r-first")
    critical = check(det, WRITE_B)
    assert_verdict(critical, "critical", "ping_pong", 6, "write", "ping-pong loop")
    assert critical.paired_tool_name == "read"
    run(det, WRITE_B, result="r-second")
    assert_verdict(check(det, READ_A), "critical", "ping_pong", 7, "read")


def alternate_more(det: LoopDetector, upto: int, first: tuple, second: tuple) -> None:
    """Extend an alternation started with alternate() until it holds `upto` records."""
    n = len(det.history())
    for i in range(n, upto):
        run(det, first if i % 2 == 0 else second, result="r-first" if i % 2 == 0 else "r-second")


def test_ping_pong_with_default_small_thresholds() -> None:
    det = make()
    alternate(det, 2, READ_A, WRITE_B)
    verdict = check(det, READ_A)
    # Smallest possible ping-pong: a tail of 2 plus this call. No progress, but 3 < critical.
    assert_verdict(verdict, "warning", "ping_pong", 3, "read")
    assert verdict.paired_tool_name == "write"


def test_ping_pong_same_tool_different_args() -> None:
    det = make()
    alternate(det, 3, READ_A, READ_B)
    verdict = check(det, READ_B)
    assert_verdict(verdict, "warning", "ping_pong", 4, "read")
    assert verdict.paired_tool_name == "read"


def test_ping_pong_critical_only_without_progress_on_both_sides() -> None:
    def history_with(first_results: list, second_results: list) -> Any:
        det = pp_detector()
        for a_res, b_res in zip(first_results, second_results, strict=False):
            run(det, READ_A, result=a_res)
            if b_res is not None:
                run(det, WRITE_B, result=b_res)
        return check(det, WRITE_B)

    # 5 records A B A B A, this call makes 6 = critical.
    stuck = history_with(["a", "a", "a"], ["b", "b", None])
    assert_verdict(stuck, "critical", "ping_pong", 6, "write")
    a_moves = history_with(["a", "a2", "a"], ["b", "b", None])
    assert_verdict(a_moves, "warning", "ping_pong", 6, "write")
    b_moves = history_with(["a", "a", "a"], ["b", "b2", None])
    assert_verdict(b_moves, "warning", "ping_pong", 6, "write")
    # Ping-pong is keyed on the pair, not the results.
    assert stuck.warning_key == a_moves.warning_key == b_moves.warning_key


def test_ping_pong_pending_record_in_tail_counts_as_progress() -> None:
    det = pp_detector()
    alternate(det, 4, READ_A, WRITE_B)
    det.record_call(*READ_A)
    assert_verdict(check(det, WRITE_B), "warning", "ping_pong", 6, "write")
    det.record_outcome(*READ_A, result="r-first")
    assert_verdict(check(det, WRITE_B), "critical", "ping_pong", 6, "write")


def test_ping_pong_requires_call_to_continue_alternation() -> None:
    det = make(generic=False)
    alternate(det, 5, READ_A, WRITE_B)  # newest is READ_A
    assert_clear(check(det, READ_A))  # h == A, not B
    assert_clear(check(det, LIST_C))
    assert check(det, WRITE_B).detector == "ping_pong"


def test_ping_pong_tail_needs_two_records() -> None:
    # warning 1 would flag any ping-pong at all; only a tail of >= 2 qualifies.
    det = make(warning=1, critical=2, global_=9, generic=False)
    run(det, WRITE_B, result="b")
    run(det, READ_A, result="a")
    run(det, READ_A, result="a2")  # tail is just [A]
    assert_clear(check(det, WRITE_B))

    det2 = make(warning=1, critical=2, global_=9, generic=False)
    det2.record_call(*WRITE_B)
    det2.record_call(*READ_A)
    assert_verdict(check(det2, WRITE_B), "warning", "ping_pong", 3, "write")


def test_ping_pong_tail_stops_at_third_call() -> None:
    det = make(generic=False)
    run(det, LIST_C, result="c")
    run(det, READ_A, result="a")
    run(det, WRITE_B, result="b")
    run(det, READ_A, result="a")
    # Tail is A B A (the older C breaks it): count 4.
    assert_verdict(check(det, WRITE_B), "warning", "ping_pong", 4, "write")


def test_ping_pong_key_symmetric_in_pair() -> None:
    det_ab, det_ba, det_ac = make(), make(), make()
    alternate(det_ab, 3, READ_A, WRITE_B)
    alternate(det_ba, 3, WRITE_B, READ_A)
    alternate(det_ac, 3, READ_A, LIST_C)
    ab, ba, ac = check(det_ab, WRITE_B), check(det_ba, READ_A), check(det_ac, LIST_C)
    assert ab.detector == ba.detector == ac.detector == "ping_pong"
    assert ab.warning_key == ba.warning_key
    assert ab.warning_key != ac.warning_key


# --------------------------------------------------------------------------- default thresholds


def test_default_generic_warning_before_eleventh_identical_call() -> None:
    det = LoopDetector(LoopDetectionConfig(enabled=True))
    repeat(det, 9, READ_A)
    assert_clear(check(det, READ_A))  # before the 10th
    repeat(det, 1, READ_A)
    assert_verdict(check(det, READ_A), "warning", "generic_repeat", 10, "read")  # before the 11th


def test_default_generic_critical_and_global() -> None:
    det = LoopDetector({"enabled": True})
    repeat(det, 19, READ_A)
    assert check(det, READ_A).level == "warning"
    repeat(det, 1, READ_A)
    assert_verdict(check(det, READ_A), "critical", "generic_repeat", 20, "read")
    repeat(det, 9, READ_A)
    assert check(det, READ_A).detector == "generic_repeat"
    repeat(det, 1, READ_A)
    assert_verdict(check(det, READ_A), "critical", "global_circuit_breaker", 30, "read")


def test_default_ping_pong_warning_before_tenth_alternating_call() -> None:
    det = LoopDetector(LoopDetectionConfig(enabled=True))
    alternate(det, 8, READ_A, WRITE_B)
    assert_clear(check(det, READ_A))  # the 9th alternating call
    run(det, READ_A, result="r-first")
    assert_verdict(check(det, WRITE_B), "warning", "ping_pong", 10, "write")  # the 10th


# --------------------------------------------------------------------------- precedence


def test_precedence_unknown_over_global() -> None:
    det = make()
    repeat_error(det, GLOBAL, ("ghost", {}), "unknown tool: ghost")
    assert_verdict(check(det, ("ghost", {})), "critical", "unknown_tool_repeat", GLOBAL, "ghost")


def repeat_error(det: LoopDetector, n: int, call: tuple[str, Any], error: str) -> None:
    for _ in range(n):
        run(det, call, error=error)


def test_precedence_unknown_over_ping_pong() -> None:
    det = make()
    a, b = ("ghost", {"x": 1}), ("ghost", {"x": 2})
    for i in range(3):
        run(det, a if i % 2 == 0 else b, error="unknown tool: ghost")
    assert check(det, b).detector == "unknown_tool_repeat"
    det_hi = make(unknown=9)
    for i in range(3):
        run(det_hi, a if i % 2 == 0 else b, error="unknown tool: ghost")
    assert check(det_hi, b).detector == "ping_pong"


def test_precedence_global_over_known_poll_and_generic() -> None:
    det = make()
    repeat(det, GLOBAL, STATUS)
    assert check(det, STATUS).detector == "global_circuit_breaker"
    det = make()
    repeat(det, GLOBAL, READ_A)
    assert check(det, READ_A).detector == "global_circuit_breaker"


def test_precedence_known_poll_critical_over_ping_pong_critical() -> None:
    det = make(global_=9)
    alternate(det, 10, STATUS, READ_A)  # newest is READ_A, 5 identical polls
    verdict = check(det, STATUS)
    assert_verdict(verdict, "critical", "known_poll_no_progress", 5, "command_status")
    off = make(global_=9, known_poll=False)
    alternate(off, 10, STATUS, READ_A)
    assert_verdict(check(off, STATUS), "critical", "ping_pong", 11, "command_status")


def test_precedence_known_poll_warning_over_ping_pong_critical() -> None:
    det = make()
    alternate(det, 6, STATUS, READ_A)  # 3 identical polls, tail 6 with no progress
    assert_verdict(check(det, STATUS), "warning", "known_poll_no_progress", 3, "command_status")
    off = make(known_poll=False)
    alternate(off, 6, STATUS, READ_A)
    assert_verdict(check(off, STATUS), "critical", "ping_pong", 7, "command_status")


def test_precedence_ping_pong_critical_over_generic_critical() -> None:
    det = make(global_=9)
    alternate(det, 10, WRITE_B, READ_A)  # 5 identical WRITE_B outcomes
    assert_verdict(check(det, WRITE_B), "critical", "ping_pong", 11, "write")
    off = make(global_=9, ping_pong=False)
    alternate(off, 10, WRITE_B, READ_A)
    assert_verdict(check(off, WRITE_B), "critical", "generic_repeat", 5, "write")


def test_precedence_ping_pong_warning_over_generic_critical() -> None:
    det = make(global_=9)
    for i in range(5):
        run(det, WRITE_B, result="same")
        run(det, READ_A, result=f"moving {i}")
    assert_verdict(check(det, WRITE_B), "warning", "ping_pong", 11, "write")


def test_precedence_ping_pong_warning_over_generic_warning() -> None:
    def build(**kwargs: Any) -> LoopDetector:
        det = make(**kwargs)
        for i in range(3):
            run(det, READ_A, result=f"moving {i}")  # progress: ping-pong stays a warning
            run(det, WRITE_B, result="same")
        return det

    # READ_A has 3 earlier calls (generic warning) and continues a tail of 6 (count 7).
    assert_verdict(check(build(), READ_A), "warning", "ping_pong", 7, "read")
    assert_verdict(check(build(ping_pong=False), READ_A), "warning", "generic_repeat", 3, "read")


def test_precedence_generic_critical_over_generic_warning() -> None:
    det = make()
    repeat(det, CRIT, READ_A)
    assert check(det, READ_A).level == "critical"
    assert check(det, READ_A).count == CRIT


# --------------------------------------------------------------------------- switches


def test_generic_switch_off_disables_only_generic() -> None:
    det = make(generic=False)
    repeat(det, GLOBAL - 1, READ_A)
    assert_clear(check(det, READ_A))
    repeat(det, 1, READ_A)
    assert check(det, READ_A).detector == "global_circuit_breaker"
    polls = make(generic=False)
    repeat(polls, WARN, STATUS)
    assert check(polls, STATUS).detector == "known_poll_no_progress"
    pp = make(generic=False)
    alternate(pp, 3, READ_A, WRITE_B)
    assert check(pp, WRITE_B).detector == "ping_pong"


def test_known_poll_switch_off_disables_only_known_poll() -> None:
    det = make(known_poll=False)
    repeat(det, GLOBAL - 1, STATUS)
    # A known poll never falls back to generic_repeat.
    assert_clear(check(det, STATUS))
    repeat(det, 1, STATUS)
    assert check(det, STATUS).detector == "global_circuit_breaker"
    generic = make(known_poll=False)
    repeat(generic, WARN, READ_A)
    assert check(generic, READ_A).detector == "generic_repeat"


def test_ping_pong_switch_off_disables_only_ping_pong() -> None:
    det = make(ping_pong=False)
    alternate(det, 3, READ_A, WRITE_B)
    assert_clear(check(det, WRITE_B))
    alternate_more(det, 5, READ_A, WRITE_B)
    # Now WRITE_B has 2 earlier calls, READ_A has 3: generic takes over for READ_A only.
    assert_clear(check(det, WRITE_B))
    run(det, WRITE_B, result="r-second")
    assert_verdict(check(det, READ_A), "warning", "generic_repeat", 3, "read")


# --------------------------------------------------------------------------- LRU scopes


def test_max_scopes_evicts_least_recently_used() -> None:
    det = LoopDetector(max_scopes=3)
    for s in ("s1", "s2", "s3"):
        det.record_call("read", {}, session=s)
    det.record_call("read", {}, session="s1")  # s2 is now least recently used
    det.record_call("read", {}, session="s4")
    assert det.history(session="s2") == []
    assert len(det.history(session="s1")) == 2
    assert len(det.history(session="s3")) == 1
    assert len(det.history(session="s4")) == 1


def test_max_scopes_keeps_at_most_n() -> None:
    det = LoopDetector({"enabled": True}, max_scopes=3)
    for i in range(10):
        det.record_call("read", {}, run_id=f"r{i}")
    alive = [i for i in range(10) if det.history(run_id=f"r{i}")]
    assert alive == [7, 8, 9]


def test_history_access_counts_as_use() -> None:
    det = LoopDetector(max_scopes=2)
    det.record_call("read", {}, session="a")
    det.record_call("read", {}, session="b")
    assert len(det.history(session="a")) == 1  # touches a; b is now oldest
    det.record_call("read", {}, session="c")
    assert det.history(session="b") == []
    assert len(det.history(session="a")) == 1


def test_check_counts_as_use_but_creates_no_scope() -> None:
    det = make(max_scopes=2)
    det.record_call("read", {}, session="a")
    det.record_call("read", {}, session="b")
    det.check("read", {}, session="a")  # touches a
    # Creating a scope here would evict b now and a on the next record.
    det.check("read", {}, session="new")
    det.record_call("read", {}, session="c")
    assert det.history(session="b") == []
    assert len(det.history(session="a")) == 1


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3"])
def test_bad_max_scopes(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_scopes"):
        LoopDetector(max_scopes=bad)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("bad", [42, None, b"read", ["read"]])
def test_tool_name_must_be_str(bad: Any) -> None:
    det = make()
    with pytest.raises(TypeError, match="tool_name"):
        det.check(bad, {})
    with pytest.raises(TypeError, match="tool_name"):
        det.record_call(bad, {})
    with pytest.raises(TypeError, match="tool_name"):
        det.record_outcome(bad, {}, result="x")
    assert det.history() == []


@pytest.mark.parametrize("bad", [5, b"r1", ["r1"]])
def test_run_id_must_be_str(bad: Any) -> None:
    det = make()
    with pytest.raises(TypeError, match="run_id"):
        det.check("read", {}, run_id=bad)
    with pytest.raises(TypeError, match="run_id"):
        det.record_call("read", {}, run_id=bad)
    with pytest.raises(TypeError, match="run_id"):
        det.record_outcome("read", {}, result="x", run_id=bad)
    with pytest.raises(TypeError, match="run_id"):
        det.history(run_id=bad)


def test_unhashable_session_is_type_error() -> None:
    det = make()
    with pytest.raises(TypeError, match="session"):
        det.record_call("read", {}, session=["s"])


# --------------------------------------------------------------------------- properties

KEYS: list[tuple[str, Any]] = [
    READ_A,
    READ_B,
    WRITE_B,
    STATUS,
    POLL,
    KILL,
    ("ghost", {"x": 1}),
    ("ghost", {"x": 2}),
]
OUTCOMES: list[dict[str, Any]] = [
    {"result": "r1"},
    {"result": "r2"},
    {"result": None},
    {"error": "unknown tool: ghost"},
    {"error": "Unknown tool: phantom"},
    {"error": "boom"},
    {"result": LOOP_VETO},
    {},
]
TOOL_CALL_IDS = st.sampled_from([None, None, "c1", "c2"])
SCOPES = [{}, {"session": "s", "run_id": "r1"}]


@given(
    history=st.integers(1, 6),
    ops=st.lists(
        st.tuples(
            st.sampled_from(["call", "outcome", "pair", "check", "end_run", "end_session"]),
            st.sampled_from(KEYS),
            st.sampled_from(OUTCOMES),
            TOOL_CALL_IDS,
            st.sampled_from([None, "s", "t"]),
            st.sampled_from([None, "r1", " r2 ", ""]),
        ),
        max_size=60,
    ),
)
def test_random_sequences_never_raise_and_ring_is_bounded(history: int, ops: list) -> None:
    det = make(history=history, warning=1, critical=2, global_=3, unknown=2, max_scopes=4)
    for op, (tool, args), outcome, tcid, session, run_id in ops:
        scope = {"session": session, "run_id": run_id}
        if op == "call":
            det.record_call(tool, args, tcid, **scope)
        elif op == "outcome":
            det.record_outcome(tool, args, tool_call_id=tcid, **scope, **outcome)
        elif op == "pair":
            det.record_call(tool, args, tcid, **scope)
            det.record_outcome(tool, args, tool_call_id=tcid, **scope, **outcome)
        elif op == "check":
            verdict = det.check(tool, args, **scope)
            assert bool(verdict) is verdict.stuck
            assert (verdict.level is None) is (not verdict.stuck)
        elif op == "end_run":
            det.end_run(**scope)
        else:
            det.end_session(session)
        assert len(det.history(**scope)) <= history
    live = [
        (s, r)
        for s in (None, "s", "t")
        for r in (None, "r1", "r2")
        if det.history(session=s, run_id=r)
    ]
    assert len(live) <= 4


@dataclass
class RefRecord:
    tool: str
    h: int
    tcid: str | None
    result: int | None = None
    unknown: str | None = None
    no_progress: bool = False
    veto: bool = False


class RefHistory:
    """SPEC §3 as plainly as possible: a list trimmed from the front."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.records: list[RefRecord] = []

    def _append(self, record: RefRecord) -> RefRecord:
        self.records.append(record)
        del self.records[: max(0, len(self.records) - self.size)]
        return record

    def record_call(self, tool: str, h: int, tcid: str | None) -> None:
        self._append(RefRecord(tool, h, tcid))

    def record_outcome(
        self,
        tool: str,
        h: int,
        tcid: str | None,
        result: int | None,
        unknown: str | None,
        no_progress: bool = False,
        veto: bool = False,
    ) -> RefRecord | None:
        if result is None and not veto:
            return None
        if veto and tcid is not None:
            # SPEC §8.1: a veto is recorded once per call id; of several (an id reused
            # across tools), the newest is the one returned.
            for record in reversed(self.records):
                if record.veto and record.tcid == tcid:
                    return record
        same = [r for r in reversed(self.records) if r.tool == tool and r.h == h]
        if tcid is not None:
            # SPEC §12.7: an outcome already recorded under this id is not recorded again.
            for record in same:
                if record.result is not None and record.tcid == tcid and not veto:
                    return record
        pending = [r for r in same if r.result is None and not r.veto]
        # SPEC §9.1: (a) the same id, (b) no id, (c) any id unless another call has this one.
        choice = None
        if tcid is not None:
            choice = next((r for r in pending if r.tcid == tcid), None)
            if choice is None:
                choice = next((r for r in pending if r.tcid is None), None)
            if choice is None and any(
                r.tcid == tcid and r.result is None and not r.veto for r in self.records
            ):
                pending = []
        if choice is None and pending:
            choice = pending[0]
        if choice is None:
            return self._append(RefRecord(tool, h, tcid, result, unknown, no_progress, veto))
        if choice.tcid is None:
            choice.tcid = tcid
        choice.result, choice.unknown, choice.no_progress = result, unknown, no_progress
        choice.veto = veto
        return choice


def reference_churn(records: list[RefRecord], tool: str, h: int) -> int:
    """SPEC §8.3's churn count, straight from the text."""
    variants: dict[int, list[Any]] = {}
    for record in reversed(records):
        if record.tool != tool:
            break
        if record.result is None:
            continue
        if not record.no_progress:
            break
        if record.h not in variants:
            variants[record.h] = [record.result, 0]
        if variants[record.h][0] != record.result:
            break
        variants[record.h][1] += 1
    stable = {k for k, (_, n) in variants.items() if n >= 3}
    if (
        len(stable) >= 2
        and stable == set(variants)
        and len({r for r, _ in variants.values()}) == 1
        and h in stable
    ):
        return sum(n for _, n in variants.values())
    return 0


def is_known_poll(tool: str, args: Any) -> bool:
    if tool in ("command_status", "wait"):
        return True
    return tool == "process" and isinstance(args, Mapping) and args.get("action") in ("poll", "log")


def reference_verdict(
    config: Any, records: list[RefRecord], tool: str, args: Any
) -> tuple[str | None, str | None, int]:
    """SPEC §4, written straight from the text."""
    if config.enabled is not True:
        return (None, None, 0)
    h = hash_call(tool, args)

    unknown_streak, name = 0, None
    for record in reversed(records):
        if record.veto:
            continue  # SPEC §8.1: vetoes are skipped, not breaking
        if record.tool != tool or record.unknown is None:
            break
        if name is None:
            name = record.unknown
        elif record.unknown != name:
            break
        unknown_streak += 1

    # SPEC §8.1: each equal result carries the vetoes newer than it.
    streak, pending, reference = 0, 0, None
    for record in reversed(records):
        if record.h != h or record.tool != tool:
            continue
        if record.veto:
            pending += 1
        elif record.result is not None:
            if reference is not None and record.result != reference:
                break
            reference = record.result
            streak, pending = streak + pending + 1, 0
    if reference is None:
        streak = pending

    recent = sum(1 for r in records if r.h == h)

    pp_count, pp_no_progress, pp_active = 0, False, False
    if records:
        a = records[-1].h
        b = next((r.h for r in reversed(records) if r.h != a), None)
        if b is not None:
            tail: list[RefRecord] = []
            for i, record in enumerate(reversed(records)):
                if record.h != (a if i % 2 == 0 else b):
                    break
                tail.append(record)
            if len(tail) >= 2 and h == b:
                pp_active = True
                pp_count = len(tail) + 1
                # SPEC §12.4: vetoes take part by hash and are neutral for progress.
                a_side = [r.result for r in tail[0::2] if not r.veto]
                b_side = [r.result for r in tail[1::2] if not r.veto]
                pp_no_progress = (
                    all(x is not None for x in a_side + b_side)
                    and len(set(a_side)) == 1
                    and len(set(b_side)) == 1
                )

    poll = is_known_poll(tool, args)
    churn = reference_churn(records, tool, h)
    switches = config.detectors
    warn, crit = config.warning_threshold, config.critical_threshold
    rows = [
        (unknown_streak >= config.unknown_tool_threshold,
         "critical", "unknown_tool_repeat", unknown_streak),
        (streak >= config.global_circuit_breaker_threshold,
         "critical", "global_circuit_breaker", streak),
        (poll and switches.known_poll_no_progress and streak >= crit,
         "critical", "known_poll_no_progress", streak),
        (poll and switches.known_poll_no_progress and streak >= warn,
         "warning", "known_poll_no_progress", streak),
        (switches.ping_pong and pp_active and pp_count >= crit and pp_no_progress,
         "critical", "ping_pong", pp_count),
        (switches.ping_pong and pp_active and pp_count >= warn,
         "warning", "ping_pong", pp_count),
        (not poll and switches.generic_repeat and streak >= crit,
         "critical", "generic_repeat", streak),
        (switches.argument_churn and churn >= warn,
         "warning", "argument_churn", churn),
        (not poll and switches.generic_repeat and recent >= warn,
         "warning", "generic_repeat", recent),
    ]  # fmt: skip
    for matched, level, detector, count in rows:
        if matched:
            return (level, detector, count)
    return (None, None, 0)


@st.composite
def model_case(draw: st.DrawFn) -> tuple[LoopDetector, list[tuple[str, Any]], list]:
    warning = draw(st.integers(1, 3))
    critical = draw(st.integers(warning + 1, warning + 3))
    global_ = draw(st.integers(critical + 1, critical + 3))
    config = LoopDetectionConfig(
        enabled=draw(st.sampled_from([True, True, True, True, None, False])),
        history_size=draw(st.integers(3, 12)),
        warning_threshold=warning,
        critical_threshold=critical,
        unknown_tool_threshold=draw(st.integers(1, 4)),
        global_circuit_breaker_threshold=global_,
        detectors=DetectorSwitches(
            generic_repeat=draw(st.booleans()),
            known_poll_no_progress=draw(st.booleans()),
            ping_pong=draw(st.booleans()),
            argument_churn=draw(st.booleans()),
        ),
    )
    # A few keys per example so repeats, streaks and alternations actually happen.
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3, unique_by=repr))
    if draw(st.booleans()):
        keys.append(draw(st.sampled_from([STATUS, POLL, LOG])))
    outcomes = draw(st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=3, unique_by=repr))
    ops = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["pair", "pair", "call", "outcome"]),
                st.sampled_from(keys),
                st.sampled_from(outcomes),
                TOOL_CALL_IDS,
                st.sampled_from(range(len(SCOPES))),
            ),
            max_size=40,
        )
    )
    return LoopDetector(config), keys, ops


@given(model_case())
def test_check_matches_reference_model(case: tuple) -> None:
    det, keys, ops = case
    config = det.config
    refs = [RefHistory(config.history_size) for _ in SCOPES]

    def outcome(tool: str, args: Any, tcid: Any, scope_index: int, spec: dict) -> None:
        result_hash, unknown = hash_outcome(tool, args, **spec)
        expected = refs[scope_index].record_outcome(
            tool,
            hash_call(tool, args),
            tcid,
            result_hash,
            unknown,
            "error" in spec,
            spec.get("result") is LOOP_VETO,
        )
        got = det.record_outcome(tool, args, tool_call_id=tcid, **SCOPES[scope_index], **spec)
        if expected is None:
            assert got is None
        else:
            assert (got.tool_name, got.args_hash, got.tool_call_id) == (
                expected.tool, expected.h, expected.tcid,
            )  # fmt: skip
            assert (got.result_hash, got.unknown_tool_name) == (expected.result, expected.unknown)

    for op, (tool, args), spec, tcid, scope_index in ops:
        if op in ("call", "pair"):
            det.record_call(tool, args, tcid, **SCOPES[scope_index])
            refs[scope_index].record_call(tool, hash_call(tool, args), tcid)
        if op in ("outcome", "pair"):
            outcome(tool, args, tcid, scope_index, spec)
        for index, scope in enumerate(SCOPES):
            got_history = [
                (r.tool_name, r.args_hash, r.tool_call_id, r.result_hash, r.unknown_tool_name)
                for r in det.history(**scope)
            ]
            want_history = [(r.tool, r.h, r.tcid, r.result, r.unknown) for r in refs[index].records]
            assert got_history == want_history
            for key_tool, key_args in keys:
                verdict = det.check(key_tool, key_args, **scope)
                want = reference_verdict(config, refs[index].records, key_tool, key_args)
                assert (verdict.level, verdict.detector, verdict.count) == want
                assert verdict.stuck is (want[0] is not None)

"""SPEC §9.1-§9.6 on both twins: ids matched however the host passes them, the active
scope, quiet and structured logs, events, shadow mode, counters and metrics."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopcore import CompactionLoopPersisted, ToolLoopGuard
from tests.conftest import loopcore_records

pytestmark = pytest.mark.usefixtures("twin")

ON = {"enabled": True}
POLL = {"action": "poll", "sessionId": "s1"}
POLLED = {"content": [{"type": "text", "text": "still running"}], "details": {"status": "running"}}


# -- §9.1 matching an outcome to its call -------------------------------------------------


def test_ids_known_only_after_the_call_still_block_the_poll_loop() -> None:
    guard = ToolLoopGuard(ON)
    decisions = []
    for i in range(21):
        decision = guard.before_call("process", POLL, run_id="r")
        decisions.append(decision)
        if not decision.blocked:
            guard.after_call("process", POLL, result=POLLED, tool_call_id=f"c{i}", run_id="r")
    assert [d.blocked for d in decisions] == [False] * 20 + [True]
    assert decisions[10].warning is not None
    assert decisions[20].verdict.detector == "known_poll_no_progress"


def _run(guard: ToolLoopGuard, steps: list[tuple[int, str, str]]) -> list[tuple[Any, ...]]:
    out = []
    for call, before_id, after_id in steps:
        args = {"action": "poll", "sessionId": f"s{call}"}
        decision = guard.before_call("process", args, tool_call_id=before_id or None)
        out.append((decision.blocked, decision.verdict.detector, decision.verdict.count))
        if not decision.blocked:
            guard.after_call(
                "process", args, result={"details": {"status": "running", "n": call}},
                tool_call_id=after_id or None,
            )  # fmt: skip
    return out


@settings(max_examples=60, deadline=None)
@given(
    calls=st.lists(st.integers(0, 2), min_size=1, max_size=45),
    sides=st.lists(st.sampled_from(["both", "before", "after", "none", "rewritten"]), min_size=45),
)
def test_one_sided_or_rewritten_ids_give_the_verdicts_of_matching_ids(
    calls: list[int], sides: list[str]
) -> None:
    config = {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5,
              "globalCircuitBreakerThreshold": 7}  # fmt: skip
    matching = [(c, f"id{i}", f"id{i}") for i, c in enumerate(calls)]
    ids = {
        "both": lambda i: (f"id{i}", f"id{i}"),
        "before": lambda i: (f"id{i}", ""),
        "after": lambda i: ("", f"id{i}"),
        "none": lambda i: ("", ""),
        "rewritten": lambda i: (f"id{i}", f"provider-{i}"),
    }
    varied = [(c, *ids[sides[i]](i)) for i, c in enumerate(calls)]
    assert _run(ToolLoopGuard(config), varied) == _run(ToolLoopGuard(config), matching)


# -- §9.2 the active scope ------------------------------------------------------------------


def test_arming_inside_a_scope_arms_that_scope() -> None:
    guard = ToolLoopGuard()
    with guard.scope(session="s", run_id="r"):
        guard.arm_post_compaction()
        for _ in range(2):
            guard.after_call("read", {"p": 1}, result="same")
        with pytest.raises(CompactionLoopPersisted):
            guard.after_call("read", {"p": 1}, result="same")
    # The unscoped history was never armed.
    for _ in range(5):
        guard.after_call("read", {"p": 1}, result="same")


# -- §9.3 logging ---------------------------------------------------------------------------


def test_ten_thousand_blocked_retries_log_at_most_fifteen_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="loopcore")
    events: list[Any] = []
    guard = ToolLoopGuard(ON, on_event=events.append)
    args = {"path": "/stuck"}
    for _ in range(10_020):
        if not guard.before_call("read", args, session="s", run_id="r").blocked:
            guard.after_call("read", args, result="same", session="s", run_id="r")
    loud = [r for r in loopcore_records(caplog) if r.levelno >= logging.WARNING]
    assert 1 < len(loud) <= 15
    assert sum(1 for e in events if e.kind == "block") == 10_000  # every block is evented
    assert loud[-1].getMessage().startswith("Blocking read due to critical loop (blocked 8192")
    quiet = [r for r in loopcore_records(caplog, logging.DEBUG) if "Blocking" in r.getMessage()]
    assert len(quiet) == 10_000 - (len(loud) - 1)


def test_lines_carry_the_scope_and_structured_fields(caplog: pytest.LogCaptureFixture) -> None:
    guard = ToolLoopGuard(ON)
    args = {"path": "/secret-token-123"}
    for _ in range(21):
        if not guard.before_call("read", args, session="sess\nFAKE", run_id="r\x1b[31m").blocked:
            guard.after_call(
                "read", args, result="hunter2", session="sess\nFAKE", run_id="r\x1b[31m"
            )
    records = loopcore_records(caplog)
    assert [r.levelno for r in records] == [logging.WARNING, logging.ERROR]
    for record in records:
        text = record.getMessage()
        assert "\n" not in text
        assert "\x1b" not in text
        assert text.endswith(" [session=sess\\nFAKE run_id=r\\x1b[31m]")
        assert "secret-token" not in text
        assert "hunter2" not in text
        assert record.loopcore_session == "sess\\nFAKE"  # type: ignore[attr-defined]
        assert record.loopcore_tool == "read"  # type: ignore[attr-defined]
        assert record.loopcore_shadow is False  # type: ignore[attr-defined]
    assert [r.loopcore_event for r in records] == ["warning", "block"]  # type: ignore[attr-defined]
    assert records[1].loopcore_detector == "generic_repeat"  # type: ignore[attr-defined]
    assert records[1].loopcore_count == 20  # type: ignore[attr-defined]


# -- §9.4 events ----------------------------------------------------------------------------


def test_a_coroutine_on_event_is_refused() -> None:
    async def on_event(event: Any) -> None:
        pass

    with pytest.raises(TypeError, match="on_event: expected a plain callable, got a coroutine"):
        ToolLoopGuard(ON, on_event=on_event)


def test_a_raising_callback_is_logged_once_per_scope_by_type(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def on_event(event: Any) -> None:
        raise ValueError("callback text with a secret")

    guard = ToolLoopGuard(ON, on_event=on_event)
    for _ in range(25):
        if not guard.before_call("read", {"p": 1}, run_id="r").blocked:
            guard.after_call("read", {"p": 1}, result="same", run_id="r")
    failures = [r for r in loopcore_records(caplog) if "on_event" in r.getMessage()]
    assert len(failures) == 1
    assert "ValueError" in failures[0].getMessage()
    assert "secret" not in failures[0].getMessage()


# -- §9.5 shadow mode -------------------------------------------------------------------------


def test_observe_mode_decides_but_never_acts(caplog: pytest.LogCaptureFixture) -> None:
    events: list[Any] = []
    guard = ToolLoopGuard(ON, mode="observe", on_event=events.append)
    args = {"path": "/a"}
    shown = []
    for _ in range(25):
        decision = guard.before_call("read", args)
        shown.append(guard.after_call("read", args, result="same"))
        assert not decision.blocked
    assert decision.would_block
    assert decision.terminal
    assert decision.result_text is None
    assert decision.model_note is None
    assert shown == ["same"] * 25  # no note reaches the model
    assert all(r.outcome_kind is None for r in guard.detector.history())  # every call ran
    would = [
        r
        for r in loopcore_records(caplog, logging.WARNING)
        if "would have blocked" in r.getMessage()
    ]
    assert would
    assert all(r.loopcore_shadow for r in would)  # type: ignore[attr-defined]
    assert not loopcore_records(caplog, logging.ERROR)
    stats = guard.stats()
    assert (stats.blocks, stats.shadow_blocks, stats.warnings) == (0, 5, 1)
    assert all(e.shadow for e in events if e.kind == "block")


def test_observe_mode_from_the_config_and_its_override() -> None:
    assert ToolLoopGuard({"enabled": True, "mode": "observe"}).mode == "observe"
    assert ToolLoopGuard({"enabled": True, "mode": "observe"}, mode="enforce").mode == "enforce"
    with pytest.raises(ValueError, match="mode: expected 'enforce' or 'observe', got 'block'"):
        ToolLoopGuard(ON, mode="block")


# -- §9.6 counters and metrics ----------------------------------------------------------------


def test_stats_count_what_the_guard_did() -> None:
    guard = ToolLoopGuard(ON, max_scopes=2)
    for _ in range(22):
        if not guard.before_call("read", {"p": 1}, run_id="r").blocked:
            guard.after_call("read", {"p": 1}, result="same", run_id="r")
    guard.before_call("read", {"p": 1}, run_id="other")
    guard.before_call("read", {"p": 1}, run_id="third")  # evicts the oldest scope
    guard.end_run(run_id="third")
    stats = guard.stats()
    assert (stats.calls, stats.warnings, stats.blocks, stats.terminations) == (24, 1, 2, 1)
    assert dict(stats.by_outcome) == {
        ("generic_repeat", "warning", "warned"): 1,
        ("generic_repeat", "critical", "blocked"): 1,
        ("generic_repeat", "critical", "terminated"): 1,
    }
    assert (stats.live_scopes, stats.evicted_scopes) == (1, 1)


def test_the_prometheus_collector_reads_a_real_guard() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from loopcore.metrics import PrometheusCollector

    guard = ToolLoopGuard(ON)
    for _ in range(21):
        if not guard.before_call("read", {"p": 1}).blocked:
            guard.after_call("read", {"p": 1}, result="same")
    registry = CollectorRegistry()
    registry.register(PrometheusCollector(guard, guard_label="edge"))
    text = generate_latest(registry).decode()
    assert 'loopcore_tool_calls_total{guard="edge"} 21.0' in text
    assert (
        'loopcore_detections_total{action="blocked",detector="generic_repeat",guard="edge",'
        'level="critical"} 1.0'
    ) in text
    assert 'loopcore_live_scopes{guard="edge"} 1.0' in text

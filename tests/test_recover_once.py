"""SPEC §8.1-§8.3, §8.7-§8.12 through the public API, on both twins: every worked example.

Vetoes that count, recover-once, batch admission, argument churn and liveness,
terminal exec failures, ``wait`` polls, the new verdict order, post-compaction
re-reads, run-loop cutoffs and the notes warnings leave for the model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import pytest

from loopcore import (
    TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE,
    LoopDetector,
    ToolLoopBlocked,
    ToolLoopGuard,
    ToolLoopRunTerminated,
    TurnCall,
)
from tests.conftest import loopcore_records

pytestmark = pytest.mark.usefixtures("twin")

ON = {"enabled": True}
VETO = {"details": {"status": "blocked", "deniedReason": "tool-loop"}}
NOOP = {"content": [{"type": "text", "text": "no change"}], "details": {"changed": False}}
RECOVERABLE = (
    "\n\nDo not repeat this exact tool action. Reassess the task. You may answer the user, ask "
    "for clarification, or continue with a different tool or different arguments."
)
TERMINAL = (
    "\n\nCritical tool-loop recovery failed because another critical loop was detected. "
    "This run is stopping now."
)


def sends(guard: ToolLoopGuard, n: int, args: Any = None, result: Any = "sent") -> None:
    args = {"to": "ops", "text": "hi"} if args is None else args
    for _ in range(n):
        decision = guard.before_call("sessions_send", args, run_id="r")
        assert not decision.blocked
        guard.after_call("sessions_send", args, result=result, run_id="r")


def verdict_of(decision: Any) -> tuple[Any, ...]:
    v = decision.verdict
    return (v.level, v.detector, v.count)


# -- §8.1 vetoes are recorded and counted -------------------------------------------------


def test_blocked_retries_count_until_the_breaker() -> None:
    guard = ToolLoopGuard(ON)
    sends(guard, 20)
    counts = []
    for _ in range(11):
        decision = guard.before_call("sessions_send", {"to": "ops", "text": "hi"}, run_id="r")
        assert decision.blocked
        counts.append(verdict_of(decision)[1:])
    assert counts[0] == ("generic_repeat", 20)
    assert counts[1:10] == [("generic_repeat", n) for n in range(21, 30)]
    assert counts[10:] == [("global_circuit_breaker", 30)]
    kinds = [r.outcome_kind for r in guard.detector.history(run_id="r")]
    assert kinds[-11:] == ["tool-loop-veto"] * 11


def test_vetoes_and_a_new_result_give_a_warning_on_the_recent_count() -> None:
    det = LoopDetector(ON)
    args = {"to": "ops"}
    for _ in range(20):
        det.record_call("send", args)
        det.record_outcome("send", args, result="sent")
    for _ in range(5):
        det.record_outcome("send", args, result=VETO)
    det.record_call("send", args)
    det.record_outcome("send", args, result="sent again, differently")
    assert verdict_of_check(det, "send", args) == ("warning", "generic_repeat", 26)


def test_pending_calls_neither_count_nor_break_the_streak() -> None:
    det = LoopDetector(ON)
    args = {"to": "ops"}
    for _ in range(20):
        det.record_call("send", args)
        det.record_outcome("send", args, result="sent")
    for _ in range(10):
        det.record_call("send", args)
    assert verdict_of_check(det, "send", args) == ("critical", "generic_repeat", 20)


def verdict_of_check(det: LoopDetector, tool: str, args: Any) -> tuple[Any, ...]:
    v = det.check(tool, args)
    return (v.level, v.detector, v.count)


def test_a_blocked_unknown_tool_stays_blocked() -> None:
    # Deviation F1: vetoes are skipped by the unknown-tool streak, not breaking it.
    guard = ToolLoopGuard(ON)
    for _ in range(10):
        guard.before_call("invoke", {"name": "ghost"})
        guard.after_call("invoke", {"name": "ghost"}, error="unknown tool: ghost")
    first = guard.before_call("invoke", {"name": "ghost"})
    second = guard.before_call("invoke", {"name": "ghost"})
    assert verdict_of(first) == ("critical", "unknown_tool_repeat", 10)
    assert verdict_of(second) == ("critical", "unknown_tool_repeat", 10)
    assert second.blocked
    assert second.terminal


# -- §8.2 recover once ----------------------------------------------------------------------


def test_first_critical_recovers_and_the_second_ends_the_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = ToolLoopGuard(ON)
    sends(guard, 20)
    first = guard.before_call("sessions_send", {"to": "ops", "text": "hi"}, run_id="r")
    assert (first.blocked, first.terminal, first.would_block) == (True, False, True)
    assert first.result_text == first.reason + RECOVERABLE
    # The run goes on with something else, then loops on another call.
    sends(guard, 20, args={"to": "dev"})
    caplog.clear()
    second = guard.before_call("sessions_send", {"to": "dev"}, run_id="r")
    assert (second.blocked, second.terminal) == (True, True)
    assert second.result_text == second.reason + TERMINAL
    [line] = loopcore_records(caplog, logging.ERROR)
    assert line.getMessage().startswith("Blocking sessions_send due to critical loop (blocked 1")
    assert TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE in line.getMessage()
    assert line.loopcore_event == "terminate"  # type: ignore[attr-defined]
    # A new run starts with a fresh allowance.
    guard.end_run(run_id="r")
    sends(guard, 20)
    again = guard.before_call("sessions_send", {"to": "ops", "text": "hi"}, run_id="r")
    assert (again.blocked, again.terminal) == (True, False)


def test_blocked_result_is_a_loop_veto_with_the_intervention() -> None:
    guard = ToolLoopGuard(ON)
    sends(guard, 20)
    args = {"to": "ops", "text": "hi"}
    decision = guard.before_call("sessions_send", args, tool_call_id="call-9", run_id="r")
    result = decision.blocked_result()
    assert result == {
        "content": [{"type": "text", "text": decision.result_text}],
        "details": {
            "status": "blocked",
            "deniedReason": "tool-loop",
            "intervention": {
                "kind": "critical-tool-loop",
                "toolCallId": "call-9",
                "toolName": "sessions_send",
                "actionKey": f"{guard.detector.history(run_id='r')[-1].args_hash:016x}",
                "detector": "generic_repeat",
                "count": 20,
                "reason": decision.reason,
            },
        },
        "isError": True,
    }
    # Fed back as the call's outcome it changes nothing: the veto is recorded once.
    before = guard.detector.history(run_id="r")
    guard.after_call("sessions_send", args, result=result, tool_call_id="call-9", run_id="r")
    assert guard.detector.history(run_id="r") == before
    terminal = guard.before_call("sessions_send", args, run_id="r")
    assert terminal.blocked_result()["terminate"] is True


def test_the_decorator_raises_run_terminated_on_the_second_critical() -> None:
    guard = ToolLoopGuard(ON)

    @guard.wrap(name="poll")
    def poll(job: str) -> str:
        return "running"

    for _ in range(20):
        poll("a")
    with pytest.raises(ToolLoopBlocked) as first:
        poll("a")
    assert not isinstance(first.value, ToolLoopRunTerminated)
    assert first.value.result_text == first.value.reason + RECOVERABLE  # type: ignore[operator]
    with pytest.raises(ToolLoopRunTerminated) as second:
        poll("a")
    exc = second.value
    assert str(exc) == exc.message == TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE
    assert exc.reason == exc.verdict.message
    assert exc.result_text == exc.reason + TERMINAL  # type: ignore[operator]


def test_a_batch_counts_its_own_repeats_and_blocks_together() -> None:
    guard = ToolLoopGuard(ON)
    args = {"path": "/a"}
    for _ in range(19):
        guard.before_call("read", args)
        guard.after_call("read", args, result="same")
    batch = guard.before_batch(
        [("read", args, "c1"), ("list", {"dir": "/"}, "c2"), ("read", args, "c3")]
    )
    # The third call sees 19 results and one veto placeholder per earlier read.
    assert (batch.blocked, batch.terminal, batch.trigger) == (True, False, 2)
    assert (batch.verdict.detector, batch.verdict.count) == ("generic_repeat", 20)
    texts = [d.result_text for d in batch.decisions]
    assert texts[2] == batch.verdict.message + RECOVERABLE
    assert (
        texts[0]
        == texts[1]
        == (
            "This tool was not executed because another call in the batch triggered critical "
            "tool-loop recovery. Reassess the task before choosing the next action."
        )
    )
    # One veto per batch call identical to the trigger; the other call is not recorded.
    history = guard.detector.history()
    assert [(r.tool_name, r.tool_call_id, r.outcome_kind) for r in history[19:]] == [
        ("read", "c1", "tool-loop-veto"),
        ("read", "c3", "tool-loop-veto"),
    ]


def test_an_admitted_batch_is_recorded_in_order_and_released_calls_are_forgotten() -> None:
    guard = ToolLoopGuard(ON)
    batch = guard.before_batch([("read", {"p": 1}, "a"), ("read", {"p": 2}, "b")])
    assert not batch.blocked
    assert batch.trigger is None
    assert [d.tool_call_id for d in batch.decisions] == ["a", "b"]
    assert [r.tool_call_id for r in guard.detector.history()] == ["a", "b"]
    assert guard.release(["b"]) == 1
    assert [r.tool_call_id for r in guard.detector.history()] == ["a"]
    assert guard.stats().calls == 2


def test_a_failing_check_blocks_and_uses_up_the_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class BrokenStore:
        history_size = 30
        evicted = 0

        def __len__(self) -> int:
            return 0

        def scan_append(self, *args: Any) -> Any:
            raise RuntimeError("store down")

        def append(self, *args: Any) -> None:
            pass

        def history(self, key: Any) -> list[Any]:
            return []

    guard = ToolLoopGuard(ON, store=BrokenStore())
    first = guard.before_call("read", {"p": 1})
    assert first.blocked
    assert not first.terminal
    assert verdict_of(first) == ("critical", "loop_admission_failure", 1)
    assert first.reason == "Tool execution was blocked because loop safety checks failed."
    messages = [r.getMessage() for r in loopcore_records(caplog, logging.ERROR)]
    assert messages[0].startswith("tool-loop batch admission failed: RuntimeError")
    assert "store down" not in messages[0]  # an error's text may hold arguments
    assert guard.before_call("read", {"p": 2}).terminal


# -- §8.3 argument churn and liveness --------------------------------------------------------


def churn(target: Any, pattern: str, times: int, result: Any = NOOP, **outcome: Any) -> None:
    for _ in range(times):
        for path in pattern:
            args = {"path": path}
            target.record_call("write", args)
            if outcome:
                target.record_outcome("write", args, **outcome)
            else:
                target.record_outcome("write", args, result=result)


def test_write_no_ops_over_two_paths_are_argument_churn() -> None:
    det = LoopDetector(ON)
    churn(det, "abaab", 6)
    v = det.check("write", {"path": "a"})
    assert (v.level, v.detector, v.count) == ("warning", "argument_churn", 30)
    assert "2 repeated argument patterns" in v.message  # type: ignore[operator]
    assert "tool call remains allowed" in v.message  # type: ignore[operator]
    assert v.warning_key == "argument-churn:write"
    assert v.liveness_signal == "argument_churn"
    assert not det.check("write", {"path": "c"})  # a novel argument never inherits churn
    det.record_call("write", {"path": "a"})  # pending: one completed record falls out
    assert verdict_of_check(det, "write", {"path": "b"}) == ("warning", "argument_churn", 29)


def test_identical_errors_over_variants_are_argument_churn() -> None:
    det = LoopDetector(ON)
    churn(det, "abaab", 4, error="permission denied")
    assert verdict_of_check(det, "write", {"path": "a"}) == ("warning", "argument_churn", 20)


def test_alternating_no_ops_are_a_ping_pong_warning_with_liveness() -> None:
    det = LoopDetector(ON)
    churn(det, "ab", 5)
    v = det.check("write", {"path": "a"})
    assert (v.level, v.detector, v.count) == ("warning", "ping_pong", 11)
    assert v.liveness_signal == "argument_churn"


def test_changing_successes_are_no_churn() -> None:
    det = LoopDetector(ON)
    for _ in range(12):
        det.record_call("write", {"path": "a"})
        det.record_outcome("write", {"path": "a"}, result={"ok": True})
    v = det.check("write", {"path": "a"})
    assert (v.detector, v.liveness_signal) == ("generic_repeat", None)


def test_churn_off_means_no_churn_anywhere() -> None:
    det = LoopDetector({"enabled": True, "detectors": {"argumentChurn": False}})
    churn(det, "abaab", 6)
    v = det.check("write", {"path": "a"})
    assert v.detector != "argument_churn"
    assert v.liveness_signal is None


def test_the_write_churn_outranks_nothing_above_it() -> None:
    # SPEC §8.9: row 7 (generic critical) comes before row 8 (churn).
    det = LoopDetector(ON)
    churn(det, "a", 20)
    churn(det, "b", 10)
    assert verdict_of_check(det, "write", {"path": "a"}) == ("critical", "generic_repeat", 20)


def test_liveness_starts_with_a_churn_and_clears_with_progress() -> None:
    events: list[Any] = []
    guard = ToolLoopGuard(ON, on_event=events.append)
    started = []
    for _ in range(6):
        for path in "abaab":
            args = {"path": path}
            guard.before_call("write", args)
            guard.after_call("write", args, result=NOOP)
            started.append(guard.liveness().churning)
    # The 11th call is the first whose churn count (10 calls) reaches the threshold.
    assert started == [False] * 10 + [True] * 20
    since = guard.liveness().churn_since
    decision = guard.before_call("write", {"path": "a"})
    assert decision.liveness_signal == "argument_churn"
    live = guard.liveness()
    assert live.churning
    assert live.churn_since == since
    assert live.churn_observed_at is not None
    assert live.churn_observed_at >= since  # type: ignore[operator]
    guard.after_call("write", {"path": "a"}, result=NOOP)
    guard.before_call("read", {"path": "a"})  # another tool ends the churn
    assert not guard.liveness().churning
    churns = [(e.kind, e.tool_name, e.count) for e in events if e.kind == "churn"]
    assert churns == [("churn", "write", 1), ("churn", "", 0)]


# -- §8.4 terminal exec failures -----------------------------------------------------------


def failed(out: str, code: int = 1) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": out}],
        "details": {"status": "failed", "exitCode": code, "aggregated": out},
    }


def test_new_commands_with_the_same_failure_are_no_progress() -> None:
    det = LoopDetector(ON)
    for i in range(20):
        args = {"command": f"python job-{i}.py"}
        det.record_call("exec", args)
        det.record_outcome("exec", args, result=failed("ModuleNotFoundError: No module named x"))
    assert verdict_of_check(det, "exec", {"command": "python next-job.py"}) == (
        "critical",
        "generic_repeat",
        20,
    )


def test_drifting_output_of_one_command_is_no_progress() -> None:
    det = LoopDetector(ON)
    args = {"command": "node retry.js"}
    for i in range(30):
        out = f"2026-12-01T10:00:{i:02d}Z attempt {i} pid {1000 + i} failed after {i}ms"
        det.record_call("exec", {**args, "title": f"try {i}"})  # the title is presentation
        det.record_outcome("exec", args, result=failed(out))
        if i == 19:
            assert verdict_of_check(det, "exec", args)[:2] == ("critical", "generic_repeat")
    assert verdict_of_check(det, "exec", args) == ("critical", "global_circuit_breaker", 30)


def test_a_success_or_a_timeout_is_not_a_terminal_failure() -> None:
    det = LoopDetector(ON)
    for i in range(20):
        args = {"command": f"job-{i}"}
        det.record_call("exec", args)
        result = failed("boom") if i % 2 else failed("boom", code=0)
        det.record_outcome("exec", args, result=result)
    assert not det.check("exec", {"command": "job-x"})


# -- §8.7, §8.8 ------------------------------------------------------------------------------


def test_reconcile_rehashes_a_rewritten_call() -> None:
    guard = ToolLoopGuard(ON)
    for path in "ababab":
        guard.before_call("write", {"path": path})
        guard.after_call("write", {"path": path}, result=NOOP)
    guard.before_call("write", {"path": "/original"}, tool_call_id="w1")
    got = guard.reconcile("write", {"path": "a"}, tool_call_id="w1", warning_threshold=6)
    assert dataclasses.astuple(got) == (True, 6, 2, True, True)
    # No pending call of the tool: nothing to reconcile.
    nothing = guard.detector.reconcile_call("read", {"path": "a"})
    assert dataclasses.astuple(nothing) == (False, 0, 0, False, False)


def test_ten_unchanged_waits_are_critical() -> None:
    det = LoopDetector(ON)
    for n in range(1, 12):
        det.record_call("wait", {"id": "j"})
        det.record_outcome("wait", {"id": "j"}, result={"status": "running", "runId": f"r{n}"})
        got = verdict_of_check(det, "wait", {"id": "j"})
        # Below warningThreshold nothing; from it on, critical (its warning row never fires).
        assert got == (("critical", "known_poll_no_progress", n) if n >= 10 else (None, None, 0))


def test_a_variant_needs_three_calls_to_be_part_of_a_churn() -> None:
    det = LoopDetector({"enabled": True, "warningThreshold": 5})
    churn(det, "aabb", 1)  # two of each: not stable yet
    assert not det.check("write", {"path": "a"})
    churn(det, "ab", 1)  # three of each: a churn of 6 calls
    assert verdict_of_check(det, "write", {"path": "a"}) == ("warning", "argument_churn", 6)


# -- §8.10, §8.11, §8.12 ----------------------------------------------------------------------


def test_a_post_compaction_window_summarises_its_re_reads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="loopcore")
    guard = ToolLoopGuard()
    steps = [("read", {"path": "/report.md"}, "v1"), ("exec", {"command": "ls"}, "x")]
    for tool, args, result in steps:
        guard.before_call(tool, args)
        guard.after_call(tool, args, result=result)
    guard.arm_post_compaction()
    for tool, args in [
        ("read", {"path": "/report.md"}),
        ("read", {"path": "/other.md"}),
        ("gateway", {"probe": True}),
    ]:
        guard.before_call(tool, args)
        guard.after_call(tool, args, result="new")
    infos = [r.getMessage() for r in loopcore_records(caplog, logging.INFO)]
    assert infos[-1] == (
        "post-compaction window closed: toolCalls=3 preCompactionRepeats=1 tools=read "
        "[session=None run_id=None]"
    )
    assert not loopcore_records(caplog, logging.ERROR)


def test_run_loop_cutoffs_through_the_guard(caplog: pytest.LogCaptureFixture) -> None:
    guard = ToolLoopGuard({"turnLimit": 2, "maxIdleRepeatCalls": 2})
    assert guard.before_turn(run_id="r") is None
    assert guard.end_turn([TurnCall("read", {"p": 1})], run_id="r") is None
    stop = guard.end_turn([TurnCall("read", {"p": 1})], run_id="r")
    assert stop is not None
    assert stop.guard == "maxIdleRepeatCalls"
    assert stop.message == (
        "Stopped this run because the same tool was called with identical arguments 2 times in "
        "a row without progress (maxIdleRepeatCalls)."
    )
    turn = guard.before_turn(run_id="r")
    assert turn is not None
    assert turn.guard == "turnLimit"
    assert guard.stats().run_stops == 2
    shadow = ToolLoopGuard({"turnLimit": 1}, mode="observe")
    shadow.end_turn([], run_id="r")
    assert shadow.before_turn(run_id="r") is None
    assert any("would have stopped the run" in r.getMessage() for r in caplog.records)


def test_a_warned_call_returns_its_result_with_the_note() -> None:
    guard = ToolLoopGuard(ON)
    args = {"job": "j"}
    content = {"content": [{"type": "text", "text": "pending"}]}
    shown = []
    for _ in range(11):
        decision = guard.before_call("status", args)
        shown.append(guard.after_call("status", args, result=content))
    note = (
        "[System note: Tool-loop warning after 10 repeated calls. Change your approach or stop "
        "if you are not making progress.]"
    )
    assert decision.model_note == note
    assert shown[:10] == [content] * 10
    assert all(s is content for s in shown[:10])
    assert shown[10] == {"content": [*content["content"], {"type": "text", "text": note}]}
    assert content == {"content": [{"type": "text", "text": "pending"}]}  # not mutated


def test_a_warned_call_that_raises_carries_the_note() -> None:
    guard = ToolLoopGuard(ON)

    @guard.wrap(name="fetch")
    async def fetch(url: str) -> str:
        raise TimeoutError("slow")

    async def main() -> BaseException:
        for _ in range(10):
            with pytest.raises(TimeoutError):
                await fetch("u")
        try:
            await fetch("u")
        except TimeoutError as exc:
            return exc
        raise AssertionError("no error")

    exc = asyncio.run(main())
    assert exc.loop_note.startswith("[System note: Tool-loop warning after 10")  # type: ignore[attr-defined]
    assert getattr(exc, "__notes__", [exc.loop_note])[-1] == exc.loop_note  # type: ignore[attr-defined]

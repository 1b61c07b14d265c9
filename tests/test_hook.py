"""SPEC §5: ToolLoopGuard, the gateway hook, and its wrapper for sync and async tools."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import pytest

import loopcore
from loopcore import (
    CallRecord,
    CompactionLoopPersisted,
    Decision,
    LoopDetectionConfig,
    LoopDetector,
    LoopEvent,
    ToolLoopBlocked,
    ToolLoopGuard,
    hash_call,
    hash_outcome,
)

from .conftest import loopcore_records

# Runs on both twins (see conftest).
pytestmark = pytest.mark.usefixtures("twin")

# Every field an event carries is checked for leaked secrets, including future ones.
EVENT_FIELDS = tuple(f.name for f in dataclasses.fields(LoopEvent))


def small_config(**overrides: Any) -> LoopDetectionConfig:
    """Small thresholds so every detector is reachable in a handful of calls."""
    fields: dict[str, Any] = {
        "enabled": True,
        "history_size": 50,
        "warning_threshold": 3,
        "critical_threshold": 5,
        "unknown_tool_threshold": 3,
        "global_circuit_breaker_threshold": 8,
    }
    fields.update(overrides)
    return LoopDetectionConfig(**fields)


def make_guard(config: object = "small", **kwargs: Any) -> tuple[ToolLoopGuard, list[LoopEvent]]:
    events: list[LoopEvent] = []
    cfg = small_config() if config == "small" else config
    return ToolLoopGuard(cfg, on_event=events.append, **kwargs), events


def kinds(events: list[LoopEvent], kind: str) -> list[LoopEvent]:
    return [e for e in events if e.kind == kind]


def call(
    guard: ToolLoopGuard,
    tool: str,
    args: Any,
    result: Any,
    *,
    session: Any = None,
    run_id: str | None = None,
) -> Decision:
    """One full tool execution through the hook; the outcome is only fed when not blocked."""
    decision = guard.before_call(tool, args, session=session, run_id=run_id)
    if not decision.blocked:
        guard.after_call(tool, args, result=result, session=session, run_id=run_id)
    return decision


@pytest.fixture(autouse=True)
def _capture_loopcore(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="loopcore")


# ---------------------------------------------------------------- before_call / after_call


def test_before_call_returns_not_stuck_decision() -> None:
    guard, events = make_guard()
    decision = guard.before_call("read", {"path": "a.txt"})
    assert isinstance(decision, Decision)
    assert decision.blocked is False
    assert decision.reason is None
    assert decision.warning is None
    assert decision.verdict.stuck is False
    assert bool(decision.verdict) is False
    assert events == []


def test_not_stuck_calls_are_recorded() -> None:
    guard, _ = make_guard()
    for i in range(3):
        guard.before_call("read", {"path": f"{i}.txt"}, tool_call_id=f"c{i}", run_id="r1")
        history = guard.detector.history(run_id="r1")
        assert len(history) == i + 1
    newest = guard.detector.history(run_id="r1")[-1]
    assert newest.tool_name == "read"
    assert newest.args_hash == hash_call("read", {"path": "2.txt"})
    assert newest.tool_call_id == "c2"
    assert newest.run_id == "r1"
    assert newest.session is None
    assert newest.result_hash is None
    # Only the scope that was used holds records.
    assert guard.detector.history() == []


def test_after_call_records_outcome_and_returns_the_result() -> None:
    guard, _ = make_guard()
    args = {"path": "a.txt"}
    result = {"content": [{"type": "text", "text": "hello"}]}
    guard.before_call("read", args, tool_call_id="c1", session="s")
    shown = guard.after_call("read", args, result=result, tool_call_id="c1", session="s")
    assert shown is result  # no warning pending: the very same object (SPEC §12.5)
    [record] = guard.detector.history(session="s")
    assert isinstance(record, CallRecord)
    assert record.tool_name == "read"
    assert record.tool_call_id == "c1"
    assert record.result_hash == hash_outcome("read", args, result=result)[0]
    # The pending record is filled in, not duplicated.
    history = guard.detector.history(session="s")
    assert len(history) == 1
    assert history[0].result_hash == record.result_hash


def test_after_call_without_outcome_records_nothing() -> None:
    guard, _ = make_guard()
    guard.before_call("read", {"path": "a"})
    assert guard.after_call("read", {"path": "a"}) is None
    [record] = guard.detector.history()
    assert record.result_hash is None


def test_after_call_error_outcome_is_recorded() -> None:
    guard, _ = make_guard()
    args = {"name": "zap"}
    guard.before_call("invoke", args)
    assert guard.after_call("invoke", args, error=RuntimeError("Unknown tool: Zap")) is None
    [record] = guard.detector.history()
    assert record.no_progress is True  # every error proves nothing changed (SPEC §8.0)
    assert record.unknown_tool_name == "zap"
    assert (
        record.result_hash
        == hash_outcome("invoke", args, error=RuntimeError("Unknown tool: Zap"))[0]
    )


def test_non_str_tool_name_raises_type_error() -> None:
    guard, _ = make_guard()
    with pytest.raises(TypeError):
        guard.before_call(123, {})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        guard.after_call(None, {}, result=1)  # type: ignore[arg-type]


def test_detector_property_is_underlying_loop_detector() -> None:
    guard, _ = make_guard(small_config(warning_threshold=4))
    detector = guard.detector
    assert isinstance(detector, LoopDetector)
    assert guard.detector is detector
    assert detector.config.warning_threshold == 4
    guard.before_call("read", {"path": "x"})
    assert len(detector.history()) == 1


# ---------------------------------------------------------------- warnings


def test_warning_emitted_only_at_new_multiples(caplog: pytest.LogCaptureFixture) -> None:
    guard, events = make_guard()
    caplog.clear()
    args = {"q": "weather"}
    emitted_at: list[int] = []
    for i in range(11):
        # Results keep changing, so only the generic warning (recent count) can fire.
        decision = call(guard, "search", args, f"result {i}")
        verdict = decision.verdict
        assert decision.blocked is False
        assert decision.reason is None
        if i < 3:
            assert verdict.stuck is False
            assert decision.warning is None
            continue
        assert verdict.stuck is True
        assert verdict.level == "warning"
        assert verdict.detector == "generic_repeat"
        assert verdict.count == i
        if decision.warning is not None:
            assert decision.warning == verdict
            emitted_at.append(verdict.count)
    assert emitted_at == [3, 6, 9]

    warning_events = kinds(events, "warning")
    assert [e.count for e in warning_events] == [3, 6, 9]
    assert all(e.tool_name == "search" for e in warning_events)
    assert all(e.detector == "generic_repeat" for e in warning_events)
    assert len(loopcore_records(caplog, logging.WARNING)) == 3
    # Warned calls still run and are recorded.
    assert len(guard.detector.history()) == 11


def test_warning_message_is_for_the_model() -> None:
    guard, _ = make_guard()
    decisions = [call(guard, "search", {"q": "x"}, i) for i in range(4)]
    warning = decisions[-1].warning
    assert warning is not None
    assert warning.message.startswith("WARNING:")
    assert "search" in warning.message
    assert "3 times" in warning.message


def test_warning_dedup_is_per_scope() -> None:
    guard, events = make_guard()
    scopes = [(None, "a"), (None, "b"), ("s1", "a")]
    for i in range(4):
        for session, run_id in scopes:
            call(guard, "search", {"q": "x"}, i, session=session, run_id=run_id)
    warning_events = kinds(events, "warning")
    assert sorted(((e.session or ""), e.run_id) for e in warning_events) == sorted(
        ((s or ""), r) for s, r in scopes
    )
    assert all(e.count == 3 for e in warning_events)


def test_distinct_patterns_warn_independently() -> None:
    guard, events = make_guard()
    for i in range(4):
        call(guard, "search", {"q": "x"}, i)
    for i in range(4):
        call(guard, "search", {"q": "y"}, i)
    assert len(kinds(events, "warning")) == 2


@pytest.mark.parametrize(("others", "re_emitted"), [(255, False), (256, True)])
def test_warning_keys_capped_at_256_per_scope(others: int, re_emitted: bool) -> None:
    cfg = small_config(
        history_size=1000,
        warning_threshold=2,
        critical_threshold=50,
        global_circuit_breaker_threshold=60,
    )
    guard, _ = make_guard(cfg)
    serial = iter(range(10**6))
    for _ in range(3):
        call(guard, "probe", {"k": 0}, next(serial))
    for k in range(1, others + 1):
        for _ in range(3):
            call(guard, "probe", {"k": k}, next(serial))
    # Count 3 is no new multiple of 2: only a forgotten key warns again.
    decision = call(guard, "probe", {"k": 0}, next(serial))
    assert decision.verdict.level == "warning"
    assert decision.verdict.count == 3
    assert (decision.warning is not None) is re_emitted


# ---------------------------------------------------------------- blocking


def _drive_to_block(guard: ToolLoopGuard, **scope: Any) -> Decision:
    """Five identical calls with identical outcomes, then the sixth is blocked."""
    for _ in range(5):
        decision = call(guard, "read", {"path": "/tmp/a"}, "same", **scope)
        assert decision.blocked is False
    return guard.before_call("read", {"path": "/tmp/a"}, **scope)


def test_critical_blocks_and_is_not_recorded(caplog: pytest.LogCaptureFixture) -> None:
    guard, events = make_guard()
    caplog.clear()
    decision = _drive_to_block(guard, session="s", run_id="r")
    verdict = decision.verdict
    assert decision.blocked is True
    assert verdict.level == "critical"
    assert verdict.detector == "generic_repeat"
    assert verdict.count == 5
    assert decision.reason == verdict.message
    assert decision.reason.startswith("CRITICAL:")
    assert "identical outcomes" in decision.reason
    assert decision.warning is None
    # The blocked call is recorded as a loop veto (SPEC §8.1).
    history = guard.detector.history(session="s", run_id="r")
    assert len(history) == 6
    assert history[-1].outcome_kind == "tool-loop-veto"

    errors = loopcore_records(caplog, logging.ERROR)
    assert len(errors) == 1
    [block] = kinds(events, "block")
    assert block.session == "s"
    assert block.run_id == "r"
    assert block.tool_name == "read"
    assert block.detector == "generic_repeat"
    assert block.level == "critical"
    assert block.count == 5
    assert block.message == decision.reason


def test_block_is_sticky_until_the_call_changes(caplog: pytest.LogCaptureFixture) -> None:
    guard, events = make_guard()
    assert _drive_to_block(guard).blocked is True
    caplog.clear()
    expected = [("generic_repeat", 6), ("generic_repeat", 7), ("global_circuit_breaker", 8)]
    for detector, count in expected:
        retry = guard.before_call("read", {"path": "/tmp/a"})
        assert retry.blocked is True
        assert retry.terminal is True  # the second critical of the run (SPEC §8.2)
        # Each veto counts: the streak grows until the breaker (8 here) takes over.
        assert (retry.verdict.detector, retry.verdict.count) == (detector, count)
    # Every blocked attempt is reported; the log keeps the 2nd and 4th (storm control).
    assert len(loopcore_records(caplog, logging.ERROR)) == 2
    assert len(kinds(events, "block")) == 4
    assert len(guard.detector.history()) == 9

    different = call(guard, "read", {"path": "/tmp/b"}, "other")
    assert different.blocked is False
    assert len(guard.detector.history()) == 10
    # Two unrelated calls (one alone would read as a ping-pong pair, which ranks
    # above the generic critical) do not lift the block on the looping call.
    assert call(guard, "list", {"dir": "/tmp"}, "listing").blocked is False
    assert guard.before_call("read", {"path": "/tmp/a"}).blocked is True


def test_block_in_one_scope_does_not_leak() -> None:
    guard, _ = make_guard()
    assert _drive_to_block(guard, run_id="r1").blocked is True
    assert guard.before_call("read", {"path": "/tmp/a"}, run_id="r2").blocked is False
    assert guard.before_call("read", {"path": "/tmp/a"}).blocked is False


# ---------------------------------------------------------------- post-compaction


def test_arm_post_compaction_emits_event_and_info(caplog: pytest.LogCaptureFixture) -> None:
    guard, events = make_guard(None)
    caplog.clear()
    guard.arm_post_compaction(session="s", run_id="r")
    infos = [r.getMessage() for r in loopcore_records(caplog, logging.INFO)]
    # The line names its scope (SPEC §9.3, §12.2).
    assert infos == ["post-compaction guard armed for 3 attempts [session=s run_id=r]"]
    [armed] = events
    assert armed.kind == "guard_armed"
    assert armed.session == "s"
    assert armed.run_id == "r"
    assert armed.count == 3
    assert armed.detector is None
    assert armed.level is None


def test_identical_calls_after_compaction_abort(caplog: pytest.LogCaptureFixture) -> None:
    guard, events = make_guard(None)
    args = {"path": "/var/log/app.log"}
    guard.arm_post_compaction(session="s", run_id="r")
    caplog.clear()
    for _ in range(2):
        guard.before_call("read", args, session="s", run_id="r")
        guard.after_call("read", args, result="tail", session="s", run_id="r")
    assert kinds(events, "compaction_abort") == []
    guard.before_call("read", args, session="s", run_id="r")
    with pytest.raises(CompactionLoopPersisted) as info:
        guard.after_call("read", args, result="tail", session="s", run_id="r")
    assert info.value.count == 3
    assert info.value.tool_name == "read"
    assert info.value.detector == "compaction_loop_persisted"

    [abort] = kinds(events, "compaction_abort")
    assert abort.detector == "compaction_loop_persisted"
    assert abort.level == "critical"
    assert abort.count == 3
    assert abort.tool_name == "read"
    assert abort.session == "s"
    assert abort.run_id == "r"
    assert len(loopcore_records(caplog, logging.ERROR)) == 1


def test_window_size_from_config() -> None:
    guard, _ = make_guard({"postCompactionGuard": {"windowSize": 2}})
    guard.arm_post_compaction()
    guard.after_call("read", {"p": 1}, result="x")
    with pytest.raises(CompactionLoopPersisted):
        guard.after_call("read", {"p": 1}, result="x")


def test_changing_results_after_compaction_do_not_abort() -> None:
    guard, events = make_guard(None)
    guard.arm_post_compaction()
    for i in range(3):
        guard.before_call("read", {"p": 1})
        guard.after_call("read", {"p": 1}, result=f"version {i}")
    # The window is used up: identical outcomes from now on are the detectors' business.
    for _ in range(4):
        guard.before_call("read", {"p": 1})
        guard.after_call("read", {"p": 1}, result="steady")
    assert kinds(events, "compaction_abort") == []


def test_post_compaction_guard_is_per_scope() -> None:
    guard, _ = make_guard(None)
    guard.arm_post_compaction(run_id="armed")
    for _ in range(5):
        guard.after_call("read", {"p": 1}, result="x", run_id="other")
        guard.after_call("read", {"p": 1}, result="x")
    guard.after_call("read", {"p": 1}, result="x", run_id="armed")
    guard.after_call("read", {"p": 1}, result="x", run_id="armed")
    with pytest.raises(CompactionLoopPersisted):
        guard.after_call("read", {"p": 1}, result="x", run_id="armed")


def test_post_compaction_counts_outcomes_that_record_nothing() -> None:
    guard, _ = make_guard(None)
    vetoed = {"details": {"status": "blocked", "deniedReason": "tool-loop"}}
    guard.arm_post_compaction()
    # after_call hands back the result it was given (nothing to annotate).
    assert guard.after_call("exec", {"cmd": "ls"}, result=vetoed) is vetoed
    assert guard.after_call("exec", {"cmd": "ls"}, result=vetoed) is vetoed
    with pytest.raises(CompactionLoopPersisted):
        guard.after_call("exec", {"cmd": "ls"}, result=vetoed)


def test_disabled_config_arm_is_silent(caplog: pytest.LogCaptureFixture) -> None:
    guard, events = make_guard({"enabled": False})
    caplog.clear()
    guard.arm_post_compaction()
    for _ in range(4):
        guard.after_call("read", {"p": 1}, result="x")
    assert events == []
    assert loopcore_records(caplog) == []


# ---------------------------------------------------------------- events and logging hygiene


def test_loop_event_fields_for_ping_pong_warning() -> None:
    guard, events = make_guard()
    call(guard, "read", {"path": "a"}, "r1", session="s", run_id="r")
    call(guard, "write", {"path": "b"}, "w1", session="s", run_id="r")
    decision = call(guard, "read", {"path": "a"}, "r2", session="s", run_id="r")
    assert decision.warning is not None
    [event] = events
    assert isinstance(event, LoopEvent)
    assert event.kind == "warning"
    assert event.session == "s"
    assert event.run_id == "r"
    assert event.tool_name == "read"
    assert event.detector == "ping_pong"
    assert event.level == "warning"
    assert event.count == 3
    assert event.paired_tool_name == "write"
    assert event.message == decision.verdict.message
    assert "ping-pong loop" in event.message


SECRETS = ("sk-SECRET-123", "sk-SECRET-RESULT-456", "sk-SECRET-ERR-789")


def test_logs_and_events_never_contain_arguments_or_results(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard, events = make_guard()
    secret_args = {"api_key": "sk-SECRET-123", "q": "balance"}
    secret_result = {"content": [{"type": "text", "text": "token sk-SECRET-RESULT-456"}]}

    guard.arm_post_compaction(session="s", run_id="r")
    for _ in range(2):
        call(guard, "fetch", secret_args, secret_result, session="s", run_id="r")
    with pytest.raises(CompactionLoopPersisted):
        call(guard, "fetch", secret_args, secret_result, session="s", run_id="r")
    # Keep going until a warning and then a block are produced for the same secret call.
    for _ in range(3):
        call(guard, "fetch", secret_args, secret_result, session="s", run_id="r")
    assert guard.before_call("fetch", secret_args, session="s", run_id="r").blocked is True

    error = RuntimeError("login failed for sk-SECRET-ERR-789")
    for _ in range(6):
        decision = guard.before_call("login", secret_args)
        if not decision.blocked:
            guard.after_call("login", secret_args, error=error)
    assert decision.blocked is True

    assert {e.kind for e in events} == {"guard_armed", "compaction_abort", "warning", "block"}
    assert loopcore_records(caplog)
    for record in caplog.records:
        rendered = (record.getMessage(), str(record.msg), repr(record.args))
        for secret in SECRETS:
            assert all(secret not in text for text in rendered), record.getMessage()
    for event in events:
        for field in EVENT_FIELDS:
            value = repr(getattr(event, field))
            assert all(secret not in value for secret in SECRETS), field


def _raising(_event: LoopEvent) -> None:
    raise RuntimeError("host callback failed")


def test_on_event_raising_does_not_break_the_call(caplog: pytest.LogCaptureFixture) -> None:
    guard = ToolLoopGuard(small_config(), on_event=_raising)
    caplog.clear()
    decisions = [call(guard, "search", {"q": "x"}, "same") for _ in range(4)]
    assert decisions[-1].warning is not None
    assert decisions[-1].blocked is False
    # The callback failure is reported at ERROR; the warning itself is a WARNING.
    assert loopcore_records(caplog, logging.ERROR)
    assert len(guard.detector.history()) == 4

    call(guard, "search", {"q": "x"}, "same")
    blocked = guard.before_call("search", {"q": "x"})
    assert blocked.blocked is True
    assert blocked.verdict.detector == "generic_repeat"


def test_on_event_raising_keeps_compaction_abort() -> None:
    guard = ToolLoopGuard(on_event=_raising)
    guard.arm_post_compaction()
    guard.after_call("read", {"p": 1}, result="x")
    guard.after_call("read", {"p": 1}, result="x")
    with pytest.raises(CompactionLoopPersisted):
        guard.after_call("read", {"p": 1}, result="x")


# ---------------------------------------------------------------- end_run / end_session


def test_end_run_clears_history_and_warning_memory() -> None:
    guard, events = make_guard()
    for i in range(4):
        call(guard, "search", {"q": "x"}, i, session="s", run_id="r")
    call(guard, "search", {"q": "x"}, 0, session="s", run_id="keep")
    assert len(kinds(events, "warning")) == 1

    guard.end_run(session="s", run_id="r")
    assert guard.detector.history(session="s", run_id="r") == []
    assert len(guard.detector.history(session="s", run_id="keep")) == 1
    for i in range(4):
        call(guard, "search", {"q": "x"}, i, session="s", run_id="r")
    # History starts empty again, so the same pattern warns afresh at 3.
    assert [e.count for e in kinds(events, "warning")] == [3, 3]


def test_end_session_clears_all_its_runs() -> None:
    guard, events = make_guard()
    for session, run_id in (("s", "r1"), ("s", "r2"), ("t", "r1")):
        for i in range(4):
            call(guard, "search", {"q": "x"}, i, session=session, run_id=run_id)
    assert len(kinds(events, "warning")) == 3

    guard.end_session("s")
    assert guard.detector.history(session="s", run_id="r1") == []
    assert guard.detector.history(session="s", run_id="r2") == []
    assert len(guard.detector.history(session="t", run_id="r1")) == 4
    for i in range(4):
        call(guard, "search", {"q": "x"}, i, session="s", run_id="r1")
    assert len(kinds(events, "warning")) == 4


def test_end_run_lifts_a_block() -> None:
    guard, _ = make_guard()
    assert _drive_to_block(guard, run_id="r").blocked is True
    guard.end_run(run_id="r")
    assert guard.before_call("read", {"path": "/tmp/a"}, run_id="r").blocked is False


# ---------------------------------------------------------------- wrap()


def test_wrap_sync_hashes_bound_arguments_with_defaults() -> None:
    guard, _ = make_guard()
    ran: list[str] = []

    @guard.wrap
    def read(path: str, mode: str = "r") -> str:
        ran.append(path)
        return f"contents of {path}"

    assert read("a.txt") == "contents of a.txt"
    assert ran == ["a.txt"]
    [record] = guard.detector.history()
    bound = {"path": "a.txt", "mode": "r"}
    assert record.tool_name == "read"
    assert record.args_hash == hash_call("read", bound)
    assert record.result_hash == hash_outcome("read", bound, result="contents of a.txt")[0]


def test_wrap_positional_and_keyword_calls_are_the_same_call() -> None:
    guard, _ = make_guard()

    @guard.wrap
    def f(a: int, b: int, c: int = 3) -> int:
        return a + b + c

    f(1, 2)
    f(a=1, b=2)
    f(1, b=2, c=3)
    f(b=2, a=1)
    hashes = {r.args_hash for r in guard.detector.history()}
    assert hashes == {hash_call("f", {"a": 1, "b": 2, "c": 3})}
    f(1, 2, 4)
    assert guard.detector.history()[-1].args_hash == hash_call("f", {"a": 1, "b": 2, "c": 4})


def test_wrap_with_name_sync() -> None:
    guard, _ = make_guard()

    @guard.wrap(name="read")
    def read_impl(path: str) -> str:
        return path.upper()

    assert read_impl("x") == "X"
    [record] = guard.detector.history()
    assert record.tool_name == "read"
    assert record.args_hash == hash_call("read", {"path": "x"})


@pytest.mark.asyncio
async def test_wrap_async_records_call_and_result() -> None:
    guard, _ = make_guard()

    @guard.wrap
    async def fetch(url: str, timeout: int = 5) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"status": 200, "url": url}

    assert await fetch("https://example.test") == {"status": 200, "url": "https://example.test"}
    [record] = guard.detector.history()
    bound = {"url": "https://example.test", "timeout": 5}
    assert record.tool_name == "fetch"
    assert record.args_hash == hash_call("fetch", bound)
    expected = hash_outcome("fetch", bound, result={"status": 200, "url": "https://example.test"})
    assert record.result_hash == expected[0]


@pytest.mark.asyncio
async def test_wrap_with_name_async() -> None:
    guard, _ = make_guard()

    @guard.wrap(name="read")
    async def read_async(path: str) -> str:
        await asyncio.sleep(0)
        return path

    assert await read_async("y") == "y"
    [record] = guard.detector.history()
    assert record.tool_name == "read"
    assert record.args_hash == hash_call("read", {"path": "y"})


def test_wrap_sync_blocked_call_does_not_run() -> None:
    guard, events = make_guard()
    ran: list[int] = []

    @guard.wrap
    def status(job: str) -> str:
        ran.append(1)
        return "pending"

    shown = [status("j1") for _ in range(5)]
    # The warned call (the 4th: 3 earlier identical calls) returns with the model's note.
    note = "[System note: Tool-loop warning after 3 repeated calls."
    assert [s.startswith("pending\n\n" + note) for s in shown] == [False] * 3 + [True, False]
    assert [s for i, s in enumerate(shown) if i != 3] == ["pending"] * 4
    with pytest.raises(ToolLoopBlocked) as info:
        status("j1")
    assert len(ran) == 5
    exc = info.value
    assert isinstance(exc, Exception)
    assert not isinstance(exc, loopcore.ToolLoopRunTerminated)  # the first critical
    assert exc.verdict.level == "critical"
    assert exc.verdict.detector == "generic_repeat"
    assert exc.reason == exc.verdict.message
    assert exc.result_text.startswith(exc.reason + "\n\nDo not repeat this exact tool action.")
    assert len(guard.detector.history()) == 6
    assert len(kinds(events, "block")) == 1


@pytest.mark.asyncio
async def test_wrap_async_blocked_call_does_not_run() -> None:
    guard, _ = make_guard()
    ran: list[int] = []

    @guard.wrap(name="status")
    async def status_async(job: str) -> str:
        ran.append(1)
        await asyncio.sleep(0)
        return "pending"

    for _ in range(5):
        await status_async("j1")
    with pytest.raises(ToolLoopBlocked) as info:
        await status_async("j1")
    assert len(ran) == 5
    assert info.value.verdict.detector == "generic_repeat"
    assert info.value.reason == info.value.verdict.message


def test_wrap_sync_errors_are_recorded_and_reraised() -> None:
    guard, _ = make_guard()
    raised: list[Exception] = []

    @guard.wrap
    def dispatch(tool: str) -> None:
        exc = LookupError(f"unknown tool: {tool}")
        raised.append(exc)
        raise exc

    for _ in range(3):
        with pytest.raises(LookupError) as info:
            dispatch("zorblax")
        assert info.value is raised[-1]
    history = guard.detector.history()
    assert [r.unknown_tool_name for r in history] == ["zorblax"] * 3
    error = LookupError("unknown tool: zorblax")
    expected = hash_outcome("dispatch", {"tool": "zorblax"}, error=error)[0]
    assert all(r.result_hash == expected for r in history)

    with pytest.raises(ToolLoopBlocked) as blocked:
        dispatch("zorblax")
    assert len(raised) == 3
    assert blocked.value.verdict.detector == "unknown_tool_repeat"
    assert blocked.value.verdict.count == 3
    assert "zorblax" in blocked.value.reason


@pytest.mark.asyncio
async def test_wrap_async_errors_are_recorded_and_reraised() -> None:
    guard, _ = make_guard()
    attempts: list[int] = []

    @guard.wrap
    async def dispatch(tool: str) -> None:
        attempts.append(1)
        await asyncio.sleep(0)
        raise RuntimeError(f"Tool '{tool}' not found")

    for _ in range(3):
        with pytest.raises(RuntimeError, match="not found"):
            await dispatch("ghost")
    assert [r.unknown_tool_name for r in guard.detector.history()] == ["ghost"] * 3
    with pytest.raises(ToolLoopBlocked) as blocked:
        await dispatch("ghost")
    assert len(attempts) == 3
    assert blocked.value.verdict.detector == "unknown_tool_repeat"


def test_wrap_propagates_compaction_abort() -> None:
    guard, _ = make_guard(None)
    ran: list[int] = []

    @guard.wrap
    def read(path: str) -> str:
        ran.append(1)
        return "same"

    guard.arm_post_compaction()
    read("a")
    read("a")
    with pytest.raises(CompactionLoopPersisted):
        read("a")
    assert len(ran) == 3


# ---------------------------------------------------------------- scope()


def test_scope_context_manager_routes_wrapped_calls() -> None:
    guard, _ = make_guard()

    @guard.wrap
    def read(path: str) -> str:
        return path

    with guard.scope(session="s", run_id="r"):
        read("a")
        with guard.scope(session="s", run_id="inner"):
            read("b")
        read("c")
    read("d")

    def paths(**scope: Any) -> list[int]:
        return [r.args_hash for r in guard.detector.history(**scope)]

    assert paths(session="s", run_id="r") == [
        hash_call("read", {"path": "a"}),
        hash_call("read", {"path": "c"}),
    ]
    assert paths(session="s", run_id="inner") == [hash_call("read", {"path": "b"})]
    assert paths() == [hash_call("read", {"path": "d"})]
    assert all(r.session == "s" for r in guard.detector.history(session="s", run_id="r"))


def test_calls_without_scope_keywords_use_the_active_scope() -> None:
    # SPEC §9.2: a keyword left out is the active scope()'s; one given (None too) wins.
    guard, _ = make_guard()
    with guard.scope(session="s", run_id="r"):
        guard.before_call("read", {"path": "a"})
        guard.before_call("read", {"path": "b"}, session=None, run_id=None)
        guard.before_call("read", {"path": "c"}, run_id="other")
    assert [r.args_hash for r in guard.detector.history(session="s", run_id="r")] == [
        hash_call("read", {"path": "a"})
    ]
    assert [r.args_hash for r in guard.detector.history()] == [hash_call("read", {"path": "b"})]
    assert len(guard.detector.history(session="s", run_id="other")) == 1


@pytest.mark.asyncio
async def test_concurrent_tasks_keep_separate_histories() -> None:
    guard, events = make_guard()
    body_runs: dict[str, int] = {}

    @guard.wrap
    async def lookup(key: str) -> str:
        run = asyncio.current_task().get_name()  # type: ignore[union-attr]
        body_runs[run] = body_runs.get(run, 0) + 1
        await asyncio.sleep(0)
        return "no change"

    async def worker(run_id: str, calls: int) -> int:
        asyncio.current_task().set_name(run_id)  # type: ignore[union-attr]
        blocked = 0
        with guard.scope(session="agent", run_id=run_id):
            for _ in range(calls):
                await asyncio.sleep(0)
                try:
                    await lookup("same-key")
                except ToolLoopBlocked:
                    blocked += 1
        return blocked

    # Together the tasks make 16 identical calls; only the task that alone
    # exceeds the critical threshold (5) may be blocked.
    results = await asyncio.gather(worker("loop", 8), worker("a", 4), worker("b", 4))
    assert results == [3, 0, 0]
    assert body_runs == {"loop": 5, "a": 4, "b": 4}
    # Five calls that ran and three loop vetoes (SPEC §8.1).
    assert len(guard.detector.history(session="agent", run_id="loop")) == 8
    assert len(guard.detector.history(session="agent", run_id="a")) == 4
    assert len(guard.detector.history(session="agent", run_id="b")) == 4
    assert guard.detector.history() == []
    assert {e.run_id for e in kinds(events, "block")} == {"loop"}


def test_a_bound_before_call_keeps_its_guard_alive() -> None:
    # Like any bound method: holding guard.before_call keeps the guard usable.
    import gc

    guard = ToolLoopGuard({"enabled": True, "warningThreshold": 2, "criticalThreshold": 3})
    before, after = guard.before_call, guard.after_call
    del guard
    gc.collect()
    decisions = []
    for _ in range(4):
        decisions.append(before("read", {"path": "a"}))
        after("read", {"path": "a"}, result="same")
    assert [d.blocked for d in decisions] == [False, False, False, True]
    assert decisions[2].warning is not None


def test_a_dropped_guard_is_collected() -> None:
    import gc
    import weakref

    guard = ToolLoopGuard({"enabled": True})
    guard.before_call("read", {})
    ref = weakref.ref(guard)
    del guard
    gc.collect()
    assert ref() is None

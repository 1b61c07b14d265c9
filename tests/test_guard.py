"""SPEC §6: the post-compaction guard, standalone and as wired into ToolLoopGuard."""

from __future__ import annotations

import logging

import pytest

from loopcore import (
    CompactionLoopPersisted,
    GuardVerdict,
    LoopDetectionConfig,
    PostCompactionGuard,
    ToolLoopGuard,
)

from .conftest import loopcore_records

# Runs on both twins (see conftest).
pytestmark = pytest.mark.usefixtures("twin")

ABORT = "compaction_loop_persisted"


def assert_idle(verdict: GuardVerdict) -> None:
    """The verdict a disarmed or disabled guard gives: nothing happened."""
    assert verdict.should_abort is False
    assert verdict.armed is False
    assert verdict.remaining_attempts == 0
    assert verdict.detector is None
    assert verdict.count == 0
    assert verdict.tool_name is None
    assert verdict.message is None


@pytest.fixture(autouse=True)
def _capture_loopcore(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="loopcore")


# ---------------------------------------------------------------- standalone guard


def test_new_guard_is_disarmed_with_default_window() -> None:
    guard = PostCompactionGuard()
    assert guard.armed is False
    assert guard.remaining_attempts == 0
    guard.arm()
    # The default window is 3 attempts.
    assert guard.armed is True
    assert guard.remaining_attempts == 3


def test_observe_before_arm_does_nothing() -> None:
    guard = PostCompactionGuard()
    for _ in range(5):
        assert_idle(guard.observe("read", 1, 2))
    assert guard.armed is False
    assert guard.remaining_attempts == 0


@pytest.mark.parametrize("window", [1, 3, 5])
def test_arm_sets_remaining_and_logs_exact_info(
    window: int, caplog: pytest.LogCaptureFixture
) -> None:
    guard = PostCompactionGuard(window_size=window)
    caplog.clear()
    guard.arm()
    assert guard.armed is True
    assert guard.remaining_attempts == window
    infos = loopcore_records(caplog, logging.INFO)
    assert [r.getMessage() for r in infos] == [f"post-compaction guard armed for {window} attempts"]


def test_disabled_guard_never_arms_or_aborts() -> None:
    guard = PostCompactionGuard(window_size=3, enabled=False)
    guard.arm()
    for _ in range(6):
        assert_idle(guard.observe("read", 1, 2))
    assert guard.armed is False
    assert guard.remaining_attempts == 0


def test_identical_triples_abort_on_last_attempt(caplog: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard(window_size=3)
    guard.arm()
    caplog.clear()

    first = guard.observe("read_file", 11, 22)
    assert first.should_abort is False
    assert first.armed is True
    assert first.remaining_attempts == 2
    assert first.count == 1
    assert first.detector is None

    second = guard.observe("read_file", 11, 22)
    assert second.should_abort is False
    assert second.remaining_attempts == 1
    assert second.count == 2
    assert second.detector is None
    assert loopcore_records(caplog, logging.ERROR) == []

    third = guard.observe("read_file", 11, 22)
    assert third.should_abort is True
    assert third.detector == ABORT
    assert third.count == 3
    assert third.tool_name == "read_file"
    assert third.remaining_attempts == 0
    assert third.message is not None
    assert "read_file" in third.message
    assert "3" in third.message

    errors = loopcore_records(caplog, logging.ERROR)
    assert len(errors) == 1
    assert "read_file" in errors[0].getMessage()
    # An abort disarms the guard.
    assert guard.armed is False
    assert guard.remaining_attempts == 0


def test_identical_triples_with_no_result_hash_still_abort() -> None:
    # An outcome that records nothing still counts as an attempt with the same triple.
    guard = PostCompactionGuard(window_size=3)
    guard.arm()
    verdicts = [guard.observe("exec", 7, None) for _ in range(3)]
    assert [v.should_abort for v in verdicts] == [False, False, True]
    assert verdicts[-1].detector == ABORT


@pytest.mark.parametrize(
    "triples",
    [
        [("read", 1, 10), ("read", 1, 11), ("read", 1, 12)],
        [("read", 1, 10), ("read", 1, 10), ("read", 1, 11)],
        [("read", 1, 10), ("read", 1, 11), ("read", 1, 10)],
        [("read", 1, 10), ("read", 2, 10), ("read", 1, 10)],
        [("read", 1, 10), ("write", 1, 10), ("read", 1, 10)],
    ],
    ids=["all-results-differ", "last-differs", "middle-differs", "args-differ", "tool-differs"],
)
def test_changing_triples_never_abort(
    triples: list[tuple[str, int, int]], caplog: pytest.LogCaptureFixture
) -> None:
    guard = PostCompactionGuard(window_size=3)
    guard.arm()
    caplog.clear()
    verdicts = [guard.observe(*t) for t in triples]
    assert not any(v.should_abort for v in verdicts)
    assert all(v.detector is None for v in verdicts)
    assert [v.remaining_attempts for v in verdicts] == [2, 1, 0]
    assert guard.armed is False
    assert loopcore_records(caplog, logging.ERROR) == []


def test_count_is_number_of_equal_triples_in_window() -> None:
    guard = PostCompactionGuard(window_size=5)
    guard.arm()
    counts = [
        guard.observe(*t).count
        for t in [("a", 1, 1), ("a", 1, 2), ("a", 1, 1), ("b", 1, 1), ("a", 1, 1)]
    ]
    assert counts == [1, 1, 2, 1, 3]


def test_disarms_after_window_attempts() -> None:
    guard = PostCompactionGuard(window_size=3)
    guard.arm()
    for result in (1, 2, 3):
        guard.observe("read", 5, result)
    assert guard.armed is False
    assert guard.remaining_attempts == 0
    # Once disarmed, even a run of identical triples cannot abort.
    for _ in range(4):
        assert_idle(guard.observe("read", 5, 9))


def test_after_abort_guard_is_inert() -> None:
    guard = PostCompactionGuard(window_size=2)
    guard.arm()
    guard.observe("read", 5, 9)
    assert guard.observe("read", 5, 9).should_abort is True
    for _ in range(3):
        assert_idle(guard.observe("read", 5, 9))


def test_rearm_clears_window_and_restores_attempts() -> None:
    guard = PostCompactionGuard(window_size=3)
    guard.arm()
    guard.observe("read", 5, 9)
    guard.observe("read", 5, 9)
    assert guard.remaining_attempts == 1

    guard.arm()
    assert guard.armed is True
    assert guard.remaining_attempts == 3
    # Earlier triples are gone: the next identical one is the first in the new window.
    again = guard.observe("read", 5, 9)
    assert again.should_abort is False
    assert again.count == 1
    assert guard.observe("read", 5, 9).should_abort is False
    assert guard.observe("read", 5, 9).should_abort is True


def test_window_size_one_aborts_on_first_attempt() -> None:
    guard = PostCompactionGuard(window_size=1)
    guard.arm()
    verdict = guard.observe("exec", 3, 4)
    assert verdict.should_abort is True
    assert verdict.detector == ABORT
    assert verdict.count == 1
    assert verdict.tool_name == "exec"
    assert guard.armed is False


def test_window_size_five() -> None:
    guard = PostCompactionGuard(window_size=5)
    guard.arm()
    verdicts = [guard.observe("search", 8, 8) for _ in range(5)]
    assert [v.should_abort for v in verdicts] == [False, False, False, False, True]
    assert [v.count for v in verdicts] == [1, 2, 3, 4, 5]
    assert [v.remaining_attempts for v in verdicts] == [4, 3, 2, 1, 0]
    last = verdicts[-1]
    assert last.detector == ABORT
    assert last.message is not None
    assert "search" in last.message
    assert "5" in last.message


def test_window_size_five_with_one_change_never_aborts() -> None:
    guard = PostCompactionGuard(window_size=5)
    guard.arm()
    results = [8, 8, 8, 8, 9]
    verdicts = [guard.observe("search", 8, r) for r in results]
    assert not any(v.should_abort for v in verdicts)
    assert guard.armed is False


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "3", None])
def test_window_size_must_be_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="window_size"):
        PostCompactionGuard(window_size=bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the exception


def _trip(guard: ToolLoopGuard, tool: str, attempts: int) -> CompactionLoopPersisted:
    """Arm the guard and repeat one call with one result until the abort is raised."""
    args = {"path": "/etc/motd"}
    guard.arm_post_compaction()
    for _ in range(attempts - 1):
        guard.before_call(tool, args)
        guard.after_call(tool, args, result="same text")
    guard.before_call(tool, args)
    with pytest.raises(CompactionLoopPersisted) as info:
        guard.after_call(tool, args, result="same text")
    return info.value


def test_compaction_loop_persisted_attributes_and_text() -> None:
    exc = _trip(ToolLoopGuard(), "read_file", 3)
    assert isinstance(exc, Exception)
    assert exc.detector == ABORT
    assert exc.count == 3
    assert exc.tool_name == "read_file"
    text = str(exc)
    assert ABORT in text
    assert "read_file" in text
    assert "3" in text


def test_compaction_loop_persisted_reflects_window_size() -> None:
    guard = ToolLoopGuard({"postCompactionGuard": {"windowSize": 4}})
    exc = _trip(guard, "list_dir", 4)
    assert exc.count == 4
    assert exc.tool_name == "list_dir"
    assert "4" in str(exc)
    assert "list_dir" in str(exc)


# ---------------------------------------------------------------- config switch


def _run_identical(guard: ToolLoopGuard, n: int) -> None:
    args = {"q": "x"}
    for _ in range(n):
        guard.before_call("search", args)
        guard.after_call("search", args, result="nothing new")


@pytest.mark.parametrize(
    "config",
    [
        {"enabled": False},
        LoopDetectionConfig(enabled=False),
    ],
    ids=["mapping", "dataclass"],
)
def test_enabled_false_turns_guard_off(config: object, caplog: pytest.LogCaptureFixture) -> None:
    events: list[object] = []
    guard = ToolLoopGuard(config, on_event=events.append)
    caplog.clear()
    guard.arm_post_compaction()
    assert loopcore_records(caplog, logging.INFO) == []
    # Window-many identical calls and more: with the guard off nothing aborts.
    _run_identical(guard, 6)
    assert events == []


@pytest.mark.parametrize(
    "config",
    [None, {}, {"enabled": True}, LoopDetectionConfig()],
    ids=["no-config", "empty-block", "enabled-true", "default-dataclass"],
)
def test_guard_on_unless_explicitly_disabled(config: object) -> None:
    guard = ToolLoopGuard(config)
    guard.arm_post_compaction()
    _run_identical(guard, 2)
    with pytest.raises(CompactionLoopPersisted):
        _run_identical(guard, 1)

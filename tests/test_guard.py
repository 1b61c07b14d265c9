"""SPEC §6: the post-compaction guard, standalone and as wired into ToolLoopGuard."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore import (
    CompactionLoopPersisted,
    GuardVerdict,
    LoopDetectionConfig,
    PostCompactionGuard,
    ToolLoopGuard,
    hash_call,
    hash_outcome,
)
from loopcore._guard import (
    BASELINE,
    WindowSummary,
    arm_quietly,
    close_quietly,
    log_abort,
    log_armed,
    log_window_closed,
    observe_quietly,
    window_closed_text,
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


def info_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in loopcore_records(caplog, logging.INFO)]


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


def test_observe_before_arm_does_nothing_but_remember_the_call() -> None:
    # §8.16 changed §6: a disarmed observe adds the call's signature to the baseline.
    guard = PostCompactionGuard()
    for _ in range(5):
        assert_idle(guard.observe("read", 1, 2))
    assert guard.armed is False
    assert guard.remaining_attempts == 0
    armed, _ = arm_quietly(guard)
    assert armed is True
    _, closed = observe_quietly(guard, "read", 1, 3)
    assert closed is None
    assert close_quietly(guard) == WindowSummary(1, 1, ("read",))


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


def test_disabled_guard_never_arms_or_aborts(caplog: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard(window_size=3, enabled=False)
    caplog.clear()
    guard.arm()
    for _ in range(6):
        assert_idle(guard.observe("read", 1, 2))
    assert guard.armed is False
    assert guard.remaining_attempts == 0
    assert guard.close_window() is None
    # §12.20: not even the armed line.
    assert loopcore_records(caplog) == []


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
    # §8.10: the last attempt closes the window with its summary.
    assert info_lines(caplog) == [
        "post-compaction window closed: toolCalls=3 preCompactionRepeats=0"
    ]


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


# ---------------------------------------------------------------- §8.10 re-read window


def see(guard: PostCompactionGuard, tool: str, args: Any, result: Any) -> GuardVerdict:
    """Feed the guard one call and its outcome, hashed as the hook hashes them."""
    result_hash, _ = hash_outcome(tool, args, result=result)
    return guard.observe(tool, hash_call(tool, args), result_hash)


def test_re_read_example_after_compaction(caplog: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard()
    see(guard, "read", {"path": "/report.md"}, "draft 1")
    see(guard, "exec", {"command": "ls"}, "report.md")
    guard.arm()
    see(guard, "read", {"path": "/report.md"}, "draft 2")  # a new result: still a re-read
    see(guard, "read", {"path": "/other.md"}, "other")
    see(guard, "gateway", {"action": "probe"}, {"ok": True})
    assert info_lines(caplog) == [
        "post-compaction guard armed for 3 attempts",
        "post-compaction window closed: toolCalls=3 preCompactionRepeats=1 tools=read",
    ]
    assert loopcore_records(caplog, logging.ERROR) == []
    assert guard.armed is False
    assert guard.remaining_attempts == 0


def test_re_read_example_with_an_evicted_baseline(caplog: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard()
    for i in range(20):
        see(guard, "read", {"path": f"/old-{i}.md"}, f"text {i}")
    guard.arm()
    see(guard, "read", {"path": "/old-0.md"}, "text 0")  # evicted: 16 calls are kept
    see(guard, "read", {"path": "/old-19.md"}, "text 19")
    see(guard, "gateway", {"action": "probe"}, {"ok": True})
    assert info_lines(caplog) == [
        "post-compaction guard armed for 3 attempts",
        "post-compaction window closed: toolCalls=3 preCompactionRepeats=1 tools=read",
    ]
    assert loopcore_records(caplog, logging.ERROR) == []


def test_baseline_holds_the_last_sixteen_signatures() -> None:
    assert BASELINE == 16
    guard = PostCompactionGuard(window_size=4)
    for i in range(17):
        guard.observe("read", i, None)
    assert len(guard._baseline) == 16  # bounded, whatever the run's length
    arm_quietly(guard)
    # 0 fell out; 1 and 16 are the oldest and newest kept; 99 was never seen.
    summaries = [observe_quietly(guard, "read", h, h)[1] for h in (0, 1, 16, 99)]
    assert summaries == [None, None, None, WindowSummary(4, 2, ("read",))]
    assert close_quietly(guard) is None  # the fourth attempt already closed it
    guard.arm()
    _, closed = arm_quietly(guard)
    assert closed == WindowSummary(0, 0, ())
    for i in range(1000):
        guard.observe("read", i, None)
    assert len(guard._baseline) == 16


def test_window_summary_of_the_last_attempt_is_returned_quietly() -> None:
    guard = PostCompactionGuard(window_size=3)
    for args_hash in (1, 2):
        observe_quietly(guard, "read", args_hash, 0)
    observe_quietly(guard, "write", 3, 0)
    assert arm_quietly(guard) == (True, None)
    results = [
        observe_quietly(guard, "write", 3, 10),
        observe_quietly(guard, "read", 1, 10),
        observe_quietly(guard, "read", 1, 11),
    ]
    assert [closed for _, closed in results] == [None, None, WindowSummary(3, 3, ("read", "write"))]
    assert [v.remaining_attempts for v, _ in results] == [2, 1, 0]
    assert guard.armed is False


def test_a_signature_seen_inside_a_window_is_in_the_next_baseline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = PostCompactionGuard(window_size=2)
    guard.arm()
    guard.observe("search", 5, 1)
    caplog.clear()
    guard.arm()  # re-arm: closes the open window first, then snapshots
    assert info_lines(caplog) == [
        "post-compaction window closed: toolCalls=1 preCompactionRepeats=0",
        "post-compaction guard armed for 2 attempts",
    ]
    caplog.clear()
    guard.observe("search", 5, 2)
    assert guard.close_window() == WindowSummary(1, 1, ("search",))
    assert info_lines(caplog) == [
        "post-compaction window closed: toolCalls=1 preCompactionRepeats=1 tools=search"
    ]


def test_re_arm_right_after_arming_closes_an_empty_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = PostCompactionGuard(window_size=1)
    guard.arm()
    caplog.clear()
    guard.arm()
    assert info_lines(caplog) == [
        "post-compaction window closed: toolCalls=0 preCompactionRepeats=0",
        "post-compaction guard armed for 1 attempts",
    ]
    assert guard.remaining_attempts == 1


def test_abort_closes_the_window_without_summary(caplog: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard(window_size=3)
    guard.observe("read", 7, 1)
    guard.arm()
    caplog.clear()
    for _ in range(2):
        assert observe_quietly(guard, "read", 7, 1)[1] is None
    verdict, closed = observe_quietly(guard, "read", 7, 1)
    assert verdict.should_abort is True
    assert closed is None
    assert guard.remaining_attempts == 0
    # Nothing is left open: closing, ending the run or re-arming reports no old window.
    assert guard.close_window() is None
    guard.arm()
    assert info_lines(caplog) == ["post-compaction guard armed for 3 attempts"]


def test_standalone_abort_logs_only_the_error(caplog: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard(window_size=2)
    guard.observe("read", 7, 1)
    guard.arm()
    caplog.clear()
    guard.observe("read", 7, 1)
    assert guard.observe("read", 7, 1).should_abort is True
    assert info_lines(caplog) == []
    assert len(loopcore_records(caplog, logging.ERROR)) == 1


def test_close_window_reports_an_open_window_once(caplog: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard(window_size=5)
    guard.observe("exec", 1, None)
    guard.arm()
    guard.observe("exec", 1, None)
    guard.observe("exec", 2, None)
    caplog.clear()
    assert guard.close_window() == WindowSummary(2, 1, ("exec",))
    assert guard.armed is False
    assert guard.remaining_attempts == 0
    assert guard.close_window() is None
    assert close_quietly(guard) is None
    assert info_lines(caplog) == [
        "post-compaction window closed: toolCalls=2 preCompactionRepeats=1 tools=exec"
    ]
    # Disarmed again: identical calls cannot abort.
    assert_idle(guard.observe("exec", 1, None))


def test_close_without_a_window_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    guard = PostCompactionGuard()
    guard.observe("read", 1, 1)
    caplog.clear()
    assert guard.close_window() is None
    assert close_quietly(guard) is None
    assert loopcore_records(caplog) == []


def test_disabled_guard_stores_nothing_and_stays_silent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = PostCompactionGuard(enabled=False)
    caplog.clear()
    for i in range(5):
        assert observe_quietly(guard, "read", i, i) == (GuardVerdict(), None)
    assert len(guard._baseline) == 0
    assert arm_quietly(guard) == (False, None)
    assert guard.remaining_attempts == 0
    assert close_quietly(guard) is None
    guard.arm()
    guard.observe("read", 1, 1)
    assert loopcore_records(caplog) == []


def test_a_result_hash_of_none_is_an_ordinary_observation() -> None:
    guard = PostCompactionGuard(window_size=3)
    observe_quietly(guard, "exec", 1, None)
    arm_quietly(guard)
    assert observe_quietly(guard, "exec", 1, None)[1] is None
    assert observe_quietly(guard, "exec", 2, None)[1] is None
    verdict, closed = observe_quietly(guard, "exec", 1, 5)
    assert verdict.should_abort is False
    assert closed == WindowSummary(3, 2, ("exec",))


def test_tool_names_are_kept_as_exact_str() -> None:
    class Name(str):
        pass

    guard = PostCompactionGuard(window_size=2)
    guard.observe(Name("read"), 1, 1)
    guard.arm()
    guard.observe(Name("read"), 1, 2)
    assert [type(tool) for tool, _ in guard._baseline] == [str, str]
    summary = guard.close_window()
    assert summary == WindowSummary(1, 1, ("read",))
    assert type(summary.tools[0]) is str


@pytest.mark.parametrize(
    ("summary", "text"),
    [
        (
            WindowSummary(0, 0, ()),
            "post-compaction window closed: toolCalls=0 preCompactionRepeats=0",
        ),
        (
            WindowSummary(3, 1, ("read",)),
            "post-compaction window closed: toolCalls=3 preCompactionRepeats=1 tools=read",
        ),
        (
            WindowSummary(5, 4, ("exec", "read", "web.fetch")),
            "post-compaction window closed: toolCalls=5 preCompactionRepeats=4 "
            "tools=exec,read,web.fetch",
        ),
    ],
)
def test_window_closed_text(summary: WindowSummary, text: str) -> None:
    assert window_closed_text(summary) == text


def test_log_steps_append_the_suffix_and_pass_extra(caplog: pytest.LogCaptureFixture) -> None:
    suffix = " [session='s1' run_id='r1']"
    caplog.clear()
    log_armed(3, suffix, {"loopcore_event": "guard_armed"})
    log_window_closed(WindowSummary(3, 1, ("read",)), suffix, {"loopcore_event": "guard_closed"})
    abort = GuardVerdict(True, False, 0, ABORT, 3, "read", "m")
    log_abort(abort, 3, suffix, {"loopcore_event": "compaction_abort"})
    records = loopcore_records(caplog)
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.INFO, "post-compaction guard armed for 3 attempts [session='s1' run_id='r1']"),
        (
            logging.INFO,
            "post-compaction window closed: toolCalls=3 preCompactionRepeats=1 tools=read"
            " [session='s1' run_id='r1']",
        ),
        (
            logging.ERROR,
            "post-compaction guard aborted the run: tool=read count=3 window=3"
            " [session='s1' run_id='r1']",
        ),
    ]
    events = [getattr(r, "loopcore_event", None) for r in records]
    assert events == ["guard_armed", "guard_closed", "compaction_abort"]


# A guard's life as a script: ("obs", tool, args_hash, result_hash) | ("arm",) | ("close",).
guard_steps = st.lists(
    st.tuples(st.just("obs"), st.sampled_from("ab"), st.integers(0, 20), st.integers(0, 1))
    | st.tuples(st.sampled_from(["arm", "close"])),
    max_size=60,
)


@given(st.integers(1, 4), guard_steps)
def test_window_summaries_match_a_reference(window: int, script: list[tuple[Any, ...]]) -> None:
    guard = PostCompactionGuard(window_size=window)
    seen: list[tuple[str, int]] = []  # every signature ever observed
    attempts: list[tuple[Any, ...]] | None = None  # the open window's triples
    snapshot: set[tuple[str, int]] = set()

    def expected_summary() -> WindowSummary:
        assert attempts is not None
        hits = [t for t in attempts if (t[0], t[1]) in snapshot]
        return WindowSummary(len(attempts), len(hits), tuple(sorted({t[0] for t in hits})))

    for step in script:
        if step[0] == "arm":
            expected = expected_summary() if attempts is not None else None
            assert arm_quietly(guard) == (True, expected)
            snapshot, attempts = set(seen[-16:]), []
        elif step[0] == "close":
            expected = expected_summary() if attempts is not None else None
            assert close_quietly(guard) == expected
            attempts = None
        else:
            triple = step[1:]
            verdict, closed = observe_quietly(guard, *triple)
            if attempts is None:
                assert (verdict, closed) == (GuardVerdict(), None)
            else:
                attempts.append(triple)
                aborts = attempts.count(triple) >= window
                assert verdict.should_abort is aborts
                if aborts:
                    assert closed is None
                    attempts = None
                elif len(attempts) == window:
                    assert closed == expected_summary()
                    attempts = None
                else:
                    assert closed is None
            seen.append((step[1], step[2]))
        assert guard.armed is (attempts is not None)


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
def test_enabled_false_turns_guard_off(config: Any, caplog: pytest.LogCaptureFixture) -> None:
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
def test_guard_on_unless_explicitly_disabled(config: Any) -> None:
    guard = ToolLoopGuard(config)
    guard.arm_post_compaction()
    _run_identical(guard, 2)
    with pytest.raises(CompactionLoopPersisted):
        _run_identical(guard, 1)

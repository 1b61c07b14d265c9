"""SPEC §8.11 and §12.13: the run-loop hard cutoffs, counted per scope by ``RunLoop``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore._runloop import RunLoop, RunStop, TurnCall, TurnDigest, digest_turn

# The encoding behind the idle signatures is twinned: run on both.
pytestmark = pytest.mark.usefixtures("twin")

TURNS_TEXT = (
    "Stopped this run because it reached the configured maximum of {} assistant turns (turnLimit)."
)
ERRORS_TEXT = (
    "Stopped this run because {} consecutive tool batches in a row ended in errors "
    "(maxConsecutiveErrorBatches)."
)
IDLE_TEXT = (
    "Stopped this run because the same tool was called with identical arguments {} times in a "
    "row without progress (maxIdleRepeatCalls)."
)

READ_A = TurnCall("read", {"path": "/a.md"})
READ_B = TurnCall("read", {"path": "/b.md"})
FAILED = TurnCall("exec", {"command": "make"}, is_error=True)
FAILED_2 = TurnCall("exec", {"command": "make test"}, is_error=True)


def turns(loop: RunLoop, *batches: list[Any]) -> list[RunStop | None]:
    return [loop.end_turn(batch) for batch in batches]


# ---------------------------------------------------------------- turnLimit


def test_turn_limit_stops_before_the_request_past_the_limit() -> None:
    loop = RunLoop(turn_limit=3)
    seen = []
    for _ in range(3):
        seen.append(loop.before_turn())
        assert loop.end_turn([READ_A]) is None
    assert seen == [None, None, None]
    assert loop.before_turn() == RunStop("turnLimit", 3, TURNS_TEXT.format(3))


def test_turn_limit_keeps_stopping_above_the_limit() -> None:
    loop = RunLoop(turn_limit=1)
    assert loop.before_turn() is None
    turns(loop, [], [], [])
    stop = loop.before_turn()
    assert stop is not None
    assert (stop.guard, stop.limit) == ("turnLimit", 1)
    assert stop.message == TURNS_TEXT.format(1)


def test_turn_limit_never_stops_a_run_that_ends_by_itself() -> None:
    loop = RunLoop(turn_limit=2)
    # end_turn never reports the turn limit: only the next request is refused.
    assert loop.before_turn() is None
    assert loop.end_turn([READ_A]) is None
    assert loop.before_turn() is None
    assert loop.end_turn([READ_B]) is None
    assert loop.turns == 2


def test_every_turn_counts_whatever_its_calls() -> None:
    loop = RunLoop(turn_limit=4)
    turns(loop, [], [TurnCall("x", 1, skipped=True)], [FAILED])
    assert loop.turns == 3
    assert loop.before_turn() is None
    loop.end_turn([READ_A])
    assert loop.before_turn() is not None


# ---------------------------------------------------------------- maxConsecutiveErrorBatches


def test_error_batches_at_below_and_above_the_limit() -> None:
    loop = RunLoop(max_error_batches=3)
    assert turns(loop, [FAILED], [FAILED, FAILED_2]) == [None, None]
    assert loop.error_streak == 2
    stop = loop.end_turn([FAILED])
    assert stop == RunStop("maxConsecutiveErrorBatches", 3, ERRORS_TEXT.format(3))
    # Above the limit the stop is reported again.
    assert loop.end_turn([FAILED_2]) == stop


@pytest.mark.parametrize(
    "breaker",
    [
        [],
        [FAILED._replace(skipped=True)],
        [READ_A],
        [FAILED, READ_A],
        [READ_A, FAILED, FAILED_2],
    ],
    ids=["no-calls", "only-skipped", "success", "error-then-success", "success-first"],
)
def test_a_turn_not_all_errors_resets_the_streak(breaker: list[TurnCall]) -> None:
    loop = RunLoop(max_error_batches=2)
    assert loop.end_turn([FAILED]) is None
    assert loop.end_turn(breaker) is None
    assert loop.error_streak == 0
    assert loop.end_turn([FAILED]) is None
    assert loop.end_turn([FAILED]) is not None


def test_skipped_calls_do_not_hide_an_all_error_turn() -> None:
    loop = RunLoop(max_error_batches=2)
    pre_empted = READ_A._replace(skipped=True)
    assert loop.end_turn([FAILED, pre_empted]) is None
    stop = loop.end_turn([pre_empted, FAILED_2])
    assert stop is not None
    assert stop.guard == "maxConsecutiveErrorBatches"


def test_error_limit_of_one_stops_on_the_first_failed_batch() -> None:
    loop = RunLoop(max_error_batches=1)
    assert loop.end_turn([READ_A]) is None
    assert loop.end_turn([FAILED]) == RunStop(
        "maxConsecutiveErrorBatches", 1, ERRORS_TEXT.format(1)
    )


# ---------------------------------------------------------------- maxIdleRepeatCalls


def test_idle_repeats_at_below_and_above_the_limit() -> None:
    loop = RunLoop(max_idle_repeats=3)
    assert turns(loop, [READ_A], [READ_A]) == [None, None]
    stop = loop.end_turn([READ_A])
    assert stop == RunStop("maxIdleRepeatCalls", 3, IDLE_TEXT.format(3))
    assert loop.end_turn([READ_A]) == stop


def test_duplicates_in_one_turn_count_once() -> None:
    loop = RunLoop(max_idle_repeats=3)
    assert turns(loop, [READ_A, READ_A, READ_A], [READ_A, READ_A]) == [None, None]
    assert loop.end_turn([READ_A]) is not None


def test_a_signature_absent_from_a_turn_is_dropped() -> None:
    loop = RunLoop(max_idle_repeats=3)
    assert turns(loop, [READ_A], [READ_A], [READ_B], [READ_A], [READ_A]) == [None] * 5
    assert loop.end_turn([READ_A]) is not None


def test_each_signature_of_a_turn_is_counted() -> None:
    loop = RunLoop(max_idle_repeats=3)
    # b is there in turns 1-2 only, a in all three.
    assert turns(loop, [READ_A, READ_B], [READ_B, READ_A]) == [None, None]
    assert loop.end_turn([READ_A]) is not None
    # b's count was dropped at turn 3: two more turns of b alone are not enough.
    assert turns(loop, [READ_B], [READ_B]) == [None, None]


@pytest.mark.parametrize(
    "gap",
    [[], [READ_B._replace(skipped=True)]],
    ids=["no-calls", "only-skipped"],
)
def test_a_turn_without_calls_that_ran_leaves_counts_alone(gap: list[TurnCall]) -> None:
    loop = RunLoop(max_idle_repeats=3)
    assert turns(loop, [READ_A], gap, [READ_A], gap) == [None] * 4
    assert loop.end_turn([READ_A]) is not None


def test_skipped_calls_are_not_counted() -> None:
    loop = RunLoop(max_idle_repeats=2)
    skipped = READ_A._replace(skipped=True)
    assert turns(loop, [skipped, READ_B], [skipped, READ_B._replace(is_error=True)]) == [
        None,
        RunStop("maxIdleRepeatCalls", 2, IDLE_TEXT.format(2)),
    ]
    # a never counted, so a lone a now is its first.
    assert loop.end_turn([READ_A]) is None


def test_idle_repeats_ignore_results_and_errors() -> None:
    loop = RunLoop(max_idle_repeats=2)
    assert loop.end_turn([READ_A]) is None
    assert loop.end_turn([READ_A._replace(is_error=True, tool_call_id="c2")]) is not None


def test_args_are_compared_by_canonical_encoding() -> None:
    loop = RunLoop(max_idle_repeats=4)
    variants = [
        {"path": "/a", "limit": 1, "tags": ["x", "y"]},
        {"tags": ("x", "y"), "limit": 1.0, "path": "/a"},
        {"limit": 1, "path": "/a", "tags": ["x", "y"]},
    ]
    assert turns(loop, *[[("read", v)] for v in variants]) == [None] * 3
    assert loop.end_turn([("read", {"path": "/a", "tags": ["x", "y"], "limit": 1})]) is not None


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("read", {"n": 1}), ("read", {"n": True})),
        (("read", {"n": 1}), ("read", {"n": "1"})),
        (("read", {"path": "/a"}), ("write", {"path": "/a"})),
        # Raw args: no §2 reductions, so a reworded plan step and an exec title count.
        (
            ("update_plan", {"plan": [{"step": "one", "status": "pending"}]}),
            ("update_plan", {"plan": [{"step": "uno", "status": "pending"}]}),
        ),
        (
            ("exec", {"command": "ls", "title": "list"}),
            ("exec", {"command": "ls", "title": "look"}),
        ),
    ],
    ids=["int-vs-bool", "int-vs-str", "other-tool", "update-plan-wording", "exec-title"],
)
def test_different_calls_are_different_signatures(
    first: tuple[str, Any], second: tuple[str, Any]
) -> None:
    loop = RunLoop(max_idle_repeats=2)
    assert turns(loop, [first], [second], [first], [second]) == [None] * 4


class Hostile:
    def __repr__(self) -> str:
        raise RuntimeError("repr")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    def __hash__(self) -> int:
        raise RuntimeError("hash")


def _cycle() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def _deep(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "args",
    [Hostile(), {"x": Hostile()}, _cycle(), _deep(5000), b"\xff" * 10, {1: "a", "1": "b"}],
    ids=["hostile", "hostile-inside", "cycle", "deep", "bytes", "mixed-keys"],
)
def test_any_args_value_is_counted_without_raising(args: Any) -> None:
    loop = RunLoop(max_idle_repeats=2, max_error_batches=5)
    assert loop.end_turn([("probe", args)]) is None
    stop = loop.end_turn([TurnCall("probe", args)])
    assert stop is not None
    assert stop.guard == "maxIdleRepeatCalls"


# ---------------------------------------------------------------- both counters, one turn


def test_error_stop_wins_and_idle_counts_stay_exact() -> None:
    loop = RunLoop(max_error_batches=2, max_idle_repeats=2)
    assert loop.end_turn([FAILED]) is None
    stop = loop.end_turn([FAILED])
    assert stop is not None
    assert stop.guard == "maxConsecutiveErrorBatches"
    # The idle count went on too (a host in observe mode keeps going).
    stop = loop.end_turn([FAILED._replace(is_error=False)])
    assert stop == RunStop("maxIdleRepeatCalls", 2, IDLE_TEXT.format(2))


def test_no_cutoff_set_counts_turns_only() -> None:
    loop = RunLoop()
    assert loop.active is False
    for _ in range(50):
        assert loop.before_turn() is None
        assert loop.end_turn([FAILED, FAILED]) is None
    assert loop.turns == 50
    assert loop.error_streak == 0


@pytest.mark.parametrize(
    "limits",
    [(5, None, None), (None, 5, None), (None, None, 5), (1, 2, 3)],
)
def test_active_when_any_cutoff_is_set(limits: tuple[int | None, ...]) -> None:
    assert RunLoop(*limits).active is True


# ---------------------------------------------------------------- digest, then count


def test_digest_turn_sums_up_the_calls_that_ran() -> None:
    skipped_b = READ_B._replace(skipped=True)
    digest = digest_turn([READ_A, FAILED, READ_A, skipped_b])
    assert digest.ran is True
    assert digest.all_errors is False
    assert digest.signatures is not None
    # Distinct, first-seen order, skipped left out.
    assert len(digest.signatures) == 2
    assert digest_turn([FAILED, skipped_b]).all_errors is True
    assert digest_turn([skipped_b]) == TurnDigest(False, False, ())
    assert digest_turn([]) == TurnDigest(False, False, ())
    assert digest_turn([READ_A, FAILED], signatures=False) == TurnDigest(True, False, None)
    # The same call hashes alike turn after turn; another call differently.
    again = digest_turn([FAILED, READ_A]).signatures
    assert again is not None
    assert set(again) == set(digest.signatures)
    assert digest_turn([READ_B]).signatures != digest_turn([READ_A]).signatures


def test_counting_digests_is_ending_turns() -> None:
    by_digest = RunLoop(max_error_batches=2, max_idle_repeats=3)
    by_calls = RunLoop(max_error_batches=2, max_idle_repeats=3)
    script = [[READ_A], [FAILED], [FAILED, READ_A], [], [FAILED], [FAILED], [READ_A]]
    stops = [by_digest.count_turn(digest_turn(turn)) for turn in script]
    assert stops == [by_calls.end_turn(turn) for turn in script]
    # FAILED: 1, 2, (a turn without calls), 3 -> idle; then a second failed batch in a row.
    assert [s.guard if s else None for s in stops] == [
        None,
        None,
        None,
        None,
        "maxIdleRepeatCalls",
        "maxConsecutiveErrorBatches",
        None,
    ]


def test_a_digest_without_signatures_is_refused_when_idle_repeats_count() -> None:
    loop = RunLoop(max_idle_repeats=2)
    with pytest.raises(ValueError, match="digest: made with signatures=False"):
        loop.count_turn(digest_turn([READ_A], signatures=False))
    assert loop.turns == 0
    # Without that cutoff the args never need hashing.
    assert RunLoop(max_error_batches=1).count_turn(digest_turn([FAILED], signatures=False))


# ---------------------------------------------------------------- input checks


def test_plain_tuples_are_accepted() -> None:
    loop = RunLoop(max_error_batches=2, max_idle_repeats=9)
    assert loop.end_turn([("exec", {"command": "make"}, "call-1", True)]) is None
    assert loop.end_turn([("exec", {"command": "make"}, None, True, False)]) is not None


@pytest.mark.parametrize(
    ("calls", "fragment"),
    [
        (None, "calls: expected a sequence of TurnCall, got NoneType"),
        (iter([READ_A]), "calls: expected a sequence of TurnCall, got list_iterator"),
        ("read", "calls: expected a sequence of TurnCall, got str"),
        (READ_A, "calls: expected a sequence of TurnCall, got a single TurnCall"),
        ([READ_A, 3], "calls[1]: expected a TurnCall or a (tool, args, ...) tuple, got int"),
        ([("read",)], "calls[0]: expected a TurnCall or a (tool, args, ...) tuple, got a tuple"),
        ([("read", {}, None, False, False, 1)], "calls[0]: expected a TurnCall"),
        ([["read", {}]], "calls[0]: expected a TurnCall or a (tool, args, ...) tuple, got list"),
        ([READ_A, (b"read", {})], "calls[1].tool: expected a str, got bytes"),
        ([("read", {}, None, 1)], "calls[0].is_error: expected a bool, got int"),
        (
            [READ_A._replace(skipped="no")],  # type: ignore[arg-type]
            "calls[0].skipped: expected a bool, got str",
        ),
    ],
)
def test_bad_calls_raise_a_type_error_and_count_nothing(calls: Any, fragment: str) -> None:
    loop = RunLoop(turn_limit=3, max_error_batches=2, max_idle_repeats=2)
    loop.end_turn([FAILED])
    with pytest.raises(TypeError) as info:
        loop.end_turn(calls)
    assert fragment in str(info.value)
    assert loop.turns == 1
    assert loop.error_streak == 1
    # The idle count of FAILED is still 1: the next identical turn reaches 2 (and errors 2).
    stop = loop.end_turn([FAILED._replace(is_error=False)])
    assert stop is not None
    assert stop.guard == "maxIdleRepeatCalls"


@pytest.mark.parametrize("bad", [0, -3, True, 2.0, "3"])
@pytest.mark.parametrize("name", ["turn_limit", "max_error_batches", "max_idle_repeats"])
def test_limits_must_be_positive_integers_or_none(name: str, bad: object) -> None:
    with pytest.raises(ValueError, match=name) as info:
        RunLoop(**{name: bad})  # type: ignore[arg-type]
    assert str(info.value) == f"{name}: expected a positive integer or None, got {bad!r}"


# ---------------------------------------------------------------- against a reference model


@dataclass
class Reference:
    """The cutoffs computed from the whole run so far, not from running counters."""

    turn_limit: int | None
    error_limit: int | None
    idle_limit: int | None
    history: list[list[TurnCall]] = field(default_factory=list)

    def before_turn(self) -> str | None:
        if self.turn_limit is not None and len(self.history) >= self.turn_limit:
            return "turnLimit"
        return None

    def end_turn(self, calls: list[TurnCall]) -> str | None:
        self.history.append([c for c in calls if not c.skipped])
        if self.error_limit is not None:
            streak = 0
            for ran in reversed(self.history):
                if not ran or not all(c.is_error for c in ran):
                    break
                streak += 1
            if streak >= self.error_limit:
                return "maxConsecutiveErrorBatches"
        current = self.history[-1]
        if self.idle_limit is not None and current:
            # Turns where nothing ran neither count nor break a repeat.
            active = [{_key(c) for c in ran} for ran in self.history if ran]
            for key in {_key(c) for c in current}:
                repeats = 0
                for keys in reversed(active):
                    if key not in keys:
                        break
                    repeats += 1
                if repeats >= self.idle_limit:
                    return "maxIdleRepeatCalls"
        return None


def _key(call: TurnCall) -> str:
    # The generated args are JSON values without floats, whose canonical equality is JSON's.
    return json.dumps([call.tool, call.args], sort_keys=True)


json_args = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from(["", "a", "b"]),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from("xy"), inner),
    max_leaves=3,
)
turn_calls = st.builds(
    TurnCall,
    st.sampled_from(["read", "exec"]),
    json_args,
    st.none(),
    st.booleans(),
    st.booleans(),
)
limits = st.none() | st.integers(1, 4)
steps = st.lists(st.none() | st.lists(turn_calls, max_size=3), max_size=25)


@given(limits, limits, limits, steps)
def test_run_loop_matches_the_reference(
    turn_limit: int | None,
    error_limit: int | None,
    idle_limit: int | None,
    script: list[list[TurnCall] | None],
) -> None:
    loop = RunLoop(turn_limit, error_limit, idle_limit)
    reference = Reference(turn_limit, error_limit, idle_limit)
    limit_of = {
        "turnLimit": turn_limit,
        "maxConsecutiveErrorBatches": error_limit,
        "maxIdleRepeatCalls": idle_limit,
    }
    for step in script:
        # None: the host asks before a model request; a list: a finished turn.
        stop = loop.before_turn() if step is None else loop.end_turn(step)
        expected = reference.before_turn() if step is None else reference.end_turn(step)
        assert (stop.guard if stop else None) == expected
        if stop is not None:
            assert stop.limit == limit_of[stop.guard]
    assert loop.turns == len(reference.history)

"""Do the compiled and pure-Python history twins behave identically, step by step?

A hypothesis state machine drives two detectors, one per twin, with the same
random calls across several scopes, and compares verdicts and histories after
every step. The slab-specific behaviour of the compiled store (growth, row
reuse, LRU eviction, the name side table) is checked directly below.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from loopcore import LoopDetector, ToolLoopGuard, _ring_py
from loopcore._config import DetectorSwitches, LoopDetectionConfig
from loopcore._twins import COMPONENTS

from .conftest import TWINS, use_twin

# The conftest's rule: the compiled twin is compared whenever it is built, and must be
# when LOOPCORE_EXPECT_EXTENSIONS=1 (then a missing module fails the import here). An
# install without it (LOOPCORE_NO_EXTENSIONS, or PyPy from the sdist) has nothing to compare.
pytestmark = pytest.mark.skipif(
    "cython" not in TWINS, reason="the compiled twin is not built in this install"
)

if "cython" in TWINS:
    from loopcore import _ring_c
else:  # pragma: no cover
    _ring_c = _ring_py  # type: ignore[assignment]

PYTHON, COMPILED = "python", "cython"


def build(twin: str, config: Any, **kwargs: Any) -> LoopDetector:
    """A detector of one twin; it keeps its twin's store and per-call base once built."""
    with use_twin(twin):
        return LoopDetector(config, **kwargs)


def guard_on(twin: str, config: Any, **kwargs: Any) -> ToolLoopGuard:
    with use_twin(twin):
        return ToolLoopGuard(config, **kwargs)


def comparable(records: list[Any]) -> list[tuple[Any, ...]]:
    # Timestamps come from two clock reads; everything else must be equal.
    return [
        (r.tool_name, r.args_hash, r.tool_call_id, r.session, r.run_id, r.result_hash,
         r.unknown_tool_name)
        for r in records
    ]  # fmt: skip


def verdict_tuple(v: Any) -> tuple[Any, ...]:
    return (v.stuck, v.level, v.detector, v.count, v.message, v.paired_tool_name, v.warning_key)


SCOPES = [
    {"session": None, "run_id": None},
    {"session": "s1", "run_id": "r1"},
    {"session": "s1", "run_id": " r2 "},
    {"session": 7, "run_id": "r1"},
    {"session": ("tuple", "session"), "run_id": None},
]
CALLS = [
    ("read", {"path": "a.py"}),
    ("read", {"path": "b.py"}),
    ("grep", {"pattern": "x", "path": "."}),
    ("process", {"action": "poll", "sessionId": "p1"}),
    ("command_status", {"id": 3}),
    ("update_plan", {"plan": [{"step": "one", "status": "pending"}]}),
    ("exec", {"command": "make"}),
    ("message", {"action": "send", "to": "x"}),
    ("invoke", {"name": "zap"}),
]
OUTCOMES: list[dict[str, Any]] = [
    {"result": "same"},
    {"result": "other"},
    {"result": None},
    {"result": {"content": [{"type": "text", "text": "  ok  "}], "details": {"n": 1}}},
    {"result": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}},
    {"result": {"details": {"status": "running", "tail": "t"}}},
    {"result": {"details": {"status": "blocked", "deniedReason": "tool-loop"}}},
    {"result": {"details": {"status": "completed", "exitCode": 0, "aggregated": "done"}}},
    {"result": {"details": {"messageId": "m1", "ok": True}}},
    {"error": RuntimeError("Unknown tool: Zap")},
    {"error": "tool frob not found"},
    {"error": ValueError("boom")},
    {"result": [1, 2, {"k": "v"}]},
    {},
]
CALL_IDS = st.sampled_from([None, None, "c1", "c2"])


class TwinMachine(RuleBasedStateMachine):
    """Both twins see the same operations; every observable answer must match."""

    @initialize(
        history_size=st.integers(1, 8),
        warning=st.integers(1, 4),
        extra=st.integers(1, 3),
        unknown=st.integers(1, 3),
        switches=st.tuples(st.booleans(), st.booleans(), st.booleans()),
        max_scopes=st.integers(1, 4),
        # A few calls, outcomes and scopes per run, so repeats, streaks and
        # alternations long enough to reach the thresholds actually happen.
        calls=st.lists(st.sampled_from(CALLS), min_size=1, max_size=3, unique_by=repr),
        outcomes=st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=3, unique_by=repr),
        scopes=st.lists(st.sampled_from(SCOPES), min_size=1, max_size=2, unique_by=repr),
    )
    def setup(
        self,
        history_size: int,
        warning: int,
        extra: int,
        unknown: int,
        switches: tuple[bool, bool, bool],
        max_scopes: int,
        calls: list[tuple[str, Any]],
        outcomes: list[dict[str, Any]],
        scopes: list[dict[str, Any]],
    ) -> None:
        config = LoopDetectionConfig(
            enabled=True,
            history_size=history_size,
            warning_threshold=warning,
            critical_threshold=warning + extra,
            unknown_tool_threshold=unknown,
            global_circuit_breaker_threshold=warning + extra + 1,
            detectors=DetectorSwitches(*switches),
        )
        self.python = build(PYTHON, config, max_scopes=max_scopes)
        self.compiled = build(COMPILED, config, max_scopes=max_scopes)
        self.calls, self.outcomes, self.scopes = calls, outcomes, scopes

    def pick(self, call: int, scope: int) -> tuple[tuple[str, Any], dict[str, Any]]:
        return self.calls[call % len(self.calls)], self.scopes[scope % len(self.scopes)]

    @rule(call=st.integers(0, 2), scope=st.integers(0, 1))
    def check(self, call: int, scope: int) -> None:
        (tool, args), where = self.pick(call, scope)
        got = self.compiled.check(tool, args, **where)
        want = self.python.check(tool, args, **where)
        assert verdict_tuple(got) == verdict_tuple(want)

    @rule(call=st.integers(0, 2), scope=st.integers(0, 1), call_id=CALL_IDS)
    def record_call(self, call: int, scope: int, call_id: Any) -> None:
        (tool, args), where = self.pick(call, scope)
        self.compiled.record_call(tool, args, call_id, **where)
        self.python.record_call(tool, args, call_id, **where)

    @rule(call=st.integers(0, 2), scope=st.integers(0, 1), call_id=CALL_IDS, out=st.integers(0, 2))
    def record_outcome(self, call: int, scope: int, call_id: Any, out: int) -> None:
        (tool, args), where = self.pick(call, scope)
        outcome = self.outcomes[out % len(self.outcomes)]
        got = self.compiled.record_outcome(tool, args, tool_call_id=call_id, **where, **outcome)
        want = self.python.record_outcome(tool, args, tool_call_id=call_id, **where, **outcome)
        assert comparable([got] if got else []) == comparable([want] if want else [])

    @rule(call=st.integers(0, 2), scope=st.integers(0, 1), out=st.integers(0, 2))
    def call_with_outcome(self, call: int, scope: int, out: int) -> None:
        # What a gateway does most: check, record the call, record its outcome.
        self.check(call, scope)
        self.record_call(call, scope, None)
        self.record_outcome(call, scope, None, out)

    @rule(scope=st.integers(0, 1))
    def end_run(self, scope: int) -> None:
        where = self.scopes[scope % len(self.scopes)]
        self.compiled.end_run(**where)
        self.python.end_run(**where)

    @rule(scope=st.integers(0, 1))
    def end_session(self, scope: int) -> None:
        session = self.scopes[scope % len(self.scopes)]["session"]
        self.compiled.end_session(session)
        self.python.end_session(session)

    @invariant()
    def same_histories(self) -> None:
        if not hasattr(self, "python"):
            return
        for scope in SCOPES:
            got = comparable(self.compiled.history(**scope))
            assert got == comparable(self.python.history(**scope)), scope
            for tool, args in self.calls:
                got_verdict = self.compiled.check(tool, args, **scope)
                want_verdict = self.python.check(tool, args, **scope)
                assert verdict_tuple(got_verdict) == verdict_tuple(want_verdict)
        assert len(self.compiled._store) == len(self.python._store)


def test_twins_agree_on_random_call_sequences() -> None:
    run_state_machine_as_test(
        TwinMachine, settings=settings(max_examples=100, stateful_step_count=50, deadline=None)
    )


@given(
    steps=st.lists(
        st.tuples(st.sampled_from([0, 1, 1, 1, 2]), st.sampled_from(["x", "x", "y", None])),
        max_size=30,
    ),
    history_size=st.integers(2, 10),
    warning=st.integers(1, 4),
    extra=st.integers(1, 3),
)
def test_alternations_and_streaks_agree(
    steps: list[tuple[int, str | None]], history_size: int, warning: int, extra: int
) -> None:
    # Mostly strict A/B alternation (side 1 flips), with few distinct results,
    # so ping-pong tails and no-progress evidence reach the thresholds.
    config = {
        "enabled": True,
        "historySize": history_size,
        "warningThreshold": warning,
        "criticalThreshold": warning + extra,
    }
    detectors = [build(cls, config) for cls in (PYTHON, COMPILED)]
    side = 0
    for move, result in steps:
        side = {0: side, 1: 1 - side, 2: 2}[move]
        tool, args = CALLS[side]
        got, want = (verdict_tuple(d.check(tool, args)) for d in reversed(detectors))
        assert got == want
        for det in detectors:
            det.record_call(tool, args)
            if result is not None:
                det.record_outcome(tool, args, result=result)


@pytest.mark.parametrize("outcome", OUTCOMES, ids=repr)
@pytest.mark.parametrize("call", CALLS, ids=repr)
def test_record_outcome_hashes_like_the_python_rules(
    call: tuple[str, Any], outcome: dict[str, Any]
) -> None:
    # The compiled store hashes common outcomes itself; every rule must agree.
    config = {"enabled": True}
    compiled = build(COMPILED, config, send_tools=["notify"])
    python = build(PYTHON, config, send_tools=["notify"])
    got = compiled.record_outcome(*call, **outcome)
    want = python.record_outcome(*call, **outcome)
    assert comparable([got] if got else []) == comparable([want] if want else [])


def test_gateway_decisions_match_across_twins() -> None:
    config = {"enabled": True, "historySize": 12, "warningThreshold": 3, "criticalThreshold": 5}
    guards = [guard_on(cls, config) for cls in (PYTHON, COMPILED)]
    answers: list[list[tuple[Any, ...]]] = [[], []]
    for step in range(30):
        tool, args = CALLS[step % 2 if step < 16 else 0]
        for guard, seen in zip(guards, answers, strict=True):
            decision = guard.before_call(tool, args, run_id="r")
            seen.append((decision.blocked, decision.reason, verdict_tuple(decision.verdict)))
            if not decision.blocked:
                guard.after_call(tool, args, result="same", run_id="r")
    assert answers[0] == answers[1]
    assert any(blocked for blocked, _, _ in answers[1])


# -- the compiled slab ----------------------------------------------------------------------


def compiled_detector(**config: Any) -> LoopDetector:
    max_scopes = config.pop("max_scopes", 100_000)
    return build(COMPILED, {"enabled": True, **config}, max_scopes=max_scopes)


def test_slab_grows_by_doubling_and_keeps_every_row() -> None:
    det = compiled_detector(historySize=4)
    store = det._store
    first = store.capacity
    for n in range(first * 4 + 3):
        det.record_call("read", {"n": n}, f"id{n}", run_id=f"run{n}")
        det.record_outcome("read", {"n": n}, result=n, run_id=f"run{n}")
    assert store.capacity >= first * 4 + 3
    assert store.capacity & (store.capacity - 1) == 0  # doubled from a power of two
    for n in range(first * 4 + 3):
        (record,) = det.history(run_id=f"run{n}")
        assert (record.tool_call_id, record.run_id, record.result_hash is not None) == (
            f"id{n}", f"run{n}", True,
        )  # fmt: skip


def test_ended_runs_give_their_rows_back() -> None:
    det = compiled_detector(historySize=3)
    store = det._store
    for n in range(1000):
        det.record_call("read", {"n": n}, run_id=f"run{n}")
        det.end_run(run_id=f"run{n}")
    assert len(store) == 0
    assert store.capacity == 8  # one row, reused a thousand times
    det.record_call("read", {}, run_id="fresh")
    assert [r.tool_name for r in det.history(run_id="fresh")] == ["read"]


def test_ring_slot_bytes_match_the_layout() -> None:
    # Four 8-byte columns (args, result, call-id hashes, timestamp), two 4-byte name
    # indices and flags per record; the inline call id (a length byte and 32 bytes)
    # only in rows that hold one.
    det = compiled_detector(historySize=30)
    store = det._store
    assert store.slot_bytes == 4 * 8 + 2 * 4 + 1
    assert store.id_bytes == 1 + 32
    assert store.capacity == 8
    assert store.allocated_bytes == 0  # no scope, no row block


def test_a_scope_costs_memory_in_proportion_to_the_records_it_holds() -> None:
    small = compiled_detector(historySize=30, max_scopes=30_000)
    large = compiled_detector(historySize=1000, max_scopes=30_000)
    for det in (small, large):
        for n in range(20_000):
            det.record_call("read", {"n": n}, run_id=f"run{n}")
    assert large._store.allocated_bytes <= 2 * small._store.allocated_bytes
    assert small._store.allocated_bytes == 20_000 * 4 * 41  # the first block holds 4 records
    # Call ids add their bytes only to the rows that hold one.
    large.record_call("read", {}, "call_1", run_id="run0")
    assert large._store.allocated_bytes == 20_000 * 4 * 41 + 4 * 33


@pytest.mark.parametrize("calls", [1, 4, 5, 37, 64, 65, 300])
def test_a_growing_row_keeps_its_records_in_order(calls: int) -> None:
    det = compiled_detector(historySize=64)
    ids = [f"call_{n:024d}" if n % 3 else None for n in range(calls)]
    for n, call_id in enumerate(ids):
        det.record_call("read", {"n": n}, call_id, run_id="r")
        if n % 5 == 0:
            det.record_outcome("read", {"n": n}, result=n, tool_call_id=call_id, run_id="r")
    kept = det.history(run_id="r")
    assert [r.tool_call_id for r in kept] == ids[-64:]
    assert [r.result_hash is not None for r in kept] == [n % 5 == 0 for n in range(calls)][-64:]
    assert det._store.allocated_bytes == min(64, max(4, 1 << (calls - 1).bit_length())) * (
        41 + 33 * (calls > 1)
    )


def test_least_recently_used_scope_is_evicted_at_the_cap() -> None:
    det = compiled_detector(historySize=3, max_scopes=3)
    for run in ("a", "b", "c"):
        det.record_call("read", {"run": run}, run_id=run)
    det.check("read", {}, run_id="a")  # touching "a" makes "b" the oldest
    det.record_call("read", {"run": "d"}, run_id="d")
    assert det.history(run_id="b") == []
    assert [len(det.history(run_id=run)) for run in ("a", "c", "d")] == [1, 1, 1]
    assert det._store.capacity == 3


def test_name_table_stays_bounded_and_names_survive_sweeps() -> None:
    det = compiled_detector(historySize=2)
    store = det._store
    for n in range(5000):
        det.record_call(f"tool{n}", {}, f"call-{n}", run_id="r")
    assert store.name_count <= 2 * 1024 + 4
    assert [(r.tool_name, r.tool_call_id) for r in det.history(run_id="r")] == [
        ("tool4998", "call-4998"),
        ("tool4999", "call-4999"),
    ]


def test_session_index_survives_mixed_runs() -> None:
    det = compiled_detector(historySize=2)
    for session, run in (("s", "a"), ("s", "b"), ("t", "a"), ("s", None)):
        det.record_call("read", {}, session=session, run_id=run)
    det.end_run(session="s", run_id="a")
    det.end_session("s")
    assert len(det._store) == 1
    assert len(det.history(session="t", run_id="a")) == 1


class _Colliding:
    """A session whose hash collides with every other one of its kind."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        return 7

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Colliding) and other.name == self.name


def test_many_scopes_come_and_go_like_the_python_twin() -> None:
    # Thousands of scopes inserted, touched, ended and evicted: the compiled
    # scope table (open addressing with tombstones and rebuilds) must find
    # exactly the scopes the Python twin's dict finds, equal keys given as
    # different objects included.
    import random

    rng = random.Random(20261130)
    config = {"enabled": True, "historySize": 3}
    python = build(PYTHON, config, max_scopes=700)
    compiled = build(COMPILED, config, max_scopes=700)
    sessions: list[Any] = [None, "s", 5, *(_Colliding(f"c{n}") for n in range(40))]
    for step in range(12_000):
        session = rng.choice(sessions)
        if isinstance(session, _Colliding) and rng.random() < 0.5:
            session = _Colliding(session.name)  # equal, not identical
        run_id = f"run-{rng.randrange(400)}" if rng.random() < 0.9 else None
        if rng.random() < 0.3:
            run_id = "".join(run_id) if run_id else run_id  # an equal copy
        move = rng.random()
        for det in (python, compiled):
            if move < 0.75:
                det.record_call("read", {"step": step % 3}, session=session, run_id=run_id)
            elif move < 0.95:
                det.end_run(session=session, run_id=run_id)
            else:
                det.end_session(session)
        if step % 500 == 0 or move >= 0.75:
            assert comparable(compiled.history(session=session, run_id=run_id)) == comparable(
                python.history(session=session, run_id=run_id)
            )
        assert len(compiled._store) == len(python._store)
    for session in sessions:
        for run in range(400):
            run_id = f"run-{run}"
            assert comparable(compiled.history(session=session, run_id=run_id)) == comparable(
                python.history(session=session, run_id=run_id)
            )


@pytest.mark.parametrize("twin_name", TWINS)
def test_instances_take_their_per_call_methods_and_store_from_the_twin_in_force(
    twin_name: str,
) -> None:
    suffix = {"python": "py", "cython": "c"}[twin_name]
    with use_twin(twin_name):
        detector = LoopDetector({"enabled": True})
        guard = ToolLoopGuard({"enabled": True})
    for instance, method in ((detector, "check"), (guard, "before_call")):
        owner = next(k for k in type(instance).__mro__ if method in vars(k))
        assert owner.__module__ == f"loopcore._percall_{suffix}"
        assert type(instance._store).__module__ == f"loopcore._ring_{suffix}"
    assert isinstance(detector, LoopDetector)
    assert isinstance(guard, ToolLoopGuard)
    assert guard.detector.store is guard._store  # one store, shared


@pytest.mark.parametrize("component", COMPONENTS)
def test_each_compiled_module_has_a_python_twin_with_the_same_public_names(
    component: str,
) -> None:
    compiled = importlib.import_module(f"loopcore._{component}_c")
    python = importlib.import_module(f"loopcore._{component}_py")
    assert set(compiled.__all__) == set(python.__all__)
    for name in python.__all__:
        assert hasattr(compiled, name), name
        assert hasattr(python, name), name
    assert compiled.IMPLEMENTATION == "cython"
    assert python.IMPLEMENTATION == "python"

"""Do the compiled and pure-Python history twins behave identically, step by step?

A hypothesis state machine drives two detectors, one per twin, with the same
random calls across several scopes, and compares verdicts and histories after
every step; a second one drives the two ring stores directly with every
operation of their contract (vetoes, terminal failures, no-progress outcomes,
release, reconcile, call ids present, absent or rewritten) and compares every
scan, history and raw window. The slab-specific behaviour of the compiled store
(growth, row reuse, LRU eviction, the name side table, the lazy columns) is
checked directly below.
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
         r.unknown_tool_name, r.outcome_kind, r.failure_identity_hash, r.no_progress)
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
    {"result": {"details": {"status": "failed", "exitCode": 2, "aggregated": "no such file"}}},
    {"result": {"details": {"changed": False}}},
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


# -- the ring stores, operation by operation ----------------------------------------------

# Small pools, so that repeats, streaks, alternations, churns and call-id conflicts
# happen; hashes at both ends of the 64-bit range; call ids inline, too long to be
# kept inline, and not ASCII.
RING_TOOLS = ["exec", "write", "read"]
RING_HASHES = [0, 1, 2, 2**64 - 1, 3]
RING_RESULTS = [10, 2**64 - 2]
RING_IDS = [None, "c1", "c2", "call_" + "x" * 40, "ç-3"]
RING_KEYS = [(None, None), ("s", "r"), ("s", None)]
#: (kind, result?, identity?) of the outcomes attach is given (SPEC §8.0-§8.4)
RING_OUTCOMES = [
    (0, True, False),  # an ordinary result
    (0, True, False),
    (0, False, False),  # no result yet (a pending record stays pending)
    (1, False, False),  # a loop veto
    (2, True, True),  # a terminal exec failure with its identity
    (2, True, False),
    (3, True, False),  # an argument-validation failure
]


def raw(window: list[list[Any]]) -> list[list[Any]]:
    return [record[:3] + record[4:] for record in window]  # without the timestamp


class RingMachine(RuleBasedStateMachine):
    """Both ring stores get the same operations; every answer must be the same."""

    @initialize(
        history_size=st.integers(1, 12),
        max_scopes=st.integers(1, 3),
        tools=st.integers(1, 3),
        hashes=st.lists(st.sampled_from(RING_HASHES), min_size=2, max_size=4, unique=True),
        results=st.integers(1, len(RING_RESULTS)),
        scopes=st.integers(1, len(RING_KEYS)),
    )
    def setup(
        self,
        history_size: int,
        max_scopes: int,
        tools: int,
        hashes: list[int],
        results: int,
        scopes: int,
    ) -> None:
        self.stores = [
            _ring_py.RingStore(history_size, max_scopes),
            _ring_c.RingStore(history_size, max_scopes),
        ]
        self.tools, self.hashes = RING_TOOLS[:tools], hashes
        self.results, self.keys = RING_RESULTS[:results], RING_KEYS[:scopes]

    def both(self, method: str, *args: Any) -> Any:
        want, got = (getattr(store, method)(*args) for store in self.stores)
        assert got == want, (method, args)
        return got

    def call(self, data: st.DataObject) -> tuple[Any, str, int, str | None]:
        key = data.draw(st.sampled_from(self.keys))
        tool = data.draw(st.sampled_from(self.tools))
        return (
            key,
            tool,
            data.draw(st.sampled_from(self.hashes)),
            data.draw(st.sampled_from(RING_IDS)),
        )

    @rule(data=st.data(), veto=st.booleans())
    def append(self, data: st.DataObject, veto: bool) -> None:
        self.both("append", *self.call(data), 1 if veto else 0)

    @rule(
        data=st.data(),
        outcome=st.sampled_from(RING_OUTCOMES),
        unknown=st.sampled_from([None, None, None, "zap", "frob"]),
        # Mostly: churns need runs of no-progress outcomes.
        no_progress=st.sampled_from([True, True, True, False]),
        identity=st.sampled_from([5, 6]),
    )
    def attach(
        self,
        data: st.DataObject,
        outcome: tuple[int, bool, bool],
        unknown: str | None,
        no_progress: bool,
        identity: int,
    ) -> None:
        kind, with_result, with_identity = outcome
        result = data.draw(st.sampled_from(self.results)) if with_result else None
        args = (*self.call(data), result, unknown, kind, identity if with_identity else None)
        want, got = (store.attach(*args, no_progress=no_progress) for store in self.stores)
        assert comparable([got]) == comparable([want])

    @rule(data=st.data(), alarm=st.integers(0, 6), unknown_alarm=st.integers(0, 4))
    def scan_append(self, data: st.DataObject, alarm: int, unknown_alarm: int) -> None:
        self.both("scan_append", *self.call(data), alarm, unknown_alarm)

    @rule(data=st.data(), ids=st.lists(st.sampled_from([*RING_IDS[1:], "c9", 5])))
    def release(self, data: st.DataObject, ids: list[Any]) -> None:
        self.both("release", data.draw(st.sampled_from(self.keys)), ids)

    @rule(data=st.data())
    def reconcile(self, data: st.DataObject) -> None:
        self.both("reconcile", *self.call(data))

    @rule(key=st.sampled_from(RING_KEYS))
    def drop(self, key: Any) -> None:
        self.both("drop", key)

    @rule(key=st.sampled_from(RING_KEYS))
    def drop_session(self, key: Any) -> None:
        self.both("drop_session", key[0])

    @invariant()
    def same_answers(self) -> None:
        if not hasattr(self, "stores"):
            return
        python, compiled = self.stores
        for key in RING_KEYS:
            assert raw(compiled.window(key)) == raw(python.window(key)), key
            assert comparable(compiled.history(key)) == comparable(python.history(key)), key
            for tool in self.tools:
                for args_hash in self.hashes:
                    assert compiled.scan(key, tool, args_hash) == python.scan(key, tool, args_hash)
                    for alarm in (2, 3):
                        quiet = compiled.scan(key, tool, args_hash, alarm, alarm) is None
                        assert quiet == (python.scan(key, tool, args_hash, alarm, alarm) is None)
        assert (len(compiled), compiled.evicted) == (len(python), python.evicted)


def test_ring_stores_agree_on_every_operation() -> None:
    run_state_machine_as_test(
        RingMachine, settings=settings(max_examples=150, stateful_step_count=60, deadline=None)
    )


@given(
    cycle=st.lists(st.integers(0, 39), min_size=1, max_size=16, unique=True),
    rounds=st.integers(1, 4),
    data=st.data(),
    history_size=st.sampled_from([12, 40, 200]),
)
def test_churns_of_many_variants_agree(
    cycle: list[int], rounds: int, data: st.DataObject, history_size: int
) -> None:
    # Write no-ops cycling through up to 16 argument variants, 1-4 times each (the
    # stable count is 3), with a few vetoes, pending calls, other results and
    # progress mixed in: more variants than the compiled walk's table on the
    # stack holds, so the store's heap table is used too.
    noise = st.sampled_from(["", "", "", "", "", "", "veto", "pending", "other", "progress"])
    stores = [_ring_py.RingStore(history_size, 1), _ring_c.RingStore(history_size, 1)]
    key = (None, "r")
    for args_hash in cycle * rounds:
        extra = data.draw(noise)
        for store in stores:
            if extra in ("veto", "pending"):
                store.append(key, "write", args_hash, None, 1 if extra == "veto" else 0)
            else:
                result = 101 if extra == "other" else 100
                store.attach(key, "write", args_hash, None, result, None, 0, None, extra == "")
    for args_hash in range(40):
        want, got = (store.scan(key, "write", args_hash) for store in stores)
        assert got == want
        reconciled = [store.reconcile(key, "write", args_hash, None) for store in stores]
        assert reconciled[0] == reconciled[1]


def test_a_churn_of_twelve_stable_variants_is_counted_in_full() -> None:
    # 12 variants x 3 identical no-op results (SPEC §8.3): every variant stable.
    for store in (_ring_py.RingStore(40, 1), _ring_c.RingStore(40, 1)):
        for _ in range(3):
            for args_hash in range(12):
                store.attach((None, None), "write", args_hash, None, 7, None, 0, None, True)
        stats = store.scan((None, None), "write", 5)
        assert (stats.churn, stats.churn_variants) == (36, 12)
        assert store.scan((None, None), "write", 12).churn == 0  # a novel argument


# -- the compiled slab ----------------------------------------------------------------------


def compiled_detector(**config: Any) -> LoopDetector:
    max_scopes = config.pop("max_scopes", 100_000)
    return build(COMPILED, {"enabled": True, **config}, max_scopes=max_scopes)


def test_rows_are_taken_one_at_a_time_and_keep_their_records() -> None:
    # Rows come in chunks of 4,096 that never move: crossing a chunk boundary, and
    # the scope table growing (moved over a few slots per new scope), loses nothing.
    det = compiled_detector(historySize=4)
    store = det._store
    scopes = 4096 * 2 + 3
    for n in range(scopes):
        det.record_call("read", {"n": n}, f"id{n}", run_id=f"run{n}")
        det.record_outcome("read", {"n": n}, result=n, run_id=f"run{n}")
        assert store.capacity == n + 1  # one row per scope, no more
    for n in range(scopes):
        (record,) = det.history(run_id=f"run{n}")
        assert (record.tool_call_id, record.run_id, record.result_hash is not None) == (
            f"id{n}", f"run{n}", True,
        )  # fmt: skip


def test_the_scope_table_grows_in_steps_through_drops_and_evictions() -> None:
    # Scopes made, dropped and evicted while the table is moved to a larger one:
    # every live scope is found (in the new table or the old), none that left is.
    det = compiled_detector(historySize=2, max_scopes=3000)
    store = det._store
    live: set[int] = set()
    for n in range(9000):
        det.record_call("read", {}, run_id=f"run{n}")
        live.add(n)
        if n % 7 == 3:
            det.end_run(run_id=f"run{n - 2}")
            live.discard(n - 2)
        while len(live) > 3000:
            live.discard(min(live))  # the least recently used goes at the cap
    assert len(store) == len(live)
    for n in range(9000):
        assert bool(det.history(run_id=f"run{n}")) == (n in live), n
    assert store.capacity <= 3000


def test_ended_runs_give_their_rows_back() -> None:
    det = compiled_detector(historySize=3)
    store = det._store
    for n in range(1000):
        det.record_call("read", {"n": n}, run_id=f"run{n}")
        det.end_run(run_id=f"run{n}")
    assert len(store) == 0
    assert store.capacity == 1  # one row, reused a thousand times
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
    assert store.identity_bytes == 8  # only in rows that hold a terminal failure
    assert store.capacity == 0  # no scope, no row
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


def test_identity_hashes_take_a_column_only_in_rows_that_hold_one() -> None:
    store = _ring_c.RingStore(64, 10)
    for run in ("plain", "failing"):
        for n in range(5):
            store.attach((None, run), "exec", n, None, 9, None, 0, None, False)
    plain = store.allocated_bytes
    assert plain == 2 * 8 * store.slot_bytes  # five records each: blocks of 8
    store.attach((None, "failing"), "exec", 99, None, 9, None, 2, 1234, False)
    assert store.allocated_bytes == plain + 8 * store.identity_bytes
    for n in range(20):  # the row grows to 32 records, its identity column with it
        store.attach((None, "failing"), "exec", 100 + n, None, 9, None, 2, n, False)
    assert store.allocated_bytes == 8 * store.slot_bytes + 32 * (
        store.slot_bytes + store.identity_bytes
    )
    identities = [r.failure_identity_hash for r in store.history((None, "failing"))]
    assert identities == [None] * 5 + [1234, *range(20)]


@pytest.mark.parametrize("released", [{"c0"}, {"c4", "c6"}, {"c5", "c6", "c7", "c8"}])
def test_release_closes_up_a_wrapped_row_in_place(released: set[str]) -> None:
    # A full ring of 5 whose oldest record is mid-row, long and short call ids
    # (the long ones live beside the row, by slot): what is kept keeps its order
    # and ids, and the row takes new records after them.
    stores = [_ring_py.RingStore(5, 1), _ring_c.RingStore(5, 1)]
    ids = [f"c{n}" if n % 2 else f"c{n}" + "-" * 40 for n in range(9)]
    for store in stores:
        for n, call_id in enumerate(ids):
            store.append((None, None), "read", n, call_id)
        store.attach((None, None), "read", 6, ids[6], 1, None)  # complete: never released
    gone = [store.release((None, None), [i for i in ids if i.rstrip("-") in released])
            for store in stores]  # fmt: skip
    assert gone[0] == gone[1] == len(released - {"c0", "c6"})
    for store in stores:
        store.append((None, None), "read", 50, "after")
    want, got = (comparable(store.history((None, None))) for store in stores)
    assert got == want
    assert [r[2] for r in want][-1] == "after"


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

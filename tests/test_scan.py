"""Batch scans (SPEC §7): ``scan`` agrees with the sequential gateway and guard, call for call."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import loopcore
from loopcore import PostCompactionGuard, ToolLoopGuard, hash_call, hash_outcome
from loopcore.batch import (
    DETECTORS,
    CallTable,
    CallTableBuilder,
    EventError,
    ScanTotals,
    scan,
    sweep,
)
from loopcore.batch import _kernels as kernels_module
from loopcore.batch._table import name_hash

# The scans are compared with the sequential detector on each twin of the per-call core.
pytestmark = pytest.mark.usefixtures("twin")

LEVELS = {None: 0, "warning": 1, "critical": 2}

# -- generated traces -------------------------------------------------------------------------

SCOPES = [("s1", "a"), ("s1", "b"), (None, None), (7, "a")]
TOOLS = ["read", "exec", "process", "command_status", "update_plan"]
ARGS = [
    {"path": "a"},
    {"path": "b"},
    {"action": "poll", "sessionId": "x"},
    {"action": "log", "sessionId": "x"},
    {"plan": [{"step": "one", "status": "pending"}]},
]
VETO = {"content": [], "details": {"status": "blocked", "deniedReason": "tool-loop"}}
OUTCOMES: list[dict[str, Any]] = [
    {"result": 0},
    {"result": 1},
    {"result": None},
    {"result": {"content": [{"type": "text", "text": "same"}], "details": {"status": "running"}}},
    {"result": VETO},
    {"error": "unknown tool: browser"},
    {"error": "Tool 'fetch' not found"},
    {"error": "boom"},
    {},
]


@st.composite
def events(draw: st.DrawFn, max_size: int = 90) -> list[dict[str, Any]]:
    """Calls over a few scopes from small pools, so repeats, alternations and retries occur."""
    # A small per-trace palette makes long repeats and two-call alternations likely.
    palette = draw(
        st.lists(
            st.tuples(
                st.sampled_from(TOOLS),
                st.integers(0, len(ARGS) - 1),
                st.integers(0, len(OUTCOMES) - 1),
            ),
            min_size=1,
            max_size=4,
        )
    )
    scopes = draw(st.lists(st.sampled_from(SCOPES), min_size=1, max_size=3, unique=True))
    picks = draw(
        st.lists(
            st.tuples(
                st.integers(0, len(palette) - 1),
                st.integers(0, len(scopes) - 1),
                st.integers(0, 19),
            ),
            max_size=max_size,
        )
    )
    out: list[dict[str, Any]] = []
    for choice, scope_index, roll in picks:
        session, run_id = scopes[scope_index]
        if roll == 0:
            out.append({"type": "compaction", "session": session, "run_id": run_id})
            continue
        tool, args_index, outcome_index = palette[choice]
        outcome = OUTCOMES[outcome_index] if roll > 2 else OUTCOMES[(outcome_index + roll) % 9]
        out.append(
            {"tool": tool, "args": ARGS[args_index], "session": session, "run_id": run_id} | outcome
        )
    return out


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "enabled": draw(st.sampled_from([True, True, True, None, False])),
        "historySize": draw(st.integers(1, 12)),
        "warningThreshold": draw(st.integers(1, 8)),
        "criticalThreshold": draw(st.integers(1, 12)),
        "unknownToolThreshold": draw(st.integers(1, 6)),
        "globalCircuitBreakerThreshold": draw(st.integers(1, 14)),
        "detectors": {
            "genericRepeat": draw(st.booleans()),
            "knownPollNoProgress": draw(st.booleans()),
            "pingPong": draw(st.booleans()),
        },
        "postCompactionGuard": {"windowSize": draw(st.integers(1, 4))},
    }


def sequential(
    trace: list[dict[str, Any]], config: dict[str, Any]
) -> Iterator[tuple[loopcore.Verdict, bool]]:
    """Per call: ``before_call``'s verdict before it, and whether the guard aborts after it.

    The gateway records an allowed call with its outcome (a recorded loop veto as
    a veto, SPEC §8.1) and a blocked call as its own veto (the outcome dropped).
    The post-compaction guard sees every call of the trace as recorded.
    """
    guard_hook = ToolLoopGuard(config, max_scopes=1_000)
    guards: dict[tuple[Any, Any], PostCompactionGuard] = {}
    guard_on = config.get("enabled") is not False
    window = config["postCompactionGuard"]["windowSize"]
    for number, event in enumerate(trace):
        scope = (event.get("session"), event.get("run_id"))
        guard = guards.setdefault(scope, PostCompactionGuard(window, enabled=guard_on))
        if event.get("type") == "compaction":
            guard.arm()
            continue
        tool, args = event["tool"], event["args"]
        where = {"session": scope[0], "run_id": scope[1], "tool_call_id": f"c{number}"}
        decision = guard_hook.before_call(tool, args, **where)
        outcome = {key: event[key] for key in ("result", "error") if key in event}
        if not decision.blocked:
            # after_call leaves a loop-veto outcome to the veto a block records itself.
            record = guard_hook.after_call if outcome.get("result") is not VETO else None
            (record or guard_hook.detector.record_outcome)(tool, args, **outcome, **where)
        result_hash = hash_outcome(tool, args, **outcome)[0]
        aborted = guard.observe(tool, hash_call(tool, args), result_hash).should_abort
        yield decision.verdict, aborted


def assert_matches(trace: list[dict[str, Any]], config: dict[str, Any]) -> None:
    result = scan(trace, config)
    expected = list(sequential(trace, config))
    assert len(result) == len(expected)
    for index, (verdict, aborted) in enumerate(expected):
        got = (
            int(result.level[index]),
            DETECTORS[result.detector[index]],
            int(result.count[index]),
            bool(result.aborted[index]),
        )
        assert got == (LEVELS[verdict.level], verdict.detector, verdict.count, aborted), index
        assert result.verdict(index) == verdict, index


@pytest.fixture(autouse=True)
def _quiet_config_repairs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="loopcore")


@given(trace=events(), config=configs())
def test_scan_equals_the_sequential_detector_and_guard(
    trace: list[dict[str, Any]], config: dict[str, Any]
) -> None:
    assert_matches(trace, config)


@given(trace=events(max_size=60), config=configs())
def test_scan_is_the_same_when_scopes_are_split_into_many_blocks(
    trace: list[dict[str, Any]], config: dict[str, Any]
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernels_module, "_BLOCK", 3)
        assert_matches(trace, config)


def test_long_loops_fire_every_detector_and_agree() -> None:
    poll = {"action": "poll", "sessionId": "build"}
    running = {"content": [], "details": {"status": "running", "tail": "3/7"}}
    trace: list[dict[str, Any]] = []
    for i in range(45):
        trace.append({"tool": "process", "args": poll, "result": running, "run_id": "poll"})
        side = i % 2
        pair = {"tool": ["read", "exec"][side], "args": {"n": side}, "result": side}
        trace.append(pair | {"run_id": "pingpong"})
        missing = {"tool": "browser", "args": {"i": i}, "error": "unknown tool: browser"}
        trace.append(missing | {"run_id": "missing"})
        trace.append({"tool": "grep", "args": {"q": 1}, "result": 1, "run_id": "same"})
    trace.insert(100, {"type": "compaction", "run_id": "same"})
    config = {"enabled": True, "postCompactionGuard": {"windowSize": 3}}
    result = scan(trace, config)
    fired = {DETECTORS[code] for code in np.unique(result.detector)}
    # Every detector but argument churn (SPEC §8.3: no call here has a stale outcome
    # under repeated args; tests/test_scan_since_seed.py covers it).
    assert fired == {None, *DETECTORS[1:]} - {"argument_churn"}
    assert result.aborted.sum() == 1
    full = {
        "enabled": True,
        "historySize": 30,
        "detectors": {"genericRepeat": True, "knownPollNoProgress": True, "pingPong": True},
        "postCompactionGuard": {"windowSize": 3},
    }
    assert_matches(trace, full)


# -- the sort fallback and pre-fingerprinted tables --------------------------------------------


def test_hashes_that_differ_only_in_their_low_bits_still_group_exactly() -> None:
    # The fast grouping keys drop the low bits of each hash; these collide there.
    base = 0xABCDEF0123400000
    args = [base, base + 1] * 40 + [base + 2] * 30
    table = CallTable.from_columns(
        scope=np.zeros(len(args), np.int64),
        tool_hash=np.ones(len(args), np.uint64),
        args_hash=np.array(args, np.uint64),
        result_hash=np.array([7] * len(args), np.uint64),
        has_result=np.ones(len(args), np.bool_),
    )
    result = scan(table, {"enabled": True})
    assert result.count.max() > 0
    for index in range(len(table)):
        verdict = result.verdict(index)
        assert (LEVELS[verdict.level], verdict.detector, verdict.count) == (
            result.level[index],
            DETECTORS[result.detector[index]],
            result.count[index],
        )
    assert result.detector[70] == DETECTORS.index("ping_pong")
    # The 30 calls of base + 2 (from index 80) warn from the 11th, block from the 21st.
    assert result.level[80:].tolist() == [0] * 10 + [1] * 10 + [2] * 10


def test_a_built_table_holds_the_hashes_of_the_per_call_path() -> None:
    builder = CallTableBuilder()
    builder.add("read", {"p": 1}, result="x", session="s", run_id=" r ")
    builder.add("exec", [1], error="unknown tool: Browser")
    builder.add_compaction(session="s", run_id="r")
    builder.add("read", {"p": 1}, session="s", run_id="r")
    table = builder.build()
    assert len(table) == len(builder) == 3
    assert table.scopes == (("s", "r"), (None, None))
    assert table.scope.tolist() == [0, 1, 0]
    assert table.args_hash.tolist() == [
        hash_call("read", {"p": 1}),
        hash_call("exec", [1]),
        hash_call("read", {"p": 1}),
    ]
    assert int(table.result_hash[0]) == hash_outcome("read", {"p": 1}, result="x")[0]
    assert table.has_result.tolist() == [True, True, False]
    assert table.has_unknown.tolist() == [False, True, False]
    assert int(table.unknown_hash[1]) == name_hash("browser")
    assert table.compaction.tolist() == [False, False, True]
    assert table.name(int(table.tool_hash[1])) == "exec"
    assert table.name(5) == "tool#0000000000000005"
    with pytest.raises(ValueError, match="read-only"):
        table.args_hash[0] = 1


def test_from_columns_checks_every_column() -> None:
    ok = {"scope": [0, 1], "tool_hash": [1, 2], "args_hash": [3, 4]}
    table = CallTable.from_columns(**ok)  # type: ignore[arg-type]
    assert table.scopes == ((None, "scope-0"), (None, "scope-1"))
    assert not table.has_result.any()
    signed = CallTable.from_columns(**ok | {"args_hash": np.array([-1, 4], np.int64)})  # type: ignore[arg-type]
    assert int(signed.args_hash[0]) == 2**64 - 1
    with pytest.raises(ValueError, match=r"^args_hash: expected 2 values like the other columns"):
        CallTable.from_columns(**ok | {"args_hash": [3]})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^scope: expected non-negative scope ids, got -1"):
        CallTable.from_columns(**ok | {"scope": [0, -1]})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^tool_hash: expected integers, got dtype float64"):
        CallTable.from_columns(**ok | {"tool_hash": [1.0, 2.0]})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^has_result: expected booleans, got dtype int64"):
        CallTable.from_columns(**ok, has_result=[1, 0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^scopes: expected at least 2 scope keys, got 1"):
        CallTable.from_columns(**ok, scopes=[("s", None)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^scope: expected a one-dimensional array"):
        CallTable.from_columns(**ok | {"scope": [[0, 1]]})  # type: ignore[arg-type]


# -- results, sweeps and bad input --------------------------------------------------------------


def stuck_trace() -> list[dict[str, Any]]:
    trace: list[dict[str, Any]] = [
        {"tool": "grep", "args": {"q": "x"}, "result": "same", "run_id": "r1"} for _ in range(25)
    ]
    trace.insert(3, {"tool": "read", "args": {}, "result": 1, "run_id": "r2"})
    trace.append({"type": "compaction", "run_id": "r2"})
    trace += [{"tool": "read", "args": {}, "result": 1, "run_id": "r2"}] * 4
    return trace


def test_summaries_records_and_verdicts_describe_each_run() -> None:
    result = scan(stuck_trace(), {"enabled": True})
    first, second = result.scopes()
    assert (first.session, first.run_id, first.calls) == (None, "r1", 25)
    # Trace indices: r1's 11th call is index 11 (r2's first call sits at index 3).
    assert (first.first_warning, first.first_block, first.aborted_at) == (11, 21, None)
    assert first.detectors == ("generic_repeat",)
    assert first.saved == 5
    assert (second.run_id, second.calls, second.first_warning, second.aborted_at) == (
        "r2",
        5,
        None,
        28,
    )
    assert second.saved == 1  # the call after the abort
    records = result.to_records()
    assert records[21] == {
        "index": 21,
        "session": None,
        "run_id": "r1",
        "tool": "grep",
        "level": "critical",
        "detector": "generic_repeat",
        "count": 20,
        "terminal": False,
        "aborted": False,
    }
    assert records[22]["terminal"] is True  # the run's second critical (SPEC §8.2)
    message = result.verdict(21).message
    assert message is not None
    assert message.startswith("CRITICAL: Called grep with identical outcomes 20 times")
    assert result.verdict(-1) == result.verdict(len(result) - 1)
    with pytest.raises(IndexError, match="index: 30 is out of range for 30 calls"):
        result.verdict(30)
    with pytest.raises(TypeError, match="index: expected an int, got str"):
        result.verdict("1")  # type: ignore[arg-type]
    assert repr(result) == "ScanResult(30 calls, 10 warnings, 5 blocks)"
    assert result.totals() == ScanTotals(
        runs=2, runs_warned=1, runs_blocked=1, runs_aborted=1, calls_saved=6
    )
    assert result.positions().tolist() == [0, 1, 2, 0, *range(3, 25), 1, 2, 3, 4]


def test_detection_off_reports_nothing_and_explicit_false_also_stops_the_guard() -> None:
    trace = stuck_trace()
    unset = scan(trace)
    assert not unset.level.any()
    assert not unset.count.any()
    assert unset.aborted.sum() == 1  # the post-compaction guard is on unless enabled is false
    assert unset.verdict(21) == loopcore.Verdict()
    off = scan(trace, {"enabled": False})
    assert not off.aborted.any()


def test_a_sweep_equals_one_scan_per_value() -> None:
    trace = stuck_trace()
    table = CallTableBuilder()
    for event in trace:
        table.add_event(event)
    built = table.build()
    swept = sweep(built, {"enabled": True}, "warningThreshold", [2, 5, 12])
    assert [value for value, _ in swept] == [2, 5, 12]
    for value, result in swept:
        alone = scan(trace, {"enabled": True, "warningThreshold": value})
        assert result.config == alone.config
        for name in ("level", "detector", "count", "aborted"):
            assert np.array_equal(getattr(result, name), getattr(alone, name)), (value, name)
    by_history = sweep(trace, {"enabled": True}, "historySize", [15, 30])
    assert by_history[0][1].level.max() == 1  # 15 calls of history can warn, never block
    assert by_history[1][1].level.max() == 2
    with pytest.raises(loopcore.ConfigError, match=r"warningTreshold: unknown key; did you mean"):
        sweep(built, None, "warningTreshold", [1])


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ({"args": {}}, r"^events\[1\]\.tool: missing$"),
        ({"tool": "x"}, r"^events\[1\]\.args: missing$"),
        ({"tool": 3, "args": {}}, r"^events\[1\]\.tool: expected a str, got int$"),
        ({"tool": "x", "args": {}, "run_id": 5}, r"^events\[1\]\.run_id: expected a str or None"),
        ({"tool": "x", "args": {}, "tool_call_id": 5}, r"^events\[1\]\.tool_call_id: expected"),
        ({"tool": "x", "args": {}, "session": []}, r"^events\[1\]\.session: expected a hashable"),
        ({"tool": "x", "args": {}, "ts": []}, r"^events\[1\]\.ts: expected a number or a string"),
        ({"tool": "x", "args": {}, "tol": 1}, r"^events\[1\]\.tol: unknown event field"),
        ({"type": "note"}, r"^events\[1\]\.type: expected 'call' or 'compaction', got 'note'$"),
        ("read", r"^events\[1\]\.event: expected a mapping, got str$"),
    ],
)
def test_a_malformed_event_is_named_by_index_and_field(event: object, message: str) -> None:
    with pytest.raises(EventError, match=message):
        scan([{"tool": "ok", "args": {}}, event])  # type: ignore[list-item]


def test_scan_rejects_what_is_not_a_trace() -> None:
    with pytest.raises(TypeError, match="events: expected an iterable of event mappings"):
        scan("read")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="config: expected a LoopDetectionConfig"):
        scan([], 3)  # type: ignore[arg-type]
    empty = scan([], {"enabled": True})
    assert len(empty) == 0
    assert empty.scopes() == []


# -- review findings: extreme settings, foreign columns, sweeps over repaired configs -------------


def test_absurd_window_sizes_answer_like_the_longest_useful_one() -> None:
    trace = [
        {"tool": "read", "args": {"p": i % 3}, "result": 1, "run_id": f"r{i % 5}"}
        for i in range(60)
    ]
    sane = scan(trace, {"enabled": True, "historySize": 1_000})
    # The largest window a config accepts (SPEC §11) answers like any longer-than-the-trace one.
    huge = scan(trace, {"enabled": True, "historySize": 1_000_000})
    assert np.array_equal(huge.level, sane.level)
    assert np.array_equal(huge.count, sane.count)
    for history in (2**62, 10**20):  # past the bound: a config error, never a wrong count
        with pytest.raises(loopcore.ConfigError, match="up to 1000000"):
            scan(trace, {"enabled": True, "historySize": history})
    compacted = [{"type": "compaction"}, {"tool": "a", "args": {}}, {"tool": "a", "args": {}}]
    assert not scan(compacted, {"postCompactionGuard": {"windowSize": 1_000_000}}).aborted.any()
    with pytest.raises(loopcore.ConfigError, match="windowSize"):
        scan(compacted, {"postCompactionGuard": {"windowSize": 10**20}})
    assert scan(compacted, {"postCompactionGuard": {"windowSize": 2}}).aborted.tolist() == [
        False,
        True,
    ]


def test_more_scopes_than_a_16_bit_id_agree_with_the_reference_scan() -> None:
    scopes = 70_000  # past 65,536 the scope sort takes its int64 path
    ids = np.repeat(np.arange(scopes), 3)
    rng = np.random.default_rng(5)
    order = rng.permutation(len(ids))
    table = CallTable.from_columns(
        scope=ids[order],
        tool_hash=np.ones(len(ids), np.uint64),
        args_hash=(ids[order] % 7).astype(np.uint64),
        result_hash=np.zeros(len(ids), np.uint64),
        has_result=np.ones(len(ids), np.bool_),
    )
    result = scan(table, {"enabled": True, "warningThreshold": 2, "criticalThreshold": 3})
    # Each scope's third call repeats its two earlier ones: a warning, nothing else.
    assert np.count_nonzero(result.level == 1) == scopes
    assert np.count_nonzero(result.level == 2) == 0
    for index in rng.choice(len(ids), 300, replace=False).tolist():
        verdict = result.verdict(index)
        assert (LEVELS[verdict.level], verdict.count) == (
            result.level[index],
            result.count[index],
        )
    assert len(result.scopes()) == scopes


def test_from_columns_takes_python_lists_of_real_hashes_and_sparse_ids() -> None:
    hashes = [hash_call("read", {"p": i % 2}) for i in range(6)]
    assert max(hashes) >= 2**63  # numpy alone would read such a list as floats
    caller_scope = np.array([10**9, 10**9, 7, 7, 10**9, 7])
    table = CallTable.from_columns(
        scope=caller_scope,
        tool_hash=[name_hash("read")] * 6,
        args_hash=hashes,
        result_hash=[-1] * 6,
        has_result=[True] * 6,
    )
    assert table.args_hash.tolist() == hashes
    assert table.result_hash.tolist() == [2**64 - 1] * 6
    assert table.scopes == ((None, "scope-7"), (None, "scope-1000000000"))
    assert table.scope.tolist() == [1, 1, 0, 0, 1, 0]
    assert caller_scope.flags.writeable  # the caller's array is neither frozen nor shared
    caller_scope[0] = 7
    assert table.scope[0] == 1
    empty = CallTable.from_columns(scope=[], tool_hash=[], args_hash=[], has_result=[])
    assert len(empty) == 0
    with pytest.raises(ValueError, match=r"^scope: expected values below 2\*\*63"):
        CallTable.from_columns(scope=np.array([2**63], np.uint64), tool_hash=[1], args_hash=[1])
    with pytest.raises(ValueError, match=r"^scopes\[0\]: expected a \(session, run_id\) pair"):
        CallTable.from_columns(scope=[0], tool_hash=[1], args_hash=[1], scopes=["x"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"^scopes: two scope ids name the same"):
        CallTable.from_columns(
            scope=[0, 1], tool_hash=[1, 1], args_hash=[1, 1], scopes=[("s", "r"), ("s", " r ")]
        )


def test_a_sweep_starts_from_the_settings_as_given() -> None:
    trace = stuck_trace()
    base = {"enabled": True, "warningThreshold": 10, "criticalThreshold": 5}  # repaired to 11
    ((_, swept),) = sweep(trace, base, "warningThreshold", [3])
    alone = scan(trace, {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5})
    assert swept.config == alone.config
    assert swept.config.critical_threshold == 5
    assert np.array_equal(swept.level, alone.level)


def test_results_are_read_only_and_not_shared_between_swept_values() -> None:
    first, second = (result for _, result in sweep(stuck_trace(), None, "warningThreshold", [4, 5]))
    assert first.aborted is not second.aborted
    for array in (first.level, first.detector, first.count, first.aborted):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 1


def test_detector_and_level_codes_are_the_rules_own() -> None:
    from loopcore import _rules, batch

    assert batch.DETECTORS is _rules.DETECTORS
    assert batch.LEVELS is _rules.LEVELS
    result = scan(stuck_trace(), {"enabled": True})
    assert {DETECTORS[code] for code in result.detector.tolist()} <= set(_rules.DETECTORS)

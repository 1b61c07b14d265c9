"""Batch scans under the new rules (SPEC §7, §8.0-8.9, §12.4, §12.18): ``scan`` answers what a
gateway's ``ToolLoopGuard.before_call`` says before each call, blocked calls recorded as vetoes."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from itertools import count
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loopcore
from loopcore import ToolLoopGuard
from loopcore.batch import DETECTORS, CallTable, CallTableBuilder, scan, sweep
from loopcore.batch import _kernels as kernels_module
from loopcore.batch import _scan as scan_module
from loopcore.batch._table import name_hash

pytestmark = pytest.mark.usefixtures("twin")

LEVELS = {None: 0, "warning": 1, "critical": 2}
VETO = {"content": [], "details": {"status": "blocked", "deniedReason": "tool-loop"}}
FRESH = count()  # fresh values (nonce ids, drifting output) for each generated call


@pytest.fixture(autouse=True)
def _quiet_guard_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.CRITICAL, logger="loopcore")


# -- the sequential model: the real gateway hook ------------------------------------------------


def gateway(trace: list[dict[str, Any]], config: Any) -> Iterator[tuple[Any, bool]]:
    """Per call: ``before_call``'s decision's verdict and whether it is terminal.

    A blocked call runs nothing more; an allowed one gets its outcome. A
    recorded outcome that is itself a loop veto is recorded as a veto (SPEC
    §8.1): ``after_call`` leaves those to the veto its own block records, so
    the detector on the same store records it.
    """
    guard = ToolLoopGuard(config, max_scopes=1_000)
    for number, event in enumerate(trace):
        if event.get("type") == "compaction":
            continue
        tool, args = event["tool"], event["args"]
        where = {"session": event.get("session"), "run_id": event.get("run_id")}
        call_id = f"call-{number}"
        decision = guard.before_call(tool, args, tool_call_id=call_id, **where)
        yield decision.verdict, decision.terminal
        if decision.blocked:
            continue
        outcome = {key: event[key] for key in ("result", "error") if key in event}
        if outcome.get("result") is VETO:
            guard.detector.record_outcome(tool, args, **outcome, tool_call_id=call_id, **where)
        else:
            guard.after_call(tool, args, **outcome, tool_call_id=call_id, **where)


def assert_gateway(trace: list[dict[str, Any]], config: Any) -> loopcore.batch.ScanResult:
    result = scan(trace, config)
    expected = list(gateway(trace, config))
    assert len(result) == len(expected)
    for index, (verdict, terminal) in enumerate(expected):
        got = (
            int(result.level[index]),
            DETECTORS[result.detector[index]],
            int(result.count[index]),
            bool(result.terminal[index]),
        )
        want = (LEVELS[verdict.level], verdict.detector, verdict.count, terminal)
        assert got == want, index
        assert result.verdict(index) == verdict, index
    return result


# -- generated traces ---------------------------------------------------------------------------


def _exec_failure(commands: int, drift: bool = True) -> dict[str, Any]:
    """A terminal exec failure: one of ``commands`` commands; its output drifts in time."""
    n = next(FRESH)
    return {
        "args": {"command": f"python job-{n % commands}.py", "title": f"try {n}"},
        "result": {
            "content": [{"type": "text", "text": "boom 12:00:01"}],
            "details": {
                "status": "failed",
                "exitCode": 1,
                "aggregated": f"boom at 12:00:0{n % 10 if drift else 0}",
            },
        },
    }


def _nonce_text() -> str:
    nonce = f"{next(FRESH) * 2654435761 % 2**64:016x}"
    return (
        f'<<<EXTERNAL_UNTRUSTED_CONTENT id="{nonce}">>>x'
        f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{nonce}">>>'
    )


def _move(kind: str, variant: int) -> dict[str, Any]:
    """One call of a family; ``variant`` picks its args (and, for some, its outcome)."""
    paths = ["a", "b", "c"]
    if kind == "write-noop":
        return {
            "tool": "write",
            "args": {"path": paths[variant % 3]},
            "result": {
                "content": [{"type": "text", "text": f"no change to {paths[variant % 3]}"}],
                "details": {"changed": False},
            },
        }
    if kind == "write-changed":
        return {"tool": "write", "args": {"path": paths[variant % 3]}, "result": {"ok": variant}}
    if kind == "error":
        return {"tool": "read", "args": {"path": paths[variant % 3]}, "error": "permission denied"}
    if kind == "exec-fail":
        return {"tool": "exec", **_exec_failure(1 + variant % 3, variant % 2 == 0)}
    if kind == "exec-errno":
        # One command failing with a changing error number: numbers stay significant in
        # the failure identity (SPEC §8.4), so these do not chain by identity.
        return {
            "tool": "exec",
            "args": {"command": "make"},
            "result": {
                "content": [],
                "details": {"status": "failed", "exitCode": 2, "aggregated": f"E{variant % 3}"},
            },
        }
    if kind == "exec-ok":
        return {
            "tool": "exec",
            "args": {"command": "ls"},
            "result": {"content": [], "details": {"status": "completed", "exitCode": 0}},
        }
    if kind == "nonce":
        text = _nonce_text()
        if variant % 2:
            return {"tool": "web_fetch", "args": {"url": "u"}, "error": text}
        return {
            "tool": "web_fetch",
            "args": {"url": "u"},
            "result": {"content": [{"type": "text", "text": text}], "details": {}},
        }
    if kind == "wait":
        return {
            "tool": "wait",
            "args": {"ms": 100},
            "result": {"status": "running", "n": variant % 2},
        }
    if kind == "poll":
        return {
            "tool": "process",
            "args": {"action": "poll", "sessionId": "x"},
            "result": {"content": [], "details": {"status": "running", "tail": "1/3"}},
        }
    if kind == "unknown":
        return {"tool": "browser", "args": {"i": variant % 2}, "error": "unknown tool: browser"}
    if kind == "veto":
        return {"tool": "read", "args": {"path": paths[variant % 3]}, "result": VETO}
    if kind == "pending":
        return {"tool": "read", "args": {"path": paths[variant % 3]}}
    if kind == "pingpong":
        return {"tool": ["read", "grep"][variant % 2], "args": {"side": variant % 2}, "result": 7}
    return {"tool": "read", "args": {"path": paths[variant % 3]}, "result": variant % 2}


KINDS = [
    "write-noop",
    "write-changed",
    "error",
    "exec-fail",
    "exec-errno",
    "exec-ok",
    "nonce",
    "wait",
    "poll",
    "unknown",
    "veto",
    "pending",
    "pingpong",
    "plain",
]
SCOPES = [("s1", "a"), ("s1", "b"), (None, None), (7, "a")]


#: How a run of one family picks its variants: fixed, alternating, a,b,a,a,b, drifting.
PATTERNS = ([0], [0, 1], [0, 1, 0, 0, 1], [0, 1, 2, 1, 2, 0, 2])


@st.composite
def traces(draw: st.DrawFn, max_runs: int = 10) -> list[dict[str, Any]]:
    """Runs of repeated calls of a few families over a few scopes, long enough to loop.

    Each run repeats one family with a pattern of variants (its args churn over
    a few values, or alternate); runs of different scopes interleave call by call.
    """
    palette = draw(
        st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 5)), min_size=1, max_size=4)
    )
    scopes = draw(st.lists(st.sampled_from(SCOPES), min_size=1, max_size=3, unique=True))
    runs = draw(
        st.lists(
            st.tuples(
                st.integers(0, len(palette) - 1),
                st.integers(0, len(scopes) - 1),
                st.integers(1, 24),  # calls in the run
                st.integers(0, len(PATTERNS) - 1),
                st.booleans(),  # a compaction before the run
            ),
            min_size=1,
            max_size=max_runs,
        )
    )
    lanes: list[list[dict[str, Any]]] = [[] for _ in scopes]
    for choice, scope, length, pattern, compaction in runs:
        session, run_id = scopes[scope]
        where = {"session": session, "run_id": run_id}
        if compaction:
            lanes[scope].append({"type": "compaction", **where})
        kind, variant = palette[choice]
        for i in range(length):
            call = _move(kind, variant + PATTERNS[pattern][i % len(PATTERNS[pattern])])
            lanes[scope].append(call | where)
    # Interleave the scopes in an order drawn once: a scope's own calls keep their order.
    out: list[dict[str, Any]] = []
    turns = draw(st.lists(st.integers(0, len(scopes) - 1), max_size=sum(map(len, lanes))))
    for lane in turns:
        if lanes[lane]:
            out.append(lanes[lane].pop(0))
    for lane_events in lanes:
        out.extend(lane_events)
    return out


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "enabled": draw(st.sampled_from([True, True, True, True, None])),
        "historySize": draw(st.integers(2, 16)),
        "warningThreshold": draw(st.integers(1, 6)),
        "criticalThreshold": draw(st.integers(2, 10)),
        "unknownToolThreshold": draw(st.integers(1, 5)),
        "globalCircuitBreakerThreshold": draw(st.integers(3, 14)),
        "detectors": {
            "genericRepeat": draw(st.booleans()),
            "knownPollNoProgress": draw(st.booleans()),
            "pingPong": draw(st.booleans()),
            "argumentChurn": draw(st.booleans()),
        },
    }


@settings(max_examples=150)
@given(trace=traces(), config=configs())
def test_scan_equals_the_gateway_call_for_call(
    trace: list[dict[str, Any]], config: dict[str, Any]
) -> None:
    assert_gateway(trace, config)


@settings(max_examples=60)
@given(trace=traces(max_runs=6), config=configs())
def test_small_blocks_and_rounds_give_the_same_answers(
    trace: list[dict[str, Any]], config: dict[str, Any]
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kernels_module, "_BLOCK", 3)
        patch.setattr(scan_module, "_ROUND_ROWS", 4)
        patch.setattr(scan_module, "_ROUND_WINDOWS", 0)
        assert_gateway(trace, config)


def _stale(step: int, variant: int) -> dict[str, Any]:
    """A call of one tool over a few paths: mostly stale outcomes (SPEC §8.3), sometimes
    not, sometimes a second stale result, a pending call or a veto."""
    path = {"path": "abcd"[variant]}
    outcomes: list[dict[str, Any]] = [
        {"result": {"content": [], "details": {"changed": False}}},
        {"error": "permission denied"},
        {"error": "disk full"},
        {"result": {"content": [], "details": {"changed": True}}},
        {},
        {"result": VETO},
    ]
    return {"tool": "write", "args": path, **outcomes[step]}


@settings(max_examples=150)
@given(
    steps=st.lists(
        st.one_of(
            # mostly no-ops over two paths, with the other outcomes over any path
            st.tuples(st.just(0), st.sampled_from([0, 1, 0, 1, 2])),
            st.tuples(st.sampled_from([0, 1, 1, 2, 3, 4, 5]), st.integers(0, 3)),
        ),
        min_size=6,
        max_size=70,
    ),
    history=st.integers(4, 24),
    warning=st.integers(1, 8),
)
def test_argument_churn_equals_the_gateway(
    steps: list[tuple[int, int]], history: int, warning: int
) -> None:
    trace = [_stale(step, variant) for step, variant in steps]
    config = {"enabled": True, "historySize": history, "warningThreshold": warning}
    assert_gateway(trace, config | {"criticalThreshold": 40, "globalCircuitBreakerThreshold": 60})
    assert_gateway(trace, config)


@pytest.mark.parametrize(
    ("paths", "history", "churn"),
    [
        ("aaabbb", 30, 6),  # two variants, three each
        ("abbaab", 30, 6),
        ("abaaba", 30, 0),  # b twice only: not stable
        ("aaabbbcc", 30, 0),  # c twice only
        ("Cabbaab", 30, 0),  # a stale result of another variant before: two results
        ("Cabbaab", 6, 6),  # … out of the window
        ("Aabbaab", 30, 6),  # … of a variant of the tail: the tail stops there
        ("Xabbaab", 30, 6),  # a result that is not stale stops the tail
    ],
)
def test_argument_churn_tails(paths: str, history: int, churn: int) -> None:
    # SPEC §8.3; capitals: "C"/"A" fail with another error on c/a, "X" really writes.
    # The call checked repeats the newest path (so it continues no ping-pong).
    other = {"C": (2, 2), "A": (2, 0), "X": (3, 2)}
    trace = [_stale(*other[p]) if p in other else _stale(0, "abcd".index(p)) for p in paths]
    config = {"enabled": True, "historySize": history, "warningThreshold": 1}
    result = assert_gateway([*trace, _stale(0, "abcd".index(paths[-1]))], config)
    got = _codes(result, len(trace))
    if churn:
        assert got == ("warning", "argument_churn", churn)
    else:
        assert got[1] != "argument_churn"


# -- long loops: many rounds of blocked calls -------------------------------------------------


def test_a_blocked_unknown_tool_is_let_through_and_blocked_again_periodically() -> None:
    # Fresh args each time: only the unknown-tool streak counts (by tool and name).
    trace = [
        {"tool": "browser", "args": {"i": i}, "error": "unknown tool: browser"} for i in range(400)
    ]
    result = assert_gateway(trace, {"enabled": True})
    # Vetoes are skipped: 10 failures stay in the window of 30 until the oldest falls
    # out (call 31); 9 are then left, and each new one replaces one that falls out,
    # until the 10 let through fill it again (call 41).
    assert result.level[:10].tolist() == [0] * 10
    assert result.level[10:31].tolist() == [2] * 21
    assert result.level[31:41].tolist() == [0] * 10
    assert result.level[41] == 2
    assert result.terminal[10:31].tolist() == [False] + [True] * 20
    assert result.count[10:31].tolist() == [10] * 21


def test_long_loops_of_every_family_agree_with_the_gateway() -> None:
    trace: list[dict[str, Any]] = []
    for i in range(150):
        for kind, run_id in (
            ("poll", "poll"),
            ("pingpong", "pingpong"),
            ("write-noop", "churn"),
            ("exec-fail", "exec"),
            ("nonce", "nonce"),
            ("wait", "wait"),
            ("error", "errors"),
        ):
            variant = i % 2 if kind == "pingpong" else [0, 1, 0, 0, 1][i % 5]
            trace.append(_move(kind, variant) | {"run_id": run_id})
    result = assert_gateway(trace, {"enabled": True})
    fired = {DETECTORS[code] for code in np.unique(result.detector)}
    assert fired == {None, *DETECTORS[2:]}


# -- SPEC examples --------------------------------------------------------------------------


def _codes(result: Any, index: int) -> tuple[str | None, str | None, int]:
    verdict = result.verdict(index)
    level = [None, "warning", "critical"][int(result.level[index])]
    assert (verdict.level, verdict.detector, verdict.count) == (
        level,
        DETECTORS[result.detector[index]],
        int(result.count[index]),
    )
    return level, verdict.detector, verdict.count


def test_blocked_sends_count_on_until_the_global_breaker() -> None:
    # SPEC §8.1: 20 identical sends, then each blocked retry adds a veto: 21, 22 … 30.
    send = {"tool": "sessions_send", "args": {"to": "x"}, "result": {"details": {"ok": True}}}
    result = assert_gateway([send] * 31, {"enabled": True})
    assert _codes(result, 20) == ("critical", "generic_repeat", 20)
    assert [_codes(result, i)[2] for i in range(21, 30)] == list(range(21, 30))
    assert _codes(result, 30) == ("critical", "global_circuit_breaker", 30)
    assert result.terminal[20:].tolist() == [False] + [True] * 10
    records = result.to_records()
    assert (records[20]["terminal"], records[21]["terminal"]) == (False, True)


def test_write_no_ops_over_two_paths_churn() -> None:
    # SPEC §8.3: write no-ops over a,b,a,a,b (6 times), then a → churn 30; c → nothing.
    paths = [0, 1, 0, 0, 1] * 6
    trace = [_move("write-noop", p) for p in paths]
    result = scan([*trace, _move("write-noop", 0)], {"enabled": True})
    assert _codes(result, 30) == ("warning", "argument_churn", 30)
    assert "2 repeated argument patterns" in (result.verdict(30).message or "")
    assert result.verdict(30).liveness_signal == "argument_churn"
    novel = scan([*trace, _move("write-noop", 2)], {"enabled": True})
    assert _codes(novel, 30) == (None, None, 0)
    errors = [_move("error", p) for p in paths[:20]]
    assert _codes(scan([*errors, _move("error", 0)], {"enabled": True}), 20)[1] == "argument_churn"
    # Row 7 outranks row 8: 20 identical results for a, 10 for b, then a.
    mixed = [_move("write-noop", 0)] * 20 + [_move("write-noop", 1)] * 10
    outranked = scan([*mixed, _move("write-noop", 0)], {"enabled": True, "historySize": 40})
    assert _codes(outranked, 30) == ("critical", "generic_repeat", 20)
    off = {"enabled": True, "detectors": {"argumentChurn": False}}
    assert _codes(scan([*trace, _move("write-noop", 0)], off), 30)[1] == "generic_repeat"


def test_terminal_exec_failures_block_a_brand_new_command() -> None:
    # SPEC §8.4: 20 different jobs failing alike, then a new command → critical, count 20.
    failures = [{"tool": "exec", **_exec_failure(1000, drift=False)} for _ in range(20)]
    new = {"tool": "exec", **_exec_failure(1000)}
    result = scan([*failures, new], {"enabled": True})
    assert _codes(result, 20) == ("critical", "generic_repeat", 20)
    assert (result.verdict(20).message or "").startswith(
        "CRITICAL: Called exec with identical outcomes 20 times."
    )
    # A success in between resets the terminal streak.
    ok = _move("exec-ok", 0)
    assert _codes(scan([*failures[:10], ok, *failures[10:], new], {"enabled": True}), 21)[0] != (
        "critical"
    )
    # One command failing with drifting output: its failure identity holds the chain.
    longer = [{"tool": "exec", **_exec_failure(1)} for _ in range(31)]
    assert _codes(assert_gateway(longer, {"enabled": True}), 30) == (
        "critical",
        "global_circuit_breaker",
        30,
    )


def test_fresh_nonces_in_errors_hash_alike() -> None:
    # SPEC §8.5: 20 errors that differ only in a fresh wrapper nonce → critical.
    trace = [_move("nonce", 1) for _ in range(21)]
    assert _codes(scan(trace, {"enabled": True}), 20) == ("critical", "generic_repeat", 20)


def test_ten_unchanged_waits_are_critical() -> None:
    # SPEC §8.8: for wait the known-poll critical row uses warningThreshold.
    trace = [_move("wait", 0)] * 11
    result = scan(trace, {"enabled": True})
    assert _codes(result, 10) == ("critical", "known_poll_no_progress", 10)
    assert result.level[:10].tolist() == [0] * 10


def test_vetoes_are_neutral_in_a_ping_pong_tail() -> None:
    # SPEC §12.4: criticals in an alternation become vetoes; the tail goes on through them.
    trace = [_move("pingpong", i % 2) for i in range(40)]
    result = assert_gateway(trace, {"enabled": True})
    assert _codes(result, 19) == ("critical", "ping_pong", 20)
    assert _codes(result, 29)[:2] == ("critical", "ping_pong")


# -- results, sweeps and tables --------------------------------------------------------------


def test_a_sweep_over_thresholds_equals_one_scan_per_value_with_vetoes() -> None:
    trace = [_move("unknown", i % 2) for i in range(120)] + [_move("plain", 1)] * 40
    for value, result in sweep(trace, {"enabled": True}, "criticalThreshold", [3, 8, 25]):
        alone = scan(trace, {"enabled": True, "criticalThreshold": value})
        for name in ("level", "detector", "count", "terminal"):
            assert np.array_equal(getattr(result, name), getattr(alone, name)), (value, name)
    with pytest.raises(ValueError, match="read-only"):
        alone.terminal[0] = True


def test_a_table_keeps_kinds_identities_and_no_progress() -> None:
    builder = CallTableBuilder()
    builder.add("read", {"p": 1}, result=VETO)
    builder.add("exec", **_exec_failure(3))  # type: ignore[arg-type]
    builder.add("write", {"path": "a"}, result={"details": {"changed": False}})
    builder.add("read", {"p": 1}, error="boom")
    builder.add("read", {"p": 2})
    table = builder.build()
    assert table.veto.tolist() == [True, False, False, False, False]
    assert table.has_result.tolist() == [False, True, True, True, False]
    assert table.terminal_exec.tolist() == [False, True, False, False, False]
    assert table.no_progress.tolist() == [False, False, True, True, False]
    assert int(table.identity_hash[1]) != 0
    assert table.name(name_hash("wait")) == "wait"


def test_from_columns_takes_kinds_and_checks_them() -> None:
    ok = {"scope": [0, 0], "tool_hash": [1, 1], "args_hash": [3, 3]}
    table = CallTable.from_columns(**ok, kind=[1, 0], no_progress=[False, True])  # type: ignore[arg-type]
    assert table.veto.tolist() == [True, False]
    with pytest.raises(ValueError, match=r"^kind: expected outcome kind codes 0 to 3, got 7"):
        CallTable.from_columns(**ok, kind=[7, 0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^kind: a veto \(1\) has no outcome, but has_result"):
        CallTable.from_columns(**ok, kind=[1, 0], has_result=[True, False])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^kind: kind 2 needs a result, none at 1"):
        CallTable.from_columns(**ok, kind=[0, 2])  # type: ignore[arg-type]


def test_foreign_columns_with_one_hash_under_two_tools_count_streaks_per_tool() -> None:
    # The reference scan counts a streak per tool and hash, the recent count per hash.
    table = CallTable.from_columns(
        scope=[0] * 30,
        tool_hash=[1, 2] * 15,
        args_hash=[5] * 30,
        result_hash=[9] * 30,
        has_result=[True] * 30,
    )
    result = scan(table, {"enabled": True})
    for index in range(30):
        _codes(result, index)
    # Per tool, no streak reaches 20 (one hash for both would from call 20 on).
    assert result.level.max() == 1
    assert result.count[10:].tolist() == list(range(10, 30))

"""Do the C fast paths of the special outcome rules answer exactly what the reference does?

The compiled outcome twin reads exec results (terminal failures and their
``shape()`` included), process polls and logs and write no-ops in C, and hands
anything it does not know to ``_outcome_py``. Hypothesis generates such results
and errors of many shapes — details with status, exit codes of every type,
aggregated output, long outputs around the 64 KiB shape window, drifting
timestamps, unicode, nested content lists, wrappers, subclasses and values that
lie about their class — and the two ``outcome_of`` must agree exactly, directly
and through the history records of ``ToolLoopGuard.after_call`` on each twin.
"""

from __future__ import annotations

from collections import UserDict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore import UNSET, ToolLoopGuard, _outcome_py
from loopcore._exec_shape import SHAPE_WINDOW
from loopcore._records import OUTCOME_KINDS
from loopcore._twins import use_twin

from .conftest import TWINS
from .test_outcome_since_seed import ClaimsStr

COMPILED = "cython" in TWINS


class Str(str):
    """A str subclass: the fast path must leave it to the reference."""


class Int(int):
    pass


def wrap(body: str = "page", nonce: str = "0123456789abcdef") -> str:
    return (
        f'<<<EXTERNAL_UNTRUSTED_CONTENT id="{nonce}">>>{body}'
        f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{nonce}">>>'
    )


# Pieces every drift pattern of §8.4 matches, nearly matches or is cut by.
DRIFT = [
    "2024-05-06T07:08:09.123456Z",
    "2024-05-06 07:08:09+02:00",
    "2024-05-06t07:08:09.1234567",
    "1999-12-31T23:59:59-05:3",
    "7:08:09",
    "123:45:67.5",
    "12:34:5",
    "attempt 3",
    "Attempt#: 12",
    "retry=4",
    "retrying 5",
    "xattempt 1",
    "attempt_2",
    "5ms",
    "1.5 seconds",
    "2 Minutes",
    "3 hour",
    "10hours",
    "7 s",
    "9 sec",
    "4msx",
    "1.2.3s",
    "5us",
    "6 ns",
    "pid 42",
    "PPID:7",
    "pid=",
    "pids 3",
    "(Command exited with code 1)",
    "(Command exited with code 1.5)",
    "é5s",
    "_5s",
    "\t8\nms",
]

drift = st.sampled_from(DRIFT)
alphabet = st.sampled_from(list("0123456789:-.tTzZ+ #=_apmsnuhertyoicdPIDAé\n\t\x0b€"))
chars = st.text(alphabet, max_size=30)
pieces = st.one_of(drift, chars, st.text(max_size=12), st.just(wrap()))
texts = st.lists(pieces, max_size=8).map("".join)


@st.composite
def long_texts(draw: st.DrawFn) -> str:
    """A text around twice the shape window, with drift at both ends and at the cut."""
    unit = draw(st.lists(pieces, min_size=1, max_size=4).map("".join).filter(bool))
    size = 2 * SHAPE_WINDOW + draw(st.integers(-3, 3)) * draw(st.sampled_from([1, 7, 4096]))
    return (unit * (size // len(unit) + 1))[:size]


outputs = st.one_of(texts, texts, long_texts(), st.sampled_from(["", "  ", "\n", " x "]))
plain_values = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), texts, st.lists(st.integers(), max_size=3)
)
odd: st.SearchStrategy[Any] = st.one_of(
    st.builds(Str, texts),
    st.builds(Int, st.integers(-2, 2)),
    st.builds(ClaimsStr),
    st.builds(UserDict, st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
)
codes = st.one_of(
    st.integers(-3, 3),
    st.sampled_from([2**53 + 1, 2**63, 2**1100, -(2**1100)]),
    st.floats(),
    st.sampled_from([1.0, 2.5, -0.0, float("inf"), float("nan")]),
    plain_values,
    odd,
)
statuses = st.one_of(
    st.sampled_from(
        ["completed", "failed", "running", "approval-pending", "approval-unavailable"] * 3
        + ["blocked", "other", ""]
    ),
    st.builds(Str, st.sampled_from(["failed", "completed"])),
    plain_values,
    st.builds(ClaimsStr),
)
fields = {
    "status": statuses,
    "exitCode": codes,
    "aggregated": st.one_of(outputs, outputs, plain_values, odd),
    "timedOut": st.one_of(st.booleans(), st.just(1), st.none()),
    "tail": st.one_of(texts, plain_values, odd),
    "reason": plain_values,
    "host": texts,
    "command": texts,
    "warningText": plain_values,
    "changed": st.one_of(st.booleans(), st.just(0), st.none()),
    "exitSignal": plain_values,
    "totalLines": plain_values,
    "totalChars": plain_values,
    "truncated": plain_values,
    "durationMs": st.integers(),
    "deniedReason": st.sampled_from(["tool-loop", "other"]),
}
details = st.one_of(
    st.fixed_dictionaries({}, optional=fields),
    st.fixed_dictionaries({}, optional=fields),
    plain_values,
    odd,
)
entry = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": outputs}),
    st.fixed_dictionaries({"type": st.just("text"), "text": st.one_of(plain_values, odd)}),
    st.fixed_dictionaries({"type": st.one_of(st.just("image"), st.none(), odd)}),
    plain_values,
    st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": texts}), max_size=2),
)
content = st.one_of(st.lists(entry, max_size=4), st.tuples(entry), plain_values, odd)
tool_results = st.fixed_dictionaries({}, optional={"content": content, "details": details})
receipts = st.fixed_dictionaries(
    {"status": statuses},
    optional={
        "value": plain_values,
        "telemetry": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        "runId": texts,
        "pendingToolCalls": st.lists(
            st.fixed_dictionaries(
                {"method": texts}, optional={"args": plain_values, "settled": st.booleans()}
            ),
            max_size=2,
        ),
    },
)
results = st.one_of(
    tool_results, tool_results, tool_results, receipts, plain_values, odd, st.just(UNSET)
)
errors = st.one_of(
    st.just(UNSET),
    st.just(UNSET),
    st.just(UNSET),
    st.none(),
    texts,
    st.builds(RuntimeError, texts),
    st.just("unknown tool: Nope"),
)
tools = st.sampled_from(
    ["exec"] * 4
    + ["process"] * 2
    + ["write", "wait", "command_status", "read", "update_plan"]
    + ["message", "sessions_send"]
)
actions = st.one_of(
    st.sampled_from(["poll", "log", "poll", "log", "kill", "send"]),
    st.builds(Str, st.sampled_from(["poll", "log"])),
    plain_values,
    odd,
)
args_values = st.one_of(
    st.fixed_dictionaries({}, optional={"action": actions, "command": texts, "title": texts}),
    plain_values,
    st.builds(UserDict, st.fixed_dictionaries({"action": actions})),
)
extras = st.one_of(
    st.just({}),
    st.just({}),
    st.just({"send_tools": frozenset({"exec"})}),
    st.just({"send_tools": ("process", "write")}),
    st.just({"normalizers": {"exec": lambda args, result: ("n", result)}}),
)


def outcome_kwargs(result: Any, error: Any, extra: dict[str, Any]) -> dict[str, Any]:
    kwargs = dict(extra)
    if result is not UNSET:
        kwargs["result"] = result
    if error is not UNSET:
        kwargs["error"] = error
    return kwargs


def exact(found: tuple[Any, ...]) -> tuple[Any, ...]:
    """An outcome with its items' types, so that True never passes for 1."""
    return tuple((type(item), item) for item in found)


@pytest.mark.skipif(not COMPILED, reason="the compiled twin is not built")
@given(tool=tools, args=args_values, result=results, error=errors, extra=extras)
def test_compiled_outcome_of_equals_the_reference(
    tool: str, args: Any, result: Any, error: Any, extra: dict[str, Any]
) -> None:
    from loopcore import _outcome_c

    kwargs = outcome_kwargs(result, error, extra)
    expected = _outcome_py.outcome_of(tool, args, **kwargs)
    assert exact(_outcome_c.outcome_of(tool, args, **kwargs)) == exact(expected)
    assert _outcome_c.hash_outcome(tool, args, **kwargs) == expected[:2]


def exec_result(out: str, code: Any, status: str = "failed", **more: Any) -> dict[str, Any]:
    fields = {"status": status, "exitCode": code, "aggregated": out, **more}
    return {"content": [{"type": "text", "text": out}], "details": fields}


# The common shapes, so that most examples take the fast path (and many fail for good).
common_codes = st.one_of(st.integers(-2, 3), st.sampled_from([1.0, 0.0, 127.5, None]), codes)
common_exec = st.builds(
    exec_result,
    out=outputs,
    code=common_codes,
    status=st.sampled_from(["failed", "completed", "failed", "running", "approval-pending"]),
    timedOut=st.sampled_from([False, False, True, None]),
    tail=st.one_of(texts, st.none()),
)
common_process = st.builds(
    exec_result,
    out=outputs,
    code=common_codes,
    status=st.sampled_from(["running", "completed", "exited"]),
    totalLines=st.integers(0, 9),
    changed=st.sampled_from([False, True, None]),
)
common_args = st.one_of(
    st.fixed_dictionaries({"command": texts}, optional={"title": texts}),
    st.fixed_dictionaries({"action": st.sampled_from(["poll", "log", "kill"])}),
)


@pytest.mark.skipif(not COMPILED, reason="the compiled twin is not built")
@given(
    tool=st.sampled_from(["exec", "exec", "process", "write"]),
    args=common_args,
    result=st.one_of(common_exec, common_process),
)
def test_common_exec_process_and_write_results_agree(tool: str, args: Any, result: Any) -> None:
    from loopcore import _outcome_c

    expected = _outcome_py.outcome_of(tool, args, result=result)
    assert exact(_outcome_c.outcome_of(tool, args, result=result)) == exact(expected)


@pytest.mark.skipif(not COMPILED, reason="the compiled twin is not built")
@given(
    out=st.one_of(texts, long_texts()),
    code=st.sampled_from([1, 2.0, -7, 255]),
    where=st.sampled_from(["aggregated", "content"]),
)
def test_terminal_failures_agree(out: str, code: Any, where: str) -> None:
    from loopcore import _outcome_c

    result = exec_result(out, code)
    if where == "content":  # out is the content text when aggregated is blank
        result["details"]["aggregated"] = " "
    found = _outcome_c.outcome_of("exec", {"command": "x"}, result=result)
    assert exact(found) == exact(_outcome_py.outcome_of("exec", {}, result=result))


@pytest.mark.skipif(not COMPILED, reason="the compiled twin is not built")
@pytest.mark.parametrize("piece", DRIFT)
def test_each_drift_form_shapes_as_the_reference(piece: str) -> None:
    # Every drift form on its own, not only where the generated outputs reach it.
    from loopcore import _outcome_c

    for out in (piece, f"boom {piece} end", f"{piece}{piece}"):
        result = exec_result(out, 1)
        found = _outcome_c.outcome_of("exec", {"command": "x"}, result=result)
        assert exact(found) == exact(_outcome_py.outcome_of("exec", {}, result=result)), out


def test_drift_makes_the_same_failure() -> None:
    # §8.4: only the drift differs, so the identity is the same and the hash is not.
    a = exec_result("boom at 2024-01-01T00:00:01Z, attempt 1, took 5ms, pid 10", 1)
    b = exec_result("boom at 2025-02-03T04:05:06Z, attempt 9, took 70ms, pid 77", 1)
    c = exec_result("bang at 2024-01-01T00:00:01Z, attempt 1, took 5ms, pid 10", 1)
    outcomes = [_outcome_py.outcome_of("exec", {}, result=r) for r in (a, b, c)]
    if COMPILED:
        from loopcore import _outcome_c

        assert [_outcome_c.outcome_of("exec", {}, result=r) for r in (a, b, c)] == outcomes
    assert outcomes[0][2] == outcomes[1][2] == 2
    assert outcomes[0][3] == outcomes[1][3] != outcomes[2][3]
    assert outcomes[0][0] != outcomes[1][0]


def test_a_long_output_is_shaped_at_both_ends_only() -> None:
    # §12.17: the middle of a long output never enters the identity.
    head, tail = "x 5ms " * 20_000, " pid 3 fail" * 12_000
    one = exec_result(head + "middle 1" + tail, 1)
    two = exec_result(head + "middle 2" + tail, 1)
    found = [_outcome_py.outcome_of("exec", {}, result=r) for r in (one, two)]
    if COMPILED:
        from loopcore import _outcome_c

        assert [_outcome_c.outcome_of("exec", {}, result=r) for r in (one, two)] == found
    assert found[0][3] == found[1][3]
    assert found[0][0] != found[1][0]


# ---- through the guard's records, on each twin ----------------------------------------------

calls = st.lists(st.tuples(tools, args_values, results, errors), min_size=1, max_size=6)
CONFIG = {"enabled": True, "historySize": 30, "warningThreshold": 20, "criticalThreshold": 25}


@given(steps=calls)
def test_guard_records_hold_the_reference_outcomes(
    steps: list[tuple[str, Any, Any, Any]],
) -> None:
    expected: list[tuple[Any, ...]] = []
    for tool, args, result, error in steps:
        found = _outcome_py.outcome_of(tool, args, **outcome_kwargs(result, error, {}))
        if found[0] is None:  # nothing to record (no outcome, or a veto the guard drops)
            expected.append((None, None, None, None, False))
        else:
            expected.append((found[0], found[1], OUTCOME_KINDS[found[2]], found[3], found[4]))
    for twin in TWINS:
        with use_twin(twin):
            guard = ToolLoopGuard(CONFIG)
        for n, (tool, args, result, error) in enumerate(steps):
            call_id = f"call-{n}"
            guard.before_call(tool, args, tool_call_id=call_id)
            guard.after_call(tool, args, tool_call_id=call_id, **outcome_kwargs(result, error, {}))
        got = [
            (
                r.result_hash,
                r.unknown_tool_name,
                r.outcome_kind,
                r.failure_identity_hash,
                r.no_progress,
            )
            for r in guard.detector.history()
        ]
        assert got == expected, twin


class EditsOnRepr:
    """A value whose repr() changes the details holding it (read before any is encoded)."""

    def __init__(self, details: dict[str, Any]) -> None:
        self.details = details

    def __repr__(self) -> str:
        self.details["exitCode"] = 5
        self.details["totalLines"] = 9
        return "EditsOnRepr()"


@pytest.mark.skipif(not COMPILED, reason="the compiled twin is not built")
@pytest.mark.parametrize("action", ["poll", "log"])
def test_a_poll_reads_its_fields_before_encoding_any(action: str) -> None:
    from loopcore import _outcome_c

    found = []
    for twin in (_outcome_py, _outcome_c):
        fields: dict[str, Any] = {}
        fields["status"] = EditsOnRepr(fields)
        result = {"content": [{"type": "text", "text": "x"}], "details": fields}
        found.append(twin.outcome_of("process", {"action": action}, result=result))
    assert found[0] == found[1]


def nested_details(levels: int) -> dict[str, Any]:
    """Details whose innermost list lies ``levels`` containers below the details dict."""
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return {"lines": 1, "nested": value}


@pytest.mark.skipif(not COMPILED, reason="the compiled twin is not built")
@pytest.mark.parametrize("levels", [250, 251, 252, 253, 254, 255, 256, 257])
@pytest.mark.parametrize("tool", ["read", "process"])
def test_a_generic_result_meets_the_depth_limit_where_the_reference_does(
    levels: int, tool: str
) -> None:
    """The generic hash's prefix (domain, header, tag) is written at once, one level deep."""
    from loopcore import _outcome_c

    result = {"content": [{"type": "text", "text": "x"}], "details": nested_details(levels)}
    expected = _outcome_py.outcome_of(tool, {}, result=result)
    assert exact(_outcome_c.outcome_of(tool, {}, result=result)) == exact(expected)

"""SPEC §8.4-8.6, §8.13 (+ §12.10, §12.11, §12.17): ``outcome_of`` rule by rule, on both twins.

The functions are read from the chooser (``_outcome.outcome_of``) at call time, so the
conftest's ``twin`` fixture decides which twin answers; the byte-for-byte comparison of
the two twins is at the end (and in ``fuzz/fuzz_fingerprint.py``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import secrets
import types
from collections.abc import Callable
from typing import Any

import pytest

from loopcore import LoopDetector, _outcome
from loopcore._exec_shape import SHAPE_WINDOW, exit_footer, is_terminal, js_number, shape
from loopcore._records import KIND_NONE, KIND_TERMINAL_EXEC, KIND_VETO

from .conftest import TWINS

pytestmark = pytest.mark.usefixtures("twin")

OPEN = "<<<EXTERNAL_UNTRUSTED_CONTENT id="
CLOSE = "<<<END_EXTERNAL_UNTRUSTED_CONTENT id="
VETO = {"status": "blocked", "deniedReason": "tool-loop"}


def wrap(body: str = 'page "text"', nonce: str | None = None) -> str:
    """A fetched page as the host wraps it, with a fresh nonce unless one is given."""
    n = secrets.token_hex(8) if nonce is None else nonce
    return f'{OPEN}"{n}">>>{body}{CLOSE}"{n}">>>'


def tr(details: Any = None, *texts: str) -> dict[str, Any]:
    out: dict[str, Any] = {"content": [{"type": "text", "text": t} for t in texts]}
    if details is not None:
        out["details"] = details
    return out


def of(tool: str, args: Any = None, **kwargs: Any) -> tuple[Any, ...]:
    found = _outcome.outcome_of(tool, {} if args is None else args, **kwargs)
    assert type(found) is tuple
    assert len(found) == 5
    return found


def rh(tool: str, args: Any = None, **kwargs: Any) -> int:
    found = of(tool, args, **kwargs)[0]
    assert type(found) is int
    return found


# ---- the outcome_of contract ------------------------------------------------------------


def test_no_outcome() -> None:
    assert of("read") == (None, None, KIND_NONE, None, False)
    assert of("read", error=None) == (None, None, KIND_NONE, None, False)


def test_ordinary_results() -> None:
    for result in ["x", None, 0, [1, "a"], {"a": 1}, tr({"n": 1}, "text")]:
        found = of("read", result=result)
        assert found[1:] == (None, KIND_NONE, None, False)
        assert (found[0], found[1]) == _outcome.hash_outcome("read", {}, result=result)


@pytest.mark.parametrize("error", ["boom", ValueError("boom"), 5, {"code": 1}, "unknown tool: Zap"])
def test_every_error_is_no_progress(error: Any) -> None:
    found = of("read", error=error)
    assert type(found[0]) is int
    assert found[2:] == (KIND_NONE, None, True)
    assert (found[0], found[1]) == _outcome.hash_outcome("read", {}, error=error)
    assert found == of("read", result="ignored", error=error)


def test_unknown_tool_name_is_kept() -> None:
    assert of("read", error="unknown tool: Zap")[1] == "zap"


@pytest.mark.parametrize("tool", ["read", "exec", "write", "wait", "message", "update_plan"])
def test_loop_veto(tool: str) -> None:
    assert of(tool, result=tr(VETO, "blocked")) == (None, None, KIND_VETO, None, False)
    assert _outcome.hash_outcome(tool, {}, result=tr(VETO)) == (None, None)


def test_veto_checked_before_a_normaliser() -> None:
    calls: list[Any] = []

    def norm(args: Any, result: Any) -> Any:
        calls.append(result)
        return "x"

    assert of("read", result=tr(VETO), normalizers={"read": norm})[2] == KIND_VETO
    assert calls == []


def test_other_blocked_outcomes_keep_a_hash() -> None:
    found = of("read", result=tr({"status": "blocked", "deniedReason": "policy"}))
    assert type(found[0]) is int
    assert found[2] == KIND_NONE


def test_tool_name_is_checked() -> None:
    with pytest.raises(TypeError, match="tool_name"):
        _outcome.outcome_of(5, {}, result=1)  # type: ignore[arg-type]


# ---- §8.4: exec args without title --------------------------------------------------------


def test_exec_args_ignore_the_top_level_title() -> None:
    plain = _outcome.hash_call("exec", {"command": "make test"})
    assert _outcome.hash_call("exec", {"command": "make test", "title": "Run tests"}) == plain
    assert _outcome.hash_call("exec", {"title": "other", "command": "make test"}) == plain
    proxy = types.MappingProxyType({"command": "make test", "title": "x"})
    assert _outcome.hash_call("exec", proxy) == plain
    assert _outcome.hash_call("exec", {"command": "make lint", "title": "Run tests"}) != plain


def test_title_is_kept_elsewhere() -> None:
    nested = _outcome.hash_call("exec", {"command": "x", "env": {"title": "a"}})
    assert nested != _outcome.hash_call("exec", {"command": "x", "env": {"title": "b"}})
    assert _outcome.hash_call("read", {"title": "a"}) != _outcome.hash_call("read", {"title": "b"})
    assert _outcome.hash_call("exec", {1: "a"}) != _outcome.hash_call("exec", {1: "b"})


def test_exec_title_through_the_detector() -> None:
    detector = LoopDetector({"enabled": True})
    detector.record_call("exec", {"command": "ls", "title": "one"})
    detector.record_call("exec", {"command": "ls", "title": "two"})
    first, second = detector.history()
    assert first.args_hash == second.args_hash == _outcome.hash_call("exec", {"command": "ls"})


# ---- §8.4: exec output and terminal failures ----------------------------------------------


def exec_done(out: Any = "error: boom", text: str = "", **details: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"status": "completed", "exitCode": 1, "aggregated": out}
    return tr({**base, **details}, *([text] if text else []))


def test_aggregated_is_stripped() -> None:
    assert rh("exec", result=exec_done("  out \n")) == rh("exec", result=exec_done("out"))


def test_terminal_failure() -> None:
    found = of("exec", result=exec_done())
    assert found[2] == KIND_TERMINAL_EXEC
    assert type(found[3]) is int
    assert found[4] is False
    assert found[0] == rh("exec", result=exec_done(pid=4))  # still the §2 exec hash
    assert of("exec", result=exec_done(status="failed"))[2] == KIND_TERMINAL_EXEC
    # ``out`` falls back to the text when aggregated is blank.
    assert of("exec", result=exec_done("  ", text="Traceback"))[2] == KIND_TERMINAL_EXEC


@pytest.mark.parametrize(
    "details",
    [
        {"exitCode": 0},
        {"exitCode": 0.0},
        {"exitCode": None},
        {"exitCode": "1"},
        {"exitCode": True},
        {"exitCode": math.nan},
        {"exitCode": math.inf},
        {"exitCode": -math.inf},
        {"exitCode": 10**400},
        {"timedOut": True},
        {"aggregated": "", "status": "failed"},
        {"aggregated": "(Command exited with code 1)"},
        {"aggregated": "  (Command exited with code 1)\n"},
        {"aggregated": "(Command exited with code 2.5)", "exitCode": 2.5},
        {"aggregated": "(Command exited with code -3)", "exitCode": -3},
        {"aggregated": "(Command exited with code 1)", "exitCode": 1.0},
        {"status": "running", "tail": "x"},
    ],
)
def test_not_terminal(details: dict[str, Any]) -> None:
    found = of("exec", result=exec_done(**details))
    assert type(found[0]) is int
    assert found[2:] == (KIND_NONE, None, False)


@pytest.mark.parametrize(
    ("code", "footer"),
    [(1, "(Command exited with code 1.0)"), (2.5, "(Command exited with code 2.50)"), (1, "")],
)
def test_near_footers_are_terminal(code: Any, footer: str) -> None:
    out = footer or "(Command exited with code 1) and more"
    assert of("exec", result=exec_done(out, exitCode=code))[2] == KIND_TERMINAL_EXEC


def test_empty_output_is_not_terminal() -> None:
    assert of("exec", result=exec_done("", text=""))[2] == KIND_NONE


def test_a_normaliser_replaces_the_terminal_rule() -> None:
    found = of("exec", result=exec_done(), normalizers={"exec": lambda a, r: "same"})
    assert found[2:] == (KIND_NONE, None, False)


def failing(out: str, **details: Any) -> tuple[Any, ...]:
    return of("exec", {"command": "node retry.js"}, result=exec_done(out, **details))


DRIFTS = [
    ("2026-03-01T10:00:00.123Z retry failed", "2026-03-01T10:07:41.987Z retry failed"),
    ("at 10:00:00 connection refused", "at 11:59:58.5 connection refused"),
    ("attempt 1 of 5 failed", "attempt 4 of 5 failed"),
    ("Retry #3: ECONNRESET", "Retry #9: ECONNRESET"),
    ("failed after 120ms", "failed after 98 ms"),
    ("timeout after 1.5s", "timeout after 2 seconds"),
    ("worker pid=4242 died", "worker pid=77 died"),
    ("PPID: 1 exited", "PPID: 9 exited"),
]


@pytest.mark.parametrize(("first", "second"), DRIFTS)
def test_drift_keeps_the_identity(first: str, second: str) -> None:
    one, two = failing(first), failing(second)
    assert one[0] != two[0]  # the outcomes differ ...
    assert one[3] == two[3]  # ... the failure does not


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("on 2026-03-01: failed", "on 2026-03-02: failed"),  # a date alone
        ("errno 13", "errno 2"),
        ("exit status 2", "exit status 3"),
        ("listening on port 8080", "listening on port 9090"),
        ("file1.txt missing", "file2.txt missing"),
    ],
)
def test_other_numbers_stay_significant(first: str, second: str) -> None:
    assert failing(first)[3] != failing(second)[3]


def test_identity_holds_status_and_exit_code() -> None:
    base = failing("boom")[3]
    assert failing("boom", status="failed")[3] != base
    assert failing("boom", exitCode=2)[3] != base
    assert failing("boom", exitCode=1.0)[3] == base  # 1.0 is the number 1


def test_twenty_new_commands_with_the_same_failure() -> None:
    found = [
        of("exec", {"command": f"python job-{i}.py"}, result=exec_done(f"took {i}ms: ENOSPC"))
        for i in range(20)
    ]
    assert len({f[3] for f in found}) == 1
    assert len({f[0] for f in found}) == 20
    assert len(
        {_outcome.hash_call("exec", {"command": f"python job-{i}.py"}) for i in range(20)}
    ) == (20)


# ---- shape() ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shaped"),
    [
        ("2026-03-01T10:00:00Z", "#"),
        ("2026-03-01 10:00:00.123456+02:00", "#"),
        ("2026-03-01t10:00:00z", "#"),
        ("2026-03-01", "2026-03-01"),
        ("10:00:00 and 1:02:03.5", "# and #"),
        ("attempt 3", "#"),
        ("ATTEMPT: 3", "#"),
        ("retry=12", "#"),
        ("retries 3", "retries 3"),
        ("in 12ms", "in #"),
        ("in 12 MS", "in #"),
        ("1.25 seconds", "#"),
        ("3 minutes, 1 hour", "#, #"),
        ("5us and 7ns", "# and #"),
        ("v2s", "v2s"),
        ("pid 12", "#"),
        ("ppid#12", "#"),
        ("rapid 12", "rapid 12"),
        ("errno 13", "errno 13"),
        ("\u0661\u0662ms", "\u0661\u0662ms"),  # ASCII digits only
    ],
)
def test_shape(text: str, shaped: str) -> None:
    assert shape(text) == shaped


def test_shape_applies_the_patterns_in_order() -> None:
    # The full timestamp goes first: the time alone would leave the date behind.
    assert shape("2026-03-01 10:00:00 boom") == "# boom"


def test_shape_reads_only_both_ends() -> None:
    head, tail = "h" * SHAPE_WINDOW, "t" * SHAPE_WINDOW
    one = shape(head + "middle errno 1" * 10_000 + tail)
    two = shape(head + "other" * 50_000 + tail)
    assert one == two
    assert shape("x" + head[1:] + "middle" + tail) != one


def test_no_match_spans_the_cut() -> None:
    # 12:30:45 straddles the end of the head window: the head keeps "12:3".
    out = "a" * (SHAPE_WINDOW - 4) + "12:30:45" + "b" * (SHAPE_WINDOW + 10)
    shaped = shape(out)
    assert shaped.startswith("a" * (SHAPE_WINDOW - 4) + "12:3")
    assert "#" not in shaped[:SHAPE_WINDOW]
    # Within one window the same text is a match.
    assert shape("12:30:45" + "b" * 10) == "#" + "b" * 10


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1, "1"),
        (1.0, "1"),
        (-1, "-1"),
        (2.5, "2.5"),
        (0.1, "0.1"),
        (123.456, "123.456"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e21, "1.5e+21"),
        (0.000001, "0.000001"),
        (1e-7, "1e-7"),
        (1.25e-7, "1.25e-7"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (255, "255"),
    ],
)
def test_js_number(number: float, text: str) -> None:
    assert js_number(number) == text


def test_exit_footer_and_terminal_helper() -> None:
    assert exit_footer(1.0) == "(Command exited with code 1)"
    assert is_terminal(1, False, "x")
    assert not is_terminal(1, True, "x")
    assert not is_terminal(True, False, "x")


# ---- §8.6: write no-ops -------------------------------------------------------------------


def test_write_no_op() -> None:
    unchanged = of("write", result={"status": "unchanged"})[0]
    first = of("write", {"path": "a.txt"}, result=tr({"changed": False, "path": "a.txt"}, "same"))
    second = of("write", {"path": "b.txt"}, result=tr({"changed": False, "path": "b.txt"}, "x"))
    assert first == second == (unchanged, None, KIND_NONE, None, True)


@pytest.mark.parametrize("changed", [True, None, 0, "false", [False]])
def test_writes_that_changed_something_hash_in_full(changed: Any) -> None:
    def h(path: str) -> tuple[Any, ...]:
        return of("write", {"path": path}, result=tr({"changed": changed, "path": path}, "ok"))

    assert h("a.txt")[4] is False
    assert h("a.txt")[0] != h("b.txt")[0]


def test_successful_writes_stay_different() -> None:
    one = of("write", result=tr({"diff": "+a"}, "Successfully wrote 3 bytes to a.txt"))
    two = of("write", result=tr({"diff": "+a"}, "Successfully wrote 3 bytes to b.txt"))
    assert one[0] != two[0]
    assert one[4] is two[4] is False


def test_no_op_rule_is_for_write_only() -> None:
    assert of("edit", result=tr({"changed": False}, "a"))[4] is False
    assert of("write", result=tr({"changed": False}), normalizers={"write": lambda a, r: 1})[4] is (
        False
    )


# ---- §8.13: Code Mode receipts ------------------------------------------------------------


def receipt(value: Any = "done", **extra: Any) -> dict[str, Any]:
    return {"status": "completed", "value": value, **extra}


def test_receipts_with_telemetry_and_fresh_nonces_hash_alike() -> None:
    hashes = {
        rh(
            "exec",
            result=receipt(wrap("result 42"), telemetry={"callCount": i}, runId=f"run-{i}"),
        )
        for i in range(2000)
    }
    assert len(hashes) == 1
    assert rh("exec", result=receipt(wrap("result 43"))) not in hashes


def test_two_thousand_receipts_are_critical_and_a_new_value_is_not() -> None:
    detector = LoopDetector({"enabled": True})
    args = {"code": "await tools.poll()"}
    for i in range(2000):
        detector.record_call("exec", args)
        value = receipt(wrap("still waiting"), telemetry={"callCount": i})
        detector.record_outcome("exec", args, result=value)
    assert detector.check("exec", args).level == "critical"
    detector.record_call("exec", args)
    detector.record_outcome("exec", args, result=receipt(wrap("finished: 42")))
    assert detector.check("exec", args).level != "critical"


def test_wait_is_a_known_poll_with_its_own_rules() -> None:
    assert _outcome.is_known_poll("wait", {})
    assert {"write", "wait", "exec"} <= _outcome.SPECIAL_OUTCOME_TOOLS


def test_receipt_pending_calls() -> None:
    def pending(*calls: Any) -> int:
        return rh("wait", result=receipt(pendingToolCalls=list(calls)))

    call = {"method": "read", "args": {"path": "a"}}
    base = pending({**call, "id": "req-1"})
    assert pending({**call, "id": "req-2"}) == base
    assert pending({**call, "id": "r"}, {**call, "settled": True, "id": "s"}) == base
    assert pending({**call}, "junk", {"args": 1}) == base
    assert pending({**call, "settled": "no"}) == base
    assert pending({"method": "read", "args": {"path": "b"}}) != base
    assert pending({"method": "grep", "args": {"path": "a"}}) != base
    assert pending() != rh("wait", result=receipt())  # present and empty vs absent


def test_receipt_pending_key_does_not_clash() -> None:
    # §12.11: the pair (reduced receipt, pending list or absent).
    calls = [{"method": "m", "args": 1}]
    own = rh("exec", result=receipt(pending=calls))
    assert own != rh("exec", result=receipt(pendingToolCalls=calls))
    assert own != rh("exec", result=receipt())


def test_what_is_a_receipt() -> None:
    def differs(tool: str, result: Any, other: Any) -> bool:
        return rh(tool, result=result) != rh(tool, result=other)

    one, two = receipt(telemetry={"n": 1}), receipt(telemetry={"n": 2})
    assert not differs("exec", one, two)
    assert not differs("wait", one, two)
    assert differs("read", one, two)  # only exec and wait
    assert differs("exec", {**one, "status": 5}, {**two, "status": 5})  # a string status
    assert differs("exec", receipt("a"), receipt("b"))


def test_receipt_keys_are_not_normalised() -> None:
    assert rh("exec", result={"status": "ok", wrap(): 1}) != rh(
        "exec", result={"status": "ok", wrap(): 1}
    )


# ---- §8.5: where nonces are normalised -----------------------------------------------------


@dataclasses.dataclass
class Page:
    body: str
    tags: frozenset[str]


def json_times(text: str, times: int) -> str:
    for _ in range(times):
        text = json.dumps(text)
    return text


SHAPES: dict[str, Callable[[], Any]] = {
    "plain string": lambda: wrap(),
    "in a list": lambda: ["a", [wrap()]],
    "in a dict value": lambda: {"page": {"html": wrap()}},
    "in a tuple and a set": lambda: ({wrap()}, (1, wrap())),
    "in a dataclass": lambda: Page(wrap(), frozenset({wrap()})),
    "an exception value": lambda: [RuntimeError(wrap())],
    "str subclass": lambda: [type("S", (str,), {})(wrap())],
    "tool result text": lambda: tr({"status": "ok"}, wrap()),
    "tool result details": lambda: tr({"html": wrap()}, "x"),
    "two entries": lambda: tr(None, wrap(), "and", wrap()),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_fresh_nonces_in_results_hash_alike(name: str) -> None:
    make = SHAPES[name]
    assert rh("web_fetch", result=make()) == rh("web_fetch", result=make())


@pytest.mark.parametrize("times", [1, 2, 3, 4, 5])
def test_json_encoded_results_hash_alike(times: int) -> None:
    def h() -> int:
        text = json_times(wrap('he said "hi" \\o/'), times)
        return rh("web_fetch", result=tr({"raw": text}, text))

    assert h() == h()


def test_fresh_nonces_in_errors_hash_alike() -> None:
    assert len({of("web_fetch", error=wrap("403"))[0] for _ in range(20)}) == 1
    assert len({of("web_fetch", error=RuntimeError(wrap("403")))[0] for _ in range(20)}) == 1
    assert of("web_fetch", error=wrap("403"))[0] != of("web_fetch", error=wrap("404"))[0]


def test_twenty_fresh_nonce_errors_are_critical() -> None:
    detector = LoopDetector({"enabled": True})
    for _ in range(20):
        detector.record_call("web_fetch", {"url": "u"})
        detector.record_outcome("web_fetch", {"url": "u"}, error=RuntimeError(wrap("Forbidden")))
    verdict = detector.check("web_fetch", {"url": "u"})
    assert verdict.level == "critical"
    assert verdict.detector == "generic_repeat"


@pytest.mark.parametrize("times", [0, 3])
def test_twenty_fresh_nonce_results_are_critical(times: int) -> None:
    detector = LoopDetector({"enabled": True})
    for _ in range(20):
        detector.record_call("web_fetch", {"url": "u"})
        text = json_times(wrap(), times)
        detector.record_outcome("web_fetch", {"url": "u"}, result=tr({"ok": True}, text))
    verdict = detector.check("web_fetch", {"url": "u"})
    assert (verdict.level, verdict.detector) == ("critical", "generic_repeat")


def test_nonces_in_every_rule() -> None:
    def same(tool: str, make: Any, args: Any = None, **kwargs: Any) -> bool:
        return rh(tool, args, result=make(), **kwargs) == rh(tool, args, result=make(), **kwargs)

    assert same("exec", lambda: exec_done(wrap()))
    assert same("exec", lambda: exec_done("  ", text=wrap()))
    assert same("exec", lambda: tr({"status": "running", "tail": wrap()}))
    assert same("process", lambda: tr({"status": "running"}, wrap()), {"action": "poll"})
    assert same("message", lambda: tr({"text": wrap(), "messageId": "m"}), {"action": "send"})
    assert same("update_plan", lambda: tr({"plan": [{"step": "a", "status": wrap()}]}))
    assert same("fetch", lambda: {"x": 1}, normalizers={"fetch": lambda a, r: [wrap()]})
    assert failing(wrap("boom at 10:00:00"))[3] == failing(wrap("boom at 10:00:01"))[3]


def test_what_is_never_normalised() -> None:
    first, second = wrap(), wrap()
    assert _outcome.hash_call("web_fetch", {"q": first}) != _outcome.hash_call(
        "web_fetch", {"q": second}
    )
    assert rh("read", result={first: 1}) != rh("read", result={second: 1})
    assert rh("read", result={(first,): 1}) != rh("read", result={(second,): 1})
    # The unknown-tool name is read from the text as it is.
    assert of("x", error=f"unknown tool: {'a' * 5} {first}")[1] == "aaaaa"


def test_pairs_split_across_fields_or_entries_stay_different() -> None:
    nonce = secrets.token_hex(8)
    other = secrets.token_hex(8)

    def halves(n: str) -> tuple[str, str]:
        whole = wrap("page", n)
        cut = whole.index(CLOSE)
        return whole[:cut], whole[cut:]

    a, b = halves(nonce), halves(other)
    assert rh("read", result={"x": a[0], "y": a[1]}) != rh("read", result={"x": b[0], "y": b[1]})
    # §12.10: content entries are normalised one by one, before the join.
    assert rh("read", result=tr(None, *a)) != rh("read", result=tr(None, *b))
    assert rh("read", result=tr(None, a[0] + "\n" + a[1])) == rh(
        "read", result=tr(None, b[0] + "\n" + b[1])
    )


def test_normalised_equals_a_real_zero_id() -> None:
    zero = wrap("page", "0" * 16)
    assert rh("read", result=tr(None, zero)) == rh("read", result=tr(None, wrap("page")))
    assert rh("read", result=zero) == rh("read", result=wrap("page"))


def test_malformed_wrappers_stay_different() -> None:
    def bad(n: str) -> str:
        return json.dumps(wrap('say "x"', n)).replace('\\"x\\"', '"x"')

    assert rh("read", result=bad(secrets.token_hex(8))) != rh(
        "read", result=bad(secrets.token_hex(8))
    )
    empty = f'{OPEN}"">>>x{CLOSE}"">>>'
    assert rh("read", result=empty) != rh("read", result=wrap("x"))


class ClaimsStr:
    """Not a str, though ``isinstance`` says so (its ``__class__`` lies, SPEC §11)."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str

    def __repr__(self) -> str:
        return "ClaimsStr()"


def test_a_content_text_that_only_claims_to_be_a_str() -> None:
    # The C fast path must not read it as a str's storage; the rules hash it safely.
    for text in (ClaimsStr(), [ClaimsStr()]):
        result = {"content": [{"type": "text", "text": text}], "details": {"k": wrap()}}
        found = of("read", result=result)
        assert type(found[0]) is int
        assert found == of("read", result=result)


# ---- the twins agree ----------------------------------------------------------------------

AGREEMENT = [
    ("exec", {"command": "x", "title": "t"}, {"result": exec_done("took 5ms, pid 3")}),
    ("exec", {}, {"result": exec_done("(Command exited with code 1)")}),
    ("exec", {}, {"result": receipt(wrap(), pendingToolCalls=[{"method": "m", "id": 1}])}),
    ("wait", {}, {"result": receipt(telemetry={"callCount": 3})}),
    ("write", {}, {"result": tr({"changed": False})}),
    ("read", {}, {"result": tr(VETO)}),
    ("read", {}, {"result": tr({"k": wrap()}, wrap(), wrap())}),
    ("read", {}, {"result": json_times(wrap(), 4)}),
    ("read", {}, {"error": RuntimeError(wrap())}),
    ("read", {}, {"result": {wrap("k"): [wrap()]}}),
    # The C fast path's own cases: wrappers in details or a whole value, none in the text.
    ("read", {}, {"result": tr({"k": wrap(), "l": [wrap(), {wrap()}]}, "plain")}),
    ("read", {}, {"result": [{"a": wrap()}, (wrap(),)]}),
    ("read", {}, {"result": {"content": "not a list", "details": {"x": wrap()}}}),
    ("read", {}, {"result": {"content": [{"type": "text", "text": ClaimsStr()}]}}),
]


@pytest.mark.skipif("cython" not in TWINS, reason="the compiled twin is not built")
@pytest.mark.parametrize(("tool", "args", "outcome"), AGREEMENT)
def test_twins_agree(tool: str, args: Any, outcome: dict[str, Any]) -> None:
    from loopcore import _outcome_c, _outcome_py

    assert _outcome_c.outcome_of(tool, args, **outcome) == _outcome_py.outcome_of(
        tool, args, **outcome
    )
    assert _outcome_c.hash_call(tool, args) == _outcome_py.hash_call(tool, args)

"""SPEC §2 outcome hashing: ``hash_outcome`` rule by rule, with each rule's boundaries."""

from __future__ import annotations

import logging
import types
from collections.abc import Callable
from typing import Any

import pytest

from loopcore import UNSET, LoopDetector, ToolLoopGuard, hash_outcome

# Runs on both twins (see conftest).
pytestmark = pytest.mark.usefixtures("twin")

EXEC_VOLATILE = ["durationMs", "pid", "sessionId", "cwd", "startedAt", "endedAt"]

SEND_VOLATILE = [
    "messageId",
    "message_id",
    "messageIds",
    "platformMessageId",
    "platformMessageIds",
    "fileId",
    "file_id",
    "fileKey",
    "pollId",
    "poll_id",
    "receipt",
    "runId",
    "idempotencyKey",
    "ts",
    "timestamp",
    "sentAt",
    "deliveredAt",
    "createdAt",
]

MESSAGE_SEND_ACTIONS = [
    "send",
    "broadcast",
    "reply",
    "thread-reply",
    "sendWithEffect",
    "sendAttachment",
    "upload-file",
    "sticker",
    "poll",
]

VETO = {"status": "blocked", "deniedReason": "tool-loop"}


def tr(details: Any = UNSET, *texts: Any, content: Any = UNSET, **extra: Any) -> dict[str, Any]:
    """A tool-result mapping; each text becomes one content entry."""
    out: dict[str, Any] = dict(extra)
    if content is not UNSET:
        out["content"] = content
    elif texts or details is UNSET:
        out["content"] = [{"type": "text", "text": t} for t in texts]
    if details is not UNSET:
        out["details"] = details
    return out


def rh(tool: str, args: Any = None, **kwargs: Any) -> int:
    """The result hash, which must exist."""
    result_hash, _ = hash_outcome(tool, {} if args is None else args, **kwargs)
    assert type(result_hash) is int
    assert 0 <= result_hash < 2**64
    return result_hash


def err(error: Any, tool: str = "tool") -> tuple[int | None, str | None]:
    return hash_outcome(tool, {}, error=error)


# --- rules 1 and 2: which outcome is there at all ---------------------------------


def test_error_wins_over_result() -> None:
    both = hash_outcome("tool", {}, result="fine", error="boom")
    assert both == err("boom")
    assert both[0] != rh("tool", result="fine")


def test_error_wins_over_vetoed_result() -> None:
    both = hash_outcome("tool", {}, result=tr(VETO, "blocked"), error="boom")
    assert both == err("boom")


def test_error_none_means_no_error() -> None:
    assert hash_outcome("tool", {}, result="fine", error=None) == hash_outcome(
        "tool", {}, result="fine"
    )
    assert hash_outcome("tool", {}, error=None) == (None, None)


def test_result_none_is_a_real_outcome() -> None:
    none_hash = rh("tool", result=None)
    assert none_hash != rh("tool", result="None")
    assert none_hash != rh("tool", result=0)
    assert none_hash != rh("tool", result={})
    assert hash_outcome("tool", {}, result=None)[1] is None


def test_neither_given_is_no_outcome() -> None:
    assert hash_outcome("tool", {}) == (None, None)
    assert hash_outcome("tool", {"a": 1}, result=UNSET, error=UNSET) == (None, None)
    assert hash_outcome("exec", {"command": "ls"}) == (None, None)


@pytest.mark.parametrize("falsy", [0, False, "", 0.0])
def test_falsy_error_is_still_an_error(falsy: Any) -> None:
    error_hash, unknown = err(falsy)
    assert type(error_hash) is int
    assert unknown is None


# --- rule 1: error text -------------------------------------------------------------


class QuotaExceeded(Exception):
    pass


def test_exception_message_is_the_text() -> None:
    assert err(ValueError("boom")) == err("boom")
    assert err(RuntimeError("boom")) == err("boom")
    assert err(ValueError("boom")) != err(ValueError("bang"))


def test_empty_exception_message_uses_class_name() -> None:
    assert err(ValueError()) == err("ValueError")
    assert err(QuotaExceeded()) == err("QuotaExceeded")
    assert err(QuotaExceeded()) != err(ValueError())
    assert err(QuotaExceeded("over")) == err("over")


@pytest.mark.parametrize(
    ("value", "text"),
    [(5, "5"), (-12, "-12"), (1.5, "1.5"), (True, "True"), (False, "False"), (0, "0")],
)
def test_numbers_and_bools_as_text(value: Any, text: str) -> None:
    assert err(value) == err(text)


def test_numbers_as_text_differ_between_values() -> None:
    assert err(5) != err(6)
    assert err(True) != err(1)
    assert err(True) != err(False)


def test_other_error_values_hash_canonically() -> None:
    first = err({"code": 1, "why": ["a"]})
    assert type(first[0]) is int
    assert first == err({"why": ["a"], "code": 1})
    assert first != err({"code": 2, "why": ["a"]})
    assert err(["a", "b"]) == err(("a", "b"))
    assert err(["a", "b"]) != err(["a", "c"])
    assert err(["boom"]) != err("boom")


@pytest.mark.parametrize("text", ["boom", "", "5", "None"])
def test_error_hash_is_domain_separated_from_result(text: str) -> None:
    error_hash = err(text)[0]
    assert error_hash != rh("tool", result=text)
    assert error_hash != rh("tool", result=tr({}, text))
    assert err(ValueError(text or "x"))[0] != rh("tool", result=text or "x")


def test_error_hash_of_structured_value_is_domain_separated() -> None:
    assert err({"code": 1})[0] != rh("tool", result={"code": 1})
    assert err(5)[0] != rh("tool", result=5)
    assert err(5)[0] != rh("tool", result="5")


# --- rule 1: unknown tool ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("unknown tool: websearch", "websearch"),
        ("unknown tool websearch", "websearch"),
        ("tool websearch not found", "websearch"),
        ("tool websearch is not available", "websearch"),
        ("Unknown Tool: WebSearch", "websearch"),
        ("UNKNOWN TOOL WEBSEARCH", "websearch"),
        ("Tool WebSearch Not Found", "websearch"),
        ("TOOL WebSearch IS NOT AVAILABLE", "websearch"),
        ("unknown tool: 'web_search'", "web_search"),
        ('unknown tool "web_search"', "web_search"),
        ("unknown tool: `web_search`", "web_search"),
        ("Tool 'Fs.Read-2' not found", "fs.read-2"),
        ('tool "fs.read-2" is not available', "fs.read-2"),
        ("tool `Browser_V2` not found", "browser_v2"),
        ("Unknown tool: Foo.", "foo"),
        ("error: unknown tool: foo (check the tool list)", "foo"),
        ("request failed\nTool bar is not available in this session", "bar"),
    ],
)
def test_unknown_tool_extraction(text: str, name: str) -> None:
    error_hash, unknown = err(text)
    assert unknown == name
    assert type(error_hash) is int


def test_unknown_tool_from_exception_message() -> None:
    assert err(LookupError("Tool 'Grep' not found"))[1] == "grep"
    assert err(KeyError("unknown tool: grep"))[1] == "grep"


def test_unknown_tool_hash_follows_the_text() -> None:
    assert err("unknown tool: foo")[0] != err("unknown tool: bar")[0]
    assert err("unknown tool: foo")[0] == err(ValueError("unknown tool: foo"))[0]


@pytest.mark.parametrize(
    "text",
    [
        "file not found",
        "No such file or directory: /tmp/tool",
        "unknown error",
        "tool execution failed",
        "the tool returned an error",
        "permission denied",
        "HTTP 404: page not found",
        "Unknown option: --tool",
        "",
    ],
)
def test_unrelated_errors_name_no_tool(text: str) -> None:
    error_hash, unknown = err(text)
    assert unknown is None
    assert type(error_hash) is int


def test_unknown_tool_text_in_result_is_not_an_error() -> None:
    assert hash_outcome("tool", {}, result="unknown tool: foo")[1] is None
    assert hash_outcome("tool", {}, result=tr({}, "unknown tool: foo"))[1] is None


# --- rule 1: hostile error values and bounded work (SPEC §11) -----------------------


class ClaimsStr:
    """Not a str, but ``isinstance`` believes its ``__class__``."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str

    def __str__(self) -> str:
        return "unknown tool: foo"

    def __repr__(self) -> str:
        return "ClaimsStr()"


class ClaimsException:
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return ValueError

    def __str__(self) -> str:
        return "boom"

    def __repr__(self) -> str:
        return "ClaimsException()"


def _canonical_error_hash(value: object) -> int:
    from loopcore import _fingerprint
    from loopcore._outcome_py import ERROR_DOMAIN

    return _fingerprint.fingerprint(value, ERROR_DOMAIN)


def test_error_whose_class_claims_str_is_treated_by_its_real_type() -> None:
    liar = ClaimsStr()
    assert isinstance(liar, str)  # what the error branch must not trust
    error_hash, unknown = err(liar)
    assert error_hash == _canonical_error_hash(liar)  # "anything else": canonically
    assert unknown is None  # not a text, so no unknown-tool name
    assert error_hash != err("unknown tool: foo")[0]


def test_error_whose_class_claims_an_exception_is_treated_by_its_real_type() -> None:
    liar = ClaimsException()
    assert isinstance(liar, BaseException)
    assert err(liar) == (_canonical_error_hash(liar), None)
    assert err(liar) != err("boom")


def test_exception_whose_class_claims_str_is_still_an_exception() -> None:
    class Lying(Exception):
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return str

    assert err(Lying("unknown tool: bar")) == err("unknown tool: bar")
    assert err(Lying()) == err("Lying")


def test_error_claiming_str_is_recorded_through_the_hook() -> None:
    guard = ToolLoopGuard({"enabled": True})
    liar = ClaimsStr()
    guard.before_call("tool", {})
    guard.after_call("tool", {}, error=liar)
    [stored] = guard.detector.history()
    assert stored.result_hash == err(liar)[0]
    assert stored.unknown_tool_name is None
    assert stored.no_progress is True  # every error outcome (SPEC §8.0)


def test_str_subclass_error_is_its_text_whatever_its_methods_do() -> None:
    class Odd(str):
        def __getitem__(self, index: Any) -> str:
            raise RuntimeError("no slicing")

        def __len__(self) -> int:
            raise RuntimeError("no length")

    assert err(Odd("unknown tool: foo")) == err("unknown tool: foo")


def test_number_too_long_for_str_is_still_an_error() -> None:
    huge = 10**5000  # beyond int-to-str's digit limit: str() raises ValueError
    error_hash, unknown = err(huge)
    assert error_hash == _canonical_error_hash(huge)
    assert unknown is None
    assert err(huge) != err(huge + 1)
    assert err(7) == err("7")  # numbers str() can write are still their text


def test_unknown_tool_extraction_reads_at_most_4096_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from loopcore import _outcome_py

    seen: list[int] = []
    real = _outcome_py.unknown_tool_name

    def spy(text: str) -> str | None:
        seen.append(len(text))
        return real(text)

    monkeypatch.setattr(_outcome_py, "unknown_tool_name", spy)
    huge = "x" * 50_000_000
    assert err(huge)[1] is None
    assert err(RuntimeError(huge))[1] is None
    assert seen == [4096, 4096]
    # The hash still covers the whole text.
    assert err(huge + "a")[0] != err(huge + "b")[0]


def test_unknown_tool_named_past_4096_characters_is_not_extracted() -> None:
    phrase = "unknown tool: foo"
    before = " " * (4096 - len(phrase)) + phrase + " " * 10_000
    after = " " * 4096 + phrase
    assert err(before)[1] == "foo"
    assert err(ValueError(before))[1] == "foo"
    assert err(after)[1] is None
    assert err(ValueError(after))[1] is None
    assert err(after)[0] != err(" " * 4096)[0]


# --- rule 3: plain results -----------------------------------------------------------


def test_plain_non_mapping_result_hashes_whole_value() -> None:
    assert rh("tool", result="a") != rh("tool", result="b")
    assert rh("tool", result=[1, 2]) == rh("tool", result=(1, 2))
    assert rh("tool", result=[1, 2]) != rh("tool", result=[2, 1])
    assert rh("tool", result=3) != rh("tool", result="3")


def test_plain_mapping_result_hashes_whole_value() -> None:
    base = {"a": 1, "text": "x", "status": "ok"}
    assert rh("tool", result=base) == rh("tool", result={"status": "ok", "text": "x", "a": 1})
    assert rh("tool", result=base) != rh("tool", result={**base, "a": 2})
    assert rh("tool", result=base) != rh("tool", result={**base, "text": "y"})
    assert rh("tool", result=base) != rh("tool", result={**base, "extra": None})


def test_plain_mapping_with_veto_fields_is_not_vetoed() -> None:
    # Without a content or details key the mapping is a plain value, veto-looking or not.
    assert type(hash_outcome("tool", {}, result=dict(VETO))[0]) is int
    assert rh("tool", result=dict(VETO)) != rh("tool", result={**VETO, "n": 1})


def test_plain_result_differs_from_tool_result() -> None:
    assert rh("tool", result={"a": 1}) != rh("tool", result={"details": {"a": 2}})


# --- rule 4: tool-result mappings ------------------------------------------------------


def test_content_texts_are_joined_with_newline() -> None:
    assert rh("read", result=tr({}, "a", "b")) == rh("read", result=tr({}, "a\nb"))
    assert rh("read", result=tr({}, "a", "b")) != rh("read", result=tr({}, "ab"))
    assert rh("read", result=tr({}, "a", "b")) != rh("read", result=tr({}, "b", "a"))


def test_content_text_is_stripped() -> None:
    assert rh("read", result=tr({}, "  a\nb \n")) == rh("read", result=tr({}, "a\nb"))
    assert rh("read", result=tr({}, "\n", "a", " ")) == rh("read", result=tr({}, "a"))
    assert rh("read", result=tr({}, "a b")) != rh("read", result=tr({}, "ab"))


def test_content_entry_filtering() -> None:
    good = {"type": "text", "text": "a"}
    expected = rh("read", result=tr({}, content=[good]))
    ignored: list[Any] = [
        "junk",
        5,
        None,
        ["type", "text"],
        {"type": 1, "text": "zzz"},
        {"type": None, "text": "zzz"},
        {"text": "zzz"},
        {"type": "text", "text": 5},
        {"type": "text", "text": None},
        {"type": "text"},
    ]
    assert rh("read", result=tr({}, content=[*ignored, good, *ignored])) == expected
    # Any string type counts, not only "text".
    image = {"type": "image", "text": "a"}
    assert rh("read", result=tr({}, content=[image])) == expected


def test_content_entries_may_be_any_mapping() -> None:
    entry = types.MappingProxyType({"type": "text", "text": "a"})
    assert rh("read", result=tr({}, content=[entry])) == rh("read", result=tr({}, "a"))


def test_empty_or_missing_content_is_empty_text() -> None:
    expected = rh("read", result={"details": {"k": 1}})
    assert rh("read", result=tr({"k": 1}, content=[])) == expected
    assert rh("read", result=tr({"k": 1}, content=None)) == expected
    assert rh("read", result=tr({"k": 1}, "   ")) == expected


@pytest.mark.parametrize("content", ["abc", 5, {"type": "text", "text": "a"}, b"x"])
def test_odd_content_values_never_raise(content: Any) -> None:
    assert type(hash_outcome("read", {}, result={"content": content})[0]) is int


@pytest.mark.parametrize("details", ["text", None, [1, 2], 5, ("a",)])
def test_non_mapping_details_count_as_empty(details: Any) -> None:
    expected = rh("read", result=tr({}, "out"))
    assert rh("read", result=tr(details, "out")) == expected
    assert rh("read", result={"content": [{"type": "text", "text": "out"}]}) == expected


def test_other_top_level_keys_are_ignored() -> None:
    expected = rh("read", result=tr({"k": 1}, "out"))
    assert rh("read", result=tr({"k": 1}, "out", isError=False, extra=[1])) == expected


def test_tool_result_mapping_need_not_be_a_dict() -> None:
    proxy = types.MappingProxyType(tr({"k": 1}, "out"))
    assert rh("read", result=proxy) == rh("read", result=tr({"k": 1}, "out"))
    vetoed = types.MappingProxyType(tr(VETO, "stop"))
    assert hash_outcome("read", {}, result=vetoed) == (None, None)


# --- rule 4: loop veto -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read", {}),
        ("exec", {"command": "ls"}),
        ("process", {"action": "poll"}),
        ("process", {"action": "log"}),
        ("sessions_send", {}),
        ("message", {"action": "send"}),
        ("update_plan", {"plan": []}),
    ],
)
def test_loop_veto(tool: str, args: dict[str, Any]) -> None:
    assert hash_outcome(tool, args, result=tr(VETO, "blocked by loop detection")) == (
        None,
        None,
    )
    assert hash_outcome(tool, args, result={"details": {**VETO, "extra": 1}}) == (None, None)


def test_veto_needs_both_fields() -> None:
    assert type(rh("read", result=tr({"status": "blocked", "deniedReason": "policy"}))) is int
    assert type(rh("read", result=tr({"status": "denied", "deniedReason": "tool-loop"}))) is int
    assert type(rh("read", result=tr({"status": "blocked"}))) is int
    assert type(rh("read", result=tr({"deniedReason": "tool-loop"}))) is int


def test_vetoed_outcome_is_recorded_as_a_veto() -> None:
    # SPEC §8.1: no hash, but a veto record (filling the pending call, else appended).
    detector = LoopDetector()
    args = {"command": "sleep 1"}
    detector.record_call("exec", args)
    record = detector.record_outcome("exec", args, result=tr(VETO, "blocked"))
    assert record is not None
    assert record.result_hash is None
    assert record.outcome_kind == "tool-loop-veto"
    history = detector.history()
    assert len(history) == 1
    assert history[0].result_hash is None
    assert history[0].outcome_kind == "tool-loop-veto"

    fresh = LoopDetector()
    appended = fresh.record_outcome("read", {}, result={"details": dict(VETO)})
    assert appended is not None
    assert appended.outcome_kind == "tool-loop-veto"
    assert [r.outcome_kind for r in fresh.history()] == ["tool-loop-veto"]


def test_no_outcome_records_nothing() -> None:
    detector = LoopDetector()
    assert detector.record_outcome("read", {}) is None
    assert detector.record_outcome("read", {}, error=None) is None
    assert detector.history() == []


def test_real_outcome_is_recorded() -> None:
    # Counterpart of the veto test: the same path with an ordinary result does record.
    detector = LoopDetector()
    record = detector.record_outcome("read", {}, result=tr({"status": "ok"}, "x"))
    assert record is not None
    assert record.result_hash == rh("read", result=tr({"status": "ok"}, "x"))


# --- rule 4: exec ------------------------------------------------------------------------


def exec_result(text: str = "", **details: Any) -> dict[str, Any]:
    return tr(details, text)


class TestExecRunning:
    base: dict[str, Any] = {"status": "running", "tail": "line 1"}  # noqa: RUF012

    def h(self, text: str = "", **changes: Any) -> int:
        return rh("exec", result=exec_result(text, **{**self.base, **changes}))

    def test_tail_matters(self) -> None:
        assert self.h(tail="line 2") != self.h()

    @pytest.mark.parametrize("key", EXEC_VOLATILE)
    def test_volatile_fields_ignored(self, key: str) -> None:
        assert self.h(**{key: 1}) == self.h(**{key: 2}) == self.h()

    def test_text_and_other_fields_ignored(self) -> None:
        assert self.h("text a") == self.h("text b")
        assert self.h(exitCode=1, aggregated="x") == self.h()

    def test_missing_tail_is_empty(self) -> None:
        empty = self.h(tail="")
        assert self.h(tail=None) == empty
        details = {"status": "running"}
        assert rh("exec", result=exec_result("", **details)) == empty

    def test_status_matters(self) -> None:
        assert self.h() != rh("exec", result=exec_result("", status="completed", tail="line 1"))


class TestExecFinished:
    base: dict[str, Any] = {  # noqa: RUF012
        "status": "completed",
        "exitCode": 0,
        "timedOut": False,
        "aggregated": "all output",
    }

    def h(self, text: str = "", **changes: Any) -> int:
        details = {**self.base, **changes}
        for key in [k for k, v in details.items() if v is UNSET]:
            del details[key]
        return rh("exec", result=exec_result(text, **details))

    def test_status_matters(self) -> None:
        assert self.h(status="failed") != self.h()

    def test_failed_is_hashed_by_the_same_rule(self) -> None:
        assert self.h(status="failed", pid=1) == self.h(status="failed", pid=2)
        assert self.h(status="failed", exitCode=2) != self.h(status="failed", exitCode=3)

    def test_exit_code_matters(self) -> None:
        assert self.h(exitCode=1) != self.h()
        assert self.h(exitCode=None) != self.h()

    @pytest.mark.parametrize("odd", ["0", None, UNSET, [0], {"code": 0}])
    def test_non_number_exit_code_is_null(self, odd: Any) -> None:
        assert self.h(exitCode=odd) == self.h(exitCode=None)

    def test_float_exit_code_is_a_number(self) -> None:
        assert self.h(exitCode=1.5) != self.h(exitCode=None)

    def test_timed_out_true_matters(self) -> None:
        assert self.h(timedOut=True) != self.h()

    @pytest.mark.parametrize("odd", [1, "true", "True", None, UNSET, [True]])
    def test_only_true_counts_as_timed_out(self, odd: Any) -> None:
        assert self.h(timedOut=odd) == self.h(timedOut=False)

    def test_aggregated_matters(self) -> None:
        assert self.h(aggregated="other output") != self.h()

    def test_text_ignored_when_aggregated_present(self) -> None:
        assert self.h("text a") == self.h("text b")

    @pytest.mark.parametrize("blank", ["", "   ", "\n\t", None, UNSET, 5])
    def test_blank_aggregated_falls_back_to_text(self, blank: Any) -> None:
        assert self.h("hello", aggregated=blank) == self.h("other", aggregated="hello")
        assert self.h("hello", aggregated=blank) != self.h("bye", aggregated=blank)

    @pytest.mark.parametrize("key", EXEC_VOLATILE)
    def test_volatile_fields_ignored(self, key: str) -> None:
        assert self.h(**{key: 1}) == self.h(**{key: 2}) == self.h()

    def test_tail_ignored(self) -> None:
        assert self.h(tail="a") == self.h(tail="b")


class TestExecApproval:
    base: dict[str, Any] = {  # noqa: RUF012
        "status": "approval-pending",
        "reason": "needs approval",
        "host": "gateway",
        "command": "rm -rf build",
        "warningText": "destructive",
    }

    def h(self, text: str = "", **changes: Any) -> int:
        return rh("exec", result=exec_result(text, **{**self.base, **changes}))

    @pytest.mark.parametrize("key", ["reason", "host", "command", "warningText"])
    def test_listed_fields_matter(self, key: str) -> None:
        assert self.h(**{key: "changed"}) != self.h()

    def test_status_variants(self) -> None:
        unavailable = self.h(status="approval-unavailable")
        assert unavailable != self.h()
        assert self.h(status="approval-unavailable", pid=1) == unavailable

    @pytest.mark.parametrize("key", [*EXEC_VOLATILE, "approvalId", "expiresAt"])
    def test_other_fields_ignored(self, key: str) -> None:
        assert self.h(**{key: 1}) == self.h(**{key: 2}) == self.h()

    def test_text_ignored(self) -> None:
        assert self.h("text a") == self.h("text b")


@pytest.mark.parametrize("status", ["queued", "Running", "COMPLETED", "unknown", ""])
def test_unknown_exec_status_falls_through_to_generic(status: str) -> None:
    def h(text: str, **details: Any) -> int:
        return rh("exec", result=exec_result(text, status=status, **details))

    assert h("out", pid=1) != h("out", pid=2)
    assert h("out a", pid=1) != h("out b", pid=1)
    assert h("out", pid=1) == h("out", pid=1)


@pytest.mark.parametrize("status", [None, 5, ["running"], UNSET])
def test_non_string_exec_status_is_generic(status: Any) -> None:
    def h(text: str, **details: Any) -> int:
        if status is not UNSET:
            details["status"] = status
        return rh("exec", result=exec_result(text, **details))

    assert h("out", tail="x", pid=1) != h("out", tail="x", pid=2)
    assert h("out a") != h("out b")


def test_exec_rules_apply_only_to_exec() -> None:
    def h(tool: str, pid: int) -> int:
        return rh(tool, result=exec_result("", status="running", tail="t", pid=pid))

    assert h("exec", 1) == h("exec", 2)
    assert h("bash", 1) != h("bash", 2)


# --- rule 4: process poll / log -----------------------------------------------------------


POLL_BASE: dict[str, Any] = {
    "status": "running",
    "exitCode": None,
    "exitSignal": None,
    "aggregated": "partial",
    "totalLines": 3,
    "totalChars": 40,
    "truncated": False,
}


def proc(action: str, text: str = "out", **changes: Any) -> int:
    args = {"action": action, "sessionId": "s1"}
    return rh("process", args, result=tr({**POLL_BASE, **changes}, text))


@pytest.mark.parametrize(
    ("key", "new"),
    [("status", "exited"), ("exitCode", 1), ("exitSignal", "SIGKILL"), ("aggregated", "more")],
)
def test_process_poll_listed_fields_matter(key: str, new: Any) -> None:
    assert proc("poll", **{key: new}) != proc("poll")


def test_process_poll_text_matters() -> None:
    assert proc("poll", "other") != proc("poll")


@pytest.mark.parametrize(
    ("key", "new"),
    [
        ("totalLines", 9),
        ("totalChars", 99),
        ("truncated", True),
        ("pid", 4),
        ("sessionId", "s2"),
        ("durationMs", 5),
        ("tail", "x"),
    ],
)
def test_process_poll_other_fields_ignored(key: str, new: Any) -> None:
    assert proc("poll", **{key: new}) == proc("poll")


@pytest.mark.parametrize(
    ("key", "new"),
    [
        ("status", "exited"),
        ("totalLines", 9),
        ("totalChars", 99),
        ("truncated", True),
        ("exitCode", 1),
        ("exitSignal", "SIGTERM"),
    ],
)
def test_process_log_listed_fields_matter(key: str, new: Any) -> None:
    assert proc("log", **{key: new}) != proc("log")


def test_process_log_text_matters() -> None:
    assert proc("log", "other") != proc("log")


@pytest.mark.parametrize(
    ("key", "new"),
    [("aggregated", "more"), ("pid", 4), ("sessionId", "s2"), ("durationMs", 5), ("tail", "x")],
)
def test_process_log_other_fields_ignored(key: str, new: Any) -> None:
    assert proc("log", **{key: new}) == proc("log")


def test_process_action_is_part_of_the_hash() -> None:
    assert proc("poll") != proc("log")


@pytest.mark.parametrize("args", [{"action": "list"}, {"action": "kill"}, {}, None, "poll"])
def test_other_process_actions_hash_in_full(args: Any) -> None:
    def h(text: str, **changes: Any) -> int:
        result = tr({**POLL_BASE, **changes}, text)
        return rh("process", args if args is not None else {}, result=result)

    assert h("out", pid=1) != h("out", pid=2)
    assert h("out", totalLines=1) != h("out", totalLines=2)
    assert h("out a") != h("out b")


# --- rule 4: outbound sends -----------------------------------------------------------------


def send_hash(
    details: Any, text: str = "sent", tool: str = "sessions_send", args: Any = None, **kw: Any
) -> int:
    return rh(tool, args, result=tr(details, text), **kw)


@pytest.mark.parametrize("key", SEND_VOLATILE)
def test_volatile_keys_removed_at_top(key: str) -> None:
    base = {"status": "delivered"}
    assert send_hash({**base, key: "v1"}) == send_hash({**base, key: "v2"}) == send_hash(base)


@pytest.mark.parametrize("key", SEND_VOLATILE)
def test_volatile_keys_removed_when_nested(key: str) -> None:
    def nested(value: Any) -> dict[str, Any]:
        return {
            "status": "delivered",
            "delivery": {"channel": "slack", key: value},
            "parts": [{"n": 1, key: value}, [{"n": 2, key: value}]],
        }

    assert send_hash(nested("v1")) == send_hash(nested(["v2", "v3"]))


def test_non_volatile_detail_changes_matter() -> None:
    base = {"status": "delivered", "delivery": {"channel": "slack"}, "parts": [{"n": 1}]}
    assert send_hash(base) != send_hash({**base, "status": "failed"})
    assert send_hash(base) != send_hash({**base, "delivery": {"channel": "email"}})
    assert send_hash(base) != send_hash({**base, "parts": [{"n": 2}]})


def test_send_text_is_ignored() -> None:
    assert send_hash({"status": "ok"}, "Sent message 123") == send_hash({"status": "ok"}, "other")


def test_send_non_mapping_details_count_as_empty() -> None:
    assert send_hash("weird") == send_hash({})


MESSAGE_OBJECT = {"id": "m1", "text": "hello"}


@pytest.mark.parametrize(
    "marker",
    [
        {"direction": "outbound"},
        {"senderId": "u1"},
        {"accountId": "a1"},
        {"conversation": {"id": "c1"}},
    ],
)
def test_message_object_id_removed(marker: dict[str, Any]) -> None:
    def h(msg_id: str) -> int:
        msg = {**MESSAGE_OBJECT, **marker, "id": msg_id}
        return send_hash({"status": "ok", "message": msg, "history": [msg]})

    assert h("m1") == h("m2")


@pytest.mark.parametrize(
    "not_a_message",
    [
        {"id": "m1", "text": "hello"},
        {"id": 5, "text": "hello", "direction": "outbound"},
        {"id": "m1", "text": 5, "direction": "outbound"},
        {"id": "m1", "text": "hello", "direction": 5},
        {"id": "m1", "text": "hello", "senderId": None},
        {"id": "m1", "text": "hello", "accountId": 7},
        {"id": "m1", "text": "hello", "conversation": "c1"},
        {"id": "m1", "direction": "outbound"},
    ],
)
def test_id_kept_on_non_message_objects(not_a_message: dict[str, Any]) -> None:
    other_id = "m2" if isinstance(not_a_message["id"], str) else 6
    changed = {**not_a_message, "id": other_id}
    assert send_hash({"message": not_a_message}) != send_hash({"message": changed})


def test_route_and_conversation_ids_kept() -> None:
    def h(route_id: str, conversation_id: str, msg_id: str) -> int:
        msg = {
            "id": msg_id,
            "text": "hi",
            "direction": "outbound",
            "conversation": {"id": conversation_id},
        }
        return send_hash({"route": {"id": route_id, "channel": "slack"}, "message": msg})

    assert h("r1", "c1", "m1") == h("r1", "c1", "m2")
    assert h("r1", "c1", "m1") != h("r2", "c1", "m1")
    assert h("r1", "c1", "m1") != h("r1", "c2", "m1")


def test_message_object_other_fields_matter() -> None:
    def h(text: str) -> int:
        return send_hash({"message": {"id": "m1", "text": text, "direction": "outbound"}})

    assert h("hello") != h("bye")


@pytest.mark.parametrize("action", MESSAGE_SEND_ACTIONS)
def test_message_send_actions(action: str) -> None:
    args = {"action": action, "to": "#general"}

    def h(details: Any, text: str = "sent") -> int:
        return send_hash(details, text, tool="message", args=args)

    assert h({"ok": True, "messageId": "1", "ts": 1}) == h({"ok": True, "messageId": "2", "ts": 2})
    assert h({"ok": True}, "a") == h({"ok": True}, "b")
    assert h({"ok": True}) != h({"ok": False})


@pytest.mark.parametrize(
    "args", [{"action": "read"}, {"action": "react"}, {"action": "SEND"}, {}, None]
)
def test_message_non_send_action_hashes_in_full(args: Any) -> None:
    def h(details: Any, text: str = "done") -> int:
        return send_hash(details, text, tool="message", args=args)

    assert h({"ok": True, "messageId": "1"}) != h({"ok": True, "messageId": "2"})
    assert h({"ok": True}, "a") != h({"ok": True}, "b")


def test_host_declared_send_tool() -> None:
    def h(message_id: str, **kw: Any) -> int:
        return send_hash({"ok": True, "messageId": message_id}, tool="notify", **kw)

    assert h("1", send_tools=("notify",)) == h("2", send_tools=("notify",))
    assert h("1", send_tools=["notify"]) == h("2", send_tools=["notify"])
    assert h("1") != h("2")
    assert h("1", send_tools=("other",)) != h("2", send_tools=("other",))


def test_send_tools_do_not_affect_other_tools() -> None:
    details = {"ok": True, "messageId": "1"}
    assert rh("read", result=tr(details, "x"), send_tools=("notify",)) == rh(
        "read", result=tr(details, "x")
    )


# --- rule 4: update_plan ------------------------------------------------------------------


def plan_details(*entries: Any, explanation: Any = "why") -> dict[str, Any]:
    return {"plan": list(entries), "explanation": explanation}


PLAN = plan_details(
    {"step": "read", "status": "completed"}, {"step": "write", "status": "in_progress"}
)


def plan_hash(details: Any, text: str = "Plan updated") -> int:
    return rh("update_plan", PLAN, result=tr(details, text))


def test_update_plan_result_text_ignored() -> None:
    assert plan_hash(PLAN, "Plan updated") == plan_hash(PLAN, "Plan updated (2)")


def test_update_plan_result_rewording_ignored() -> None:
    reworded = plan_details(
        {"step": "open", "status": "completed"},
        {"step": "patch", "status": "in_progress"},
        explanation="another reason",
    )
    assert plan_hash(reworded) == plan_hash(PLAN)


def test_update_plan_result_shape_changes_matter() -> None:
    status_changed = plan_details(
        {"step": "read", "status": "completed"}, {"step": "write", "status": "completed"}
    )
    grown = plan_details(*PLAN["plan"], {"step": "test", "status": "pending"})
    blank_step = plan_details({"step": " ", "status": "completed"}, PLAN["plan"][1])
    no_explanation = plan_details(*PLAN["plan"], explanation="")
    for changed in (status_changed, grown, blank_step, no_explanation):
        assert plan_hash(changed) != plan_hash(PLAN)


def test_update_plan_result_non_mapping_details_is_empty_plan() -> None:
    assert plan_hash("text") == plan_hash({})
    assert plan_hash({"plan": "nope"}) == plan_hash({})
    assert plan_hash({"plan": ["x"]}) == plan_hash({"plan": [{}]})
    assert plan_hash({"plan": ["x"]}) != plan_hash({})


# --- rule 4: generic ----------------------------------------------------------------------


def test_generic_hashes_details_and_text() -> None:
    base = rh("read", result=tr({"path": "/a", "size": 1}, "contents"))
    assert rh("read", result=tr({"size": 1, "path": "/a"}, "contents")) == base
    assert rh("read", result=tr({"path": "/a", "size": 2}, "contents")) != base
    assert rh("read", result=tr({"path": "/a", "size": 1}, "other")) != base
    # Volatile send keys are only stripped for send tools.
    assert rh("read", result=tr({"path": "/a", "size": 1, "ts": 1}, "contents")) != base


def test_generic_details_and_text_are_not_confused() -> None:
    assert rh("read", result=tr({}, "x")) != rh("read", result=tr({"x": ""}))
    assert rh("read", result=tr("x")) != rh("read", result=tr({}, "x"))


# --- host normalisers ----------------------------------------------------------------------


class Recorder:
    def __init__(self, returns: Callable[[Any, Any], Any]) -> None:
        self.calls: list[tuple[Any, Any]] = []
        self._returns = returns

    def __call__(self, args: Any, result: Any) -> Any:
        self.calls.append((args, result))
        return self._returns(args, result)


def test_normaliser_receives_args_and_result() -> None:
    norm = Recorder(lambda a, r: "x")
    args = {"q": 1}
    result = tr({"k": 1}, "t")
    hash_outcome("search", args, result=result, normalizers={"search": norm})
    assert len(norm.calls) == 1
    assert norm.calls[0][0] is args or norm.calls[0][0] == args
    assert norm.calls[0][1] is result or norm.calls[0][1] == result


def test_normaliser_value_is_what_gets_hashed() -> None:
    norm = {"search": lambda a, r: r["details"]["hits"]}

    def h(hits: Any, took: int, text: str) -> int:
        result = tr({"hits": hits, "tookMs": took}, text)
        return rh("search", result=result, normalizers=norm)

    assert h([1, 2], 5, "a") == h([1, 2], 9, "b")
    assert h([1, 2], 5, "a") != h([1, 3], 5, "a")


def test_normaliser_replaces_builtin_rules() -> None:
    constant = {"exec": lambda a, r: "same"}
    running = exec_result("", status="running", tail="a")
    done = exec_result("", status="completed", exitCode=1, aggregated="b")
    assert rh("exec", result=running, normalizers=constant) == rh(
        "exec", result=done, normalizers=constant
    )
    assert rh("exec", result=running) != rh("exec", result=done)

    sends = {"sessions_send": lambda a, r: r["details"]}
    with_id = tr({"ok": True, "messageId": "1"})
    other_id = tr({"ok": True, "messageId": "2"})
    assert rh("sessions_send", result=with_id) == rh("sessions_send", result=other_id)
    assert rh("sessions_send", result=with_id, normalizers=sends) != rh(
        "sessions_send", result=other_id, normalizers=sends
    )


def test_normaliser_applies_to_plain_results() -> None:
    norm = Recorder(lambda a, r: "const")
    assert rh("calc", result=41, normalizers={"calc": norm}) == rh(
        "calc", result=42, normalizers={"calc": norm}
    )
    rh("calc", result=None, normalizers={"calc": norm})
    assert [r for _, r in norm.calls] == [41, 42, None]


def test_normaliser_only_for_its_tool() -> None:
    norm = Recorder(lambda a, r: "const")
    assert rh("other", result=1, normalizers={"calc": norm}) != rh(
        "other", result=2, normalizers={"calc": norm}
    )
    assert norm.calls == []


def test_veto_checked_before_normaliser() -> None:
    norm = Recorder(lambda a, r: "const")
    assert hash_outcome("exec", {}, result=tr(VETO, "x"), normalizers={"exec": norm}) == (
        None,
        None,
    )
    assert norm.calls == []


def test_errors_never_reach_normaliser() -> None:
    norm = Recorder(lambda a, r: "const")
    kw: dict[str, Any] = {"normalizers": {"tool": norm}}
    assert hash_outcome("tool", {}, error="boom", **kw) == err("boom")
    assert hash_outcome("tool", {}, error="unknown tool: Zap", **kw) == err("unknown tool: Zap")
    assert err("unknown tool: Zap")[1] == "zap"
    assert hash_outcome("tool", {}, result="ok", error="boom", **kw) == err("boom")
    assert hash_outcome("tool", {}, **kw) == (None, None)
    assert norm.calls == []


SECRET_ARG = "arg-s3cret-7731"
SECRET_RESULT = "result-s3cret-9904"


def _exploding(args: Any, result: Any) -> Any:
    raise RuntimeError("normaliser exploded")


def test_raising_normaliser_falls_back_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    args = {"token": SECRET_ARG}
    result = tr({"secret": SECRET_RESULT}, SECRET_RESULT)
    expected = hash_outcome("fetch_secret", args, result=result)
    with caplog.at_level(logging.WARNING, logger="loopcore"):
        got = hash_outcome(
            "fetch_secret", args, result=result, normalizers={"fetch_secret": _exploding}
        )
    assert got == expected
    warnings = [
        r for r in caplog.records if r.name.startswith("loopcore") and r.levelno == logging.WARNING
    ]
    assert warnings
    assert any("fetch_secret" in r.getMessage() for r in warnings)
    assert SECRET_ARG not in caplog.text
    assert SECRET_RESULT not in caplog.text
    for record in warnings:
        assert SECRET_ARG not in record.getMessage()
        assert SECRET_RESULT not in record.getMessage()


def test_raising_normaliser_on_plain_result_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="loopcore"):
        got = rh("calc", result=SECRET_RESULT, normalizers={"calc": _exploding})
    assert got == rh("calc", result=SECRET_RESULT)
    assert any(r.levelno == logging.WARNING for r in caplog.records)
    assert SECRET_RESULT not in caplog.text


def test_raising_normaliser_still_vetoes() -> None:
    assert hash_outcome("exec", {}, result=tr(VETO), normalizers={"exec": _exploding}) == (
        None,
        None,
    )


# --- robustness -----------------------------------------------------------------------------


def _cyclic_details() -> dict[str, Any]:
    details: dict[str, Any] = {"status": "completed"}
    details["self"] = details
    return details


def _deep_details(depth: int = 50_000) -> dict[str, Any]:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"messageId": 1, "k": [value]}
    return {"status": "sent", "deep": value}


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read", {}),
        ("exec", {}),
        ("process", {"action": "poll"}),
        ("process", {"action": "log"}),
        ("sessions_send", {}),
        ("message", {"action": "send"}),
        ("update_plan", {}),
    ],
)
@pytest.mark.parametrize("make", [_cyclic_details, _deep_details])
def test_hostile_details_never_raise(
    tool: str, args: dict[str, Any], make: Callable[[], dict[str, Any]]
) -> None:
    result = tr(make(), "\ud800 text")
    result_hash, unknown = hash_outcome(tool, args, result=result)
    assert type(result_hash) is int
    assert unknown is None

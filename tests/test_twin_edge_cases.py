"""Where could the compiled history store part from the Python twin? Edge cases, both twins.

str subclasses as names, the args-hash memo under re-entrant finalisers and
mutation during hashing, key objects the store must not keep alive, the LRU
order of a rejected call, and a result dict holding UNSET. Every test runs once
per twin (the autouse ``twin`` fixture of conftest.py); the ones that could
crash or hang the interpreter run their scenario in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import weakref

import pytest

from loopcore import UNSET, LoopDetector, ToolLoopGuard

ON = {"enabled": True}


class Name(str):
    """A str subclass: a valid tool name / tool call id (isinstance(x, str))."""


class Session:
    """A hashable session value recreated per request (equal, not identical)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Session) and other.n == self.n

    def __hash__(self) -> int:
        return hash(self.n)


def run_scenario(twin: str, body: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """Run ``body`` with ``make()`` building a LoopDetector on the twin's store."""
    prelude = textwrap.dedent(
        f"""
        import sys
        from unittest import mock
        import importlib
        from loopcore import LoopDetector
        from loopcore._twins import use_twin
        def make(config={{"enabled": True}}, **kwargs):
            with use_twin({twin!r}):
                return LoopDetector(config, **kwargs)
        """
    )
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(body)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# -- 1. str subclasses are str: tool names and call ids ------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda d: d.check(Name("read"), {"p": 1}),
        lambda d: d.record_call(Name("read"), {"p": 1}),
        lambda d: d.record_call("read", {"p": 1}, Name("call-1")),
        lambda d: d.record_outcome(Name("read"), {"p": 1}, result="ok"),
        lambda d: d.record_outcome("read", {"p": 1}, result="ok", tool_call_id=Name("call-1")),
    ],
    ids=["check-tool", "record_call-tool", "record_call-id", "outcome-tool", "outcome-id"],
)
def test_str_subclass_tool_name_and_call_id_are_accepted(call: object) -> None:
    detector = LoopDetector(ON)
    call(detector)  # type: ignore[operator]
    for record in detector.history():
        assert record.tool_name == "read"


def test_str_subclass_names_through_the_gateway() -> None:
    guard = ToolLoopGuard(ON)
    decision = guard.before_call(Name("read"), {"p": 1}, tool_call_id=Name("c1"))
    assert not decision.blocked
    shown = guard.after_call(Name("read"), {"p": 1}, result="ok", tool_call_id=Name("c1"))
    assert shown == "ok"  # the result the model sees (no warning: unchanged)
    (record,) = guard.detector.history()
    assert record.tool_call_id == "c1"
    assert type(record.tool_call_id) is str
    assert record.result_hash is not None


# -- 2. the args memo: re-entrant release -------------------------------------------------


def test_args_memo_release_is_not_reentrant_double_decref(twin: str) -> None:
    # The memo owns the last args dict; a mutated dict can hold anything, and
    # releasing it can run a finaliser that uses the store (or lets another
    # thread run). The memo must not release its references twice.
    proc = run_scenario(
        twin,
        """
        detector = make()
        key = "".join(["memo", "-key"])
        class Finalised:
            def __del__(self):
                detector.record_call("t", {"inner": 1})
        args = {key: 1.5}
        detector.record_call("t", args)
        args[key] = Finalised()
        del args
        detector.record_call("t", {"other": 2})
        # Held by ``key`` and getrefcount's argument only: the memo let go of
        # the dict and of its own reference, once each.
        assert sys.getrefcount(key) == 2, sys.getrefcount(key)
        del detector
        import gc; gc.collect()
        print("clean exit")
        """,
    )
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr)
    assert "clean exit" in proc.stdout


# -- 3. the args memo: stale hash when hashing runs Python code ------------------------------


def test_args_memo_not_stale_after_mutation_during_hashing() -> None:
    detector = LoopDetector(ON)
    args: dict[str, object] = {"b": 1}

    class Rewrites:
        def __repr__(self) -> str:
            args["a"] = 2  # the dict is all-scalar once hashing is over
            return "rewrites"

    args["a"] = Rewrites()
    detector.record_call("t", args)
    record = detector.record_outcome("t", args, result="x")
    reference = LoopDetector(ON)
    reference.record_call("t", {"a": 2, "b": 1})
    # after_call hashes the dict as it is now: a new call, not the pending one.
    assert record is not None
    assert record.args_hash == reference.history()[0].args_hash
    assert [r.result_hash is None for r in detector.history()] == [True, False]


# -- 4. found_key keeps the caller's key (and session) alive --------------------------------


def test_equal_session_object_is_not_kept_alive_by_the_store() -> None:
    detector = LoopDetector(ON)
    first = Session(1)
    detector.record_call("t", {}, session=first)
    second = Session(1)
    ref = weakref.ref(second)
    detector.record_call("t", {}, session=second)
    del second
    assert ref() is None


def test_session_finaliser_using_the_store_does_not_hang(twin: str) -> None:
    try:
        proc = run_scenario(
            twin,
            """
            detector = make()
            class Session:
                def __init__(self, n): self.n = n
                def __eq__(self, other):
                    return isinstance(other, Session) and other.n == self.n
                def __hash__(self): return hash(self.n)
                def __del__(self): detector.history(session="other")
            detector.record_call("t", {}, session=Session(1))
            detector.record_call("t", {}, session=Session(1))  # equal, not identical
            detector.record_call("t", {}, session="x")
            detector.record_call("t", {}, session="x")  # the lookup replaces found_key
            print("done")
            """,
            timeout=15,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("hung: a session finaliser ran while the store lock was held")
    assert proc.returncode == 0, proc.stderr
    assert "done" in proc.stdout


# -- 5. LRU order when a call is rejected --------------------------------------------------


def test_rejected_tool_call_id_does_not_touch_the_scope() -> None:
    guard = ToolLoopGuard(ON, max_scopes=2)
    guard.before_call("read", {"p": 1}, session="a")
    guard.before_call("read", {"p": 1}, session="b")
    with pytest.raises(TypeError, match="tool_call_id"):
        guard.before_call("read", {"p": 1}, session="a", tool_call_id=5)  # type: ignore[arg-type]
    guard.before_call("read", {"p": 1}, session="c")  # evicts the least recently used
    lengths = [len(guard.detector.history(session=s)) for s in "abc"]
    assert lengths == [0, 1, 1]


# -- 6. a tool-result mapping whose content value is UNSET ----------------------------------


def test_content_key_holding_unset_is_still_a_tool_result() -> None:
    detector = LoopDetector(ON)
    record = detector.record_outcome("t", {}, result={"content": UNSET})
    same = detector.record_outcome("t", {"x": 1}, result={"content": []})
    assert record is not None
    assert same is not None
    # both are tool results with no details and no text: ("result", {}, "")
    assert record.result_hash == same.result_hash


def test_an_args_dict_changed_in_place_is_hashed_again() -> None:
    # The per-call memo remembers the last flat args dict hashed; changing that very
    # dict between calls (a value, a new key, a key removed) must give the new hash.
    from loopcore import hash_call

    det = LoopDetector({"enabled": True})
    guard = ToolLoopGuard({"enabled": True})
    args = {"path": "a", "limit": 10}
    det.check("read", args)
    guard.before_call("read", args, tool_call_id="c0")
    shapes = []
    for n, change in enumerate(("value", "add", "remove", "same value again"), 1):
        if change == "value":
            args["path"] = "b"
        elif change == "add":
            args["offset"] = 3
        elif change == "remove":
            del args["limit"]
        else:
            args["path"] = "b"
        shapes.append(dict(args))
        det.record_call("read", args)
        guard.after_call("read", args, result="text", tool_call_id=f"c{n}")
    expected = [hash_call("read", shape) for shape in shapes]
    assert [r.args_hash for r in det.history()] == expected
    guarded = [r.args_hash for r in guard.detector.history()]
    assert guarded[-4:] == expected
    assert len(set(expected)) == 3  # the last change left the args as they were

"""What a failure inside the per-call path's hashing does: the same in both twins.

The compiled twin reaches its outcome fast path and the args memo's hash
without a try statement: an ``Exception`` there hands the result to the
reference rules, anything else (``KeyboardInterrupt``) propagates, and a hash
that fails leaves no memo behind.
"""

from __future__ import annotations

from typing import Any

import pytest

from loopcore import LoopDetector, ToolLoopGuard, hash_call

from .conftest import TWINS, use_twin


class Colliding:
    """A key hashing like ``"content"`` whose ``==`` raises ``error`` (``times`` times)."""

    def __init__(self, error: type[BaseException], times: int) -> None:
        self.error = error
        self.times = times

    def __hash__(self) -> int:
        return hash("content")

    def __eq__(self, other: object) -> bool:
        if self.times:
            self.times -= 1
            raise self.error("compared")
        return False


def outcome(detector: LoopDetector, result: Any) -> tuple[str, Any]:
    try:
        record = detector.record_outcome("read", {"path": "a"}, result=result, run_id="r")
    except BaseException as exc:  # the kind is what is compared
        return ("raised", type(exc).__name__)
    return ("record", None if record is None else record.result_hash)


@pytest.mark.parametrize(("error", "times"), [(ValueError, 99), (KeyboardInterrupt, 1)])
def test_a_result_key_that_raises_on_compare_acts_as_in_the_reference(
    error: type[BaseException], times: int
) -> None:
    # Raised once, a KeyboardInterrupt must come out of the first reading of
    # the result: a fast path that swallowed it would hand the result to the
    # reference rules, which would then read it without a failure.
    results = []
    for twin in TWINS:
        with use_twin(twin):
            detector = LoopDetector({"enabled": True})
        results.append(outcome(detector, {Colliding(error, times): 1, "details": {}}))
    assert len(set(results)) == 1, results
    if error is KeyboardInterrupt:
        assert results[0] == ("raised", "KeyboardInterrupt")


@pytest.mark.skipif("cython" not in TWINS, reason="the compiled twin is not built")
def test_a_failed_call_hash_leaves_no_memo_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    # update_plan's args are hashed by the reference, after the compiled twin
    # has taken the flat dict's entries for its memo: a memo kept from the
    # failed hash would answer the next call with a wrong hash.
    from loopcore import _percall_c

    with use_twin("cython"):
        guard = ToolLoopGuard({"enabled": True})
    args = {"plan": "one step"}

    def failing(tool_name: str, value: Any) -> int:
        raise RuntimeError("hash failed")

    monkeypatch.setattr(_percall_c, "_py_hash_call", failing)
    with pytest.raises(RuntimeError, match="hash failed"):
        guard.before_call("update_plan", args, run_id="r")
    monkeypatch.undo()
    assert guard.detector.history(run_id="r") == []
    guard.before_call("update_plan", args, run_id="r")
    (record,) = guard.detector.history(run_id="r")
    assert record.args_hash == hash_call("update_plan", args)


class FailingStore:
    """A store whose scan raises ``error``."""

    history_size = 30
    evicted = 0

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __len__(self) -> int:
        return 0

    def scan_append(self, *args: Any) -> Any:
        raise self.error

    def append(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize("twin_name", TWINS)
def test_a_failing_scan_blocks_but_an_interrupt_goes_through(twin_name: str) -> None:
    # SPEC §8.2: an Exception from the check blocks the call; a KeyboardInterrupt
    # is the host's and is not turned into a decision.
    with use_twin(twin_name):
        guard = ToolLoopGuard({"enabled": True}, store=FailingStore(RuntimeError("down")))
        interrupted = ToolLoopGuard({"enabled": True}, store=FailingStore(KeyboardInterrupt()))
    assert guard.before_call("read", {"p": 1}).blocked
    with pytest.raises(KeyboardInterrupt):
        interrupted.before_call("read", {"p": 1})

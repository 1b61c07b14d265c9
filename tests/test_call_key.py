"""Which scope does a guard call land in when the last key made is reused?

``before_call`` / ``after_call`` reuse the scope key they made last while the
caller passes the same objects (the common gateway call leaves ``session`` out).
These tests hold that reuse to SPEC §9.2: a keyword left out is the active
``scope()``'s once one was entered, a given one (None too) wins, and the reuse
never carries a key across run ids or sessions. Both twins (``twin`` fixture).
"""

from __future__ import annotations

import pytest

from loopcore import ToolLoopGuard, hash_call

pytestmark = pytest.mark.usefixtures("twin")

ON = {"enabled": True}


def hashes(guard: ToolLoopGuard, **scope: object) -> list[int]:
    return [r.args_hash for r in guard.detector.history(**scope)]  # type: ignore[arg-type]


def test_left_out_and_given_none_session_share_the_scope_until_a_scope_is_entered() -> None:
    guard = ToolLoopGuard(ON)
    guard.before_call("read", {"n": 1}, run_id="r")
    guard.before_call("read", {"n": 2}, session=None, run_id="r")
    guard.after_call("read", {"n": 2}, result="two", run_id="r")
    guard.before_call("read", {"n": 3}, run_id="other")
    guard.before_call("read", {"n": 4}, run_id="r")
    with guard.scope(session="s", run_id="r"):
        # Left out now means the active scope's session, though the last key made was (None, "r").
        guard.before_call("read", {"n": 5}, run_id="r")
        guard.before_call("read", {"n": 6}, session=None, run_id="r")
        guard.before_call("read", {"n": 7})
    guard.before_call("read", {"n": 8}, run_id="r")
    assert hashes(guard, run_id="r") == [hash_call("read", {"n": n}) for n in (1, 2, 4, 6, 8)]
    assert hashes(guard, run_id="other") == [hash_call("read", {"n": 3})]
    assert hashes(guard, session="s", run_id="r") == [
        hash_call("read", {"n": 5}),
        hash_call("read", {"n": 7}),
    ]
    assert guard.detector.history(run_id="r")[1].result_hash is not None


def test_a_new_run_id_or_session_never_reuses_the_last_key() -> None:
    guard = ToolLoopGuard(ON)
    for run_id in ("a", "b", "a", None, "a"):
        guard.before_call("read", {"run": run_id}, run_id=run_id)
    guard.before_call("read", {"run": "s"}, session="s", run_id="a")
    guard.before_call("read", {"run": 7}, session=7, run_id="a")
    assert len(hashes(guard, run_id="a")) == 3
    assert hashes(guard, run_id="b") == [hash_call("read", {"run": "b"})]
    assert hashes(guard) == [hash_call("read", {"run": None})]
    assert hashes(guard, session="s", run_id="a") == [hash_call("read", {"run": "s"})]
    assert hashes(guard, session=7, run_id="a") == [hash_call("read", {"run": 7})]

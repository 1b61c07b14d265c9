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

from .conftest import TWINS

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


def test_the_detector_reuses_a_key_only_for_the_very_same_objects() -> None:
    from loopcore import LoopDetector

    detector = LoopDetector(ON)
    run = "".join(["r", "1"])  # equal to "r1", another object
    calls = [
        (None, "r1", "/a"),
        (None, run, "/b"),
        ("s", "r1", "/c"),
        (7, "r1", "/d"),
        (7, None, "/e"),
        (None, None, "/f"),
        (None, "r1", "/g"),
    ]
    for session, run_id, path in calls:
        args = {"path": path}
        detector.check("read", args, session=session, run_id=run_id)
        detector.record_call("read", args, session=session, run_id=run_id)
        record = detector.record_outcome("read", args, result="ok", session=session, run_id=run_id)
        assert record is not None
        assert (record.session, record.run_id) == (session, run_id)

    def paths(*wanted: str) -> list[int]:
        return [hash_call("read", {"path": p}) for p in wanted]

    def held(**scope: object) -> list[int]:
        return [r.args_hash for r in detector.history(**scope)]  # type: ignore[arg-type]

    assert held(run_id="r1") == paths("/a", "/b", "/g")
    assert held(session="s", run_id="r1") == paths("/c")
    assert held(session=7, run_id="r1") == paths("/d")
    assert held(session=7) == paths("/e")
    assert held() == paths("/f")


def test_alarmed_verdicts_stay_right_while_tool_names_are_forgotten() -> None:
    # A small history forgets tool names as other tools push them out (the
    # compiled ring's name generation moves on, its verdict cache is dropped):
    # every verdict, quiet or alarmed, is the one of a detector that only
    # ever saw this one scope's calls in order.
    from loopcore import LoopDetector
    from loopcore._twins import use_twin

    config = {"enabled": True, "historySize": 6, "warningThreshold": 2, "criticalThreshold": 4}
    calls = [(f"tool{(i // 5) % 4}", {"n": i % 2}) for i in range(60)]

    def verdicts(twin: str) -> list[tuple[object, ...]]:
        with use_twin(twin):
            detector = LoopDetector(config)
        found: list[tuple[object, ...]] = []
        for tool, args in calls:
            v = detector.check(tool, args, run_id="r")
            found.append((v.stuck, v.level, v.detector, v.count, v.message, v.warning_key))
            detector.record_call(tool, args, run_id="r")
            detector.record_outcome(tool, args, result="same", run_id="r")
        return found

    expected = verdicts("python")
    assert any(v[0] for v in expected)
    assert not all(v[0] for v in expected)
    for twin in TWINS:
        assert verdicts(twin) == expected, twin

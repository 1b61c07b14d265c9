"""Does host code that calls back into the guard complete instead of deadlocking? (SPEC §11)

Each scenario runs in a subprocess with a timeout, since a deadlock would hang
the suite: the garbage collector running ``weakref.finalize`` callbacks of
sessions held in reference cycles (``gc.set_threshold(1)``: a collection on
almost every allocation, inside loopcore's steps too), the finaliser of a
session key that LRU eviction releases, and a session whose own ``__eq__`` /
``__hash__`` call the guard. Each deadlocked before loopcore kept host code out
of its locks.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from .conftest import TWINS

PRELUDE = """
import gc, sys, weakref
from loopcore import ToolLoopGuard
from loopcore._twins import use_twin
with use_twin({twin!r}):
    guard = ToolLoopGuard({{"enabled": True, "warningThreshold": 3}}, max_scopes={max_scopes})
"""


def run(twin: str, body: str, max_scopes: int = 100_000) -> subprocess.CompletedProcess[str]:
    code = PRELUDE.format(twin=twin, max_scopes=max_scopes) + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("twin", TWINS)
def test_finalisers_run_by_the_collector_may_end_sessions(twin: str) -> None:
    done = run(
        twin,
        """
        class Session:
            def __init__(self, sid):
                self.sid = sid
                self.me = self  # a reference cycle: only the collector frees it
        ended = []
        def end(sid):
            guard.end_session(sid)
            ended.append(sid)
        gc.set_threshold(1)
        for n in range(2000):
            sid = f"s{n}"
            weakref.finalize(Session(sid), end, sid)
            for i in range(3):
                guard.before_call("read", {"n": i}, session=sid, run_id="r")
                guard.after_call("read", {"n": i}, result=i, session=sid, run_id="r")
        gc.collect()
        assert len(ended) == 2000, len(ended)
        print("ok")
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


@pytest.mark.parametrize("twin", TWINS)
def test_a_session_released_by_eviction_may_call_the_guard_from_its_finaliser(
    twin: str,
) -> None:
    done = run(
        twin,
        """
        calls = []
        class Session:
            def __init__(self, n):
                self.n = n
            def __del__(self):
                # The store let go of the last reference to this session.
                calls.append(guard.before_call("probe", {"n": self.n}, session="other"))
        gc.set_threshold(1)
        for n in range(200):
            guard.before_call("read", {}, session=Session(n), run_id="r")
        gc.collect()
        assert len(calls) >= 190, len(calls)
        assert not any(d.blocked for d in calls)
        print("ok")
        """,
        max_scopes=2,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


@pytest.mark.parametrize("twin", TWINS)
def test_a_session_whose_eq_and_hash_call_the_guard_completes(twin: str) -> None:
    done = run(
        twin,
        """
        class Session:
            def __init__(self, n):
                self.n = n
            def __eq__(self, other):
                guard.before_call("probe", {"in": "eq"}, session="other")
                return isinstance(other, Session) and other.n == self.n
            def __hash__(self):
                guard.detector.history(session="other")
                return hash(self.n)
        for round in range(3):
            for n in range(5):  # equal, never identical, objects each time
                guard.before_call("read", {"n": n}, session=Session(n), run_id="r")
                guard.after_call("read", {"n": n}, result=n, session=Session(n), run_id="r")
        history = guard.detector.history(session=Session(2), run_id="r")
        assert len(history) == 3, history
        assert all(type(r.session) is Session and r.session.n == 2 for r in history)
        guard.arm_post_compaction(session=Session(2), run_id="r")
        guard.end_session(Session(2))
        assert guard.detector.history(session=Session(2), run_id="r") == []
        assert len(guard.detector.history(session=Session(3), run_id="r")) == 3
        print("ok")
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


@pytest.mark.usefixtures("twin")
def test_records_and_events_carry_the_hosts_own_session_object() -> None:
    from loopcore import LoopEvent, ToolLoopGuard

    class Session:
        def __init__(self, n: int) -> None:
            self.n = n

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Session) and other.n == self.n

        def __hash__(self) -> int:
            return hash(self.n)

    events: list[LoopEvent] = []
    guard = ToolLoopGuard({"enabled": True, "warningThreshold": 2}, on_event=events.append)
    first = Session(1)
    for _ in range(3):
        guard.before_call("read", {}, session=Session(1))
        guard.after_call("read", {}, result="same", session=Session(1))
    records = guard.detector.history(session=first)
    assert len(records) == 3
    assert all(type(r.session) is Session and r.session == first for r in records)
    assert events
    assert all(type(e.session) is Session and e.session == first for e in events)


@pytest.mark.parametrize("twin", TWINS)
def test_a_log_handler_that_calls_the_guard_completes(twin: str) -> None:
    done = run(
        twin,
        """
        import logging
        from loopcore import CompactionLoopPersisted
        seen = []
        class Calling(logging.Handler):
            def emit(self, record):
                seen.append(record.getMessage())
                guard.before_call("probe", {"n": len(seen)}, session="logs")
                guard.end_run(session="logs")  # takes the hook's own lock
        logging.getLogger("loopcore").addHandler(Calling())
        logging.getLogger("loopcore").setLevel(logging.INFO)
        guard.arm_post_compaction(run_id="r")
        try:
            for _ in range(3):
                guard.before_call("read", {}, run_id="r")
                guard.after_call("read", {}, result="same", run_id="r")
        except CompactionLoopPersisted:
            pass
        for _ in range(25):  # warnings and blocks are logged too
            guard.before_call("grep", {}, run_id="s")
            guard.after_call("grep", {}, result="same", run_id="s")
        assert any("armed" in m for m in seen) and any("aborted" in m for m in seen), seen
        print("ok")
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


@pytest.mark.parametrize("twin", TWINS)
def test_names_of_str_subclasses_never_run_their_methods_in_the_store(twin: str) -> None:
    done = run(
        twin,
        """
        calls = []
        class Id(str):
            def __del__(self):
                calls.append(guard.before_call("probe", {}, session="ids"))
        for n in range(50):  # history 30: records fall out of the ring
            guard.before_call(Id("read"), {"n": n}, tool_call_id=Id(f"call-{n}"), run_id="r")
            guard.after_call("read", {"n": n}, result=n, tool_call_id=Id(f"call-{n}"), run_id="r")
        records = guard.detector.history(run_id="r")
        assert len(records) == 30
        assert all(type(r.tool_call_id) is str and type(r.tool_name) is str for r in records)
        print("ok")
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


@pytest.mark.parametrize("twin", TWINS)
def test_finalisers_may_call_every_store_step_while_the_collector_runs_often(twin: str) -> None:
    # Vetoes, terminal failures, releases, reconciles and raw windows too: sessions in
    # reference cycles whose finalisers call back into the store (and end their scope)
    # are freed by collections that run on almost every allocation, inside these steps.
    done = run(
        twin,
        """
        from loopcore import _ring
        from loopcore._scopes import scope_key
        with use_twin(TWIN):
            store = _ring.RingStore(6, 50)
        calls = []
        class Session:
            def __init__(self, n):
                self.n = n
                self.me = self  # only the collector frees it
            def __hash__(self):
                return self.n
            def __eq__(self, other):
                return isinstance(other, Session) and other.n == self.n
            def __del__(self):
                calls.append(store.window(("other", None)))
                store.release(("other", None), ["x"])
                calls.append(store.reconcile(("other", None), "exec", 1, None))
                store.append(("other", None), "exec", 1, None, 1)
                store.drop_session("other")
        gc.set_threshold(1)
        for n in range(600):
            key = scope_key(Session(n % 40), "r")  # equal sessions share one key part
            store.append(key, "exec", n % 3, f"id-{n}")
            store.append(key, "exec", n % 3, None, 1)
            store.attach(key, "exec", n % 3, f"id-{n}", 7, None, 2, n % 2, True)
            store.append(key, "exec", 9, f"skip-{n}" + "-" * 40)
            store.release(key, [f"skip-{n}" + "-" * 40])
            store.append(key, "exec", 4, None)
            store.reconcile(key, "exec", 5, None)
            store.scan(key, "exec", n % 3, 0, 0)
            store.window(key)
            del key
        gc.collect()
        assert len(calls) > 100, len(calls)
        print("ok")
        """.replace("TWIN", repr(twin)),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")

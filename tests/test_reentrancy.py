"""Does host code that calls back into the guard complete instead of deadlocking? (SPEC §11)

Each scenario runs in a subprocess with a timeout, since a deadlock would hang
the suite: the garbage collector running ``weakref.finalize`` callbacks of
sessions held in reference cycles (``gc.set_threshold(1)``: a collection on
almost every allocation, inside loopcore's steps too), and the finaliser of a
session key that LRU eviction releases, both calling the guard. Not covered yet
(documented in the README): a session's own ``__eq__`` / ``__hash__`` calling
the guard.
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

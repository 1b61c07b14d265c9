"""A gateway calls from many threads at once: state stays consistent and bounded."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import suppress

import pytest

from loopcore import LoopDetectionConfig, ToolLoopBlocked, ToolLoopGuard

# Runs on both twins (see conftest).
pytestmark = pytest.mark.usefixtures("twin")

CONFIG = LoopDetectionConfig(
    enabled=True, history_size=12, warning_threshold=4, critical_threshold=8
)


def _run_threads(count: int, target: Callable[[int], None]) -> list[BaseException]:
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def body(index: int) -> None:
        try:
            barrier.wait()
            target(index)
        except BaseException as exc:  # collected and asserted on below
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    return errors


def test_threads_with_their_own_runs_keep_separate_bounded_histories() -> None:
    guard = ToolLoopGuard(CONFIG)

    def agent(index: int) -> None:
        for step in range(200):
            args = {"step": step % 3}
            decision = guard.before_call("read", args, run_id=f"run-{index}")
            if not decision.blocked:
                guard.after_call("read", args, result=step % 3, run_id=f"run-{index}")

    assert _run_threads(8, agent) == []
    for index in range(8):
        history = guard.detector.history(run_id=f"run-{index}")
        assert len(history) == CONFIG.history_size
        assert all(record.result_hash is not None for record in history)


def test_threads_sharing_one_scope_and_evicting_do_not_corrupt_state() -> None:
    # max_scopes=3 with 6 threads forces LRU evictions while others record.
    guard = ToolLoopGuard(CONFIG, max_scopes=3)
    wrapped_calls = [0]
    lock = threading.Lock()

    @guard.wrap(name="poll")
    def poll(job: str) -> str:
        with lock:
            wrapped_calls[0] += 1
        return "running"

    def agent(index: int) -> None:
        for step in range(300):
            session = "shared" if index % 2 else f"s{index}"
            with guard.scope(session=session, run_id=str(step % 4)), suppress(ToolLoopBlocked):
                poll("job")

    assert _run_threads(6, agent) == []
    assert wrapped_calls[0] > 0
    assert len(guard.detector._store) <= 3
    for run in range(4):
        assert len(guard.detector.history(session="shared", run_id=str(run))) <= 12


def test_threads_growing_sweeping_and_ending_runs_together() -> None:
    # Scopes come and go (slab growth, row reuse), every call has a fresh id
    # (name-table sweeps) and readers walk histories while writers record.
    guard = ToolLoopGuard(CONFIG, max_scopes=500)
    detector = guard.detector

    def agent(index: int) -> None:
        for step in range(400):
            run = f"run-{index}-{step // 10}"
            args = {"step": step % 5, "agent": index}
            guard.before_call(f"tool{step % 7}", args, tool_call_id=f"c{index}-{step}", run_id=run)
            guard.after_call(
                f"tool{step % 7}", args, result=step, tool_call_id=f"c{index}-{step}", run_id=run
            )
            records = detector.history(run_id=run)
            assert records[-1].tool_call_id == f"c{index}-{step}"
            if step % 10 == 9 and index % 2:
                guard.end_run(run_id=run)

    assert _run_threads(6, agent) == []
    assert len(detector._store) <= 500
    for step in range(0, 400, 10):
        for record in detector.history(run_id=f"run-0-{step // 10}"):
            assert record.tool_call_id is not None
            assert record.tool_call_id.startswith("c0-")


class _SlowSession:
    """A session whose hash and equality let other threads run mid-lookup."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        time.sleep(0)
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        time.sleep(0)
        return isinstance(other, _SlowSession) and other.name == self.name


def test_threads_contending_inside_the_store_lock() -> None:
    # Looking up these sessions releases the GIL while the store's lock is
    # held, so other threads really do wait for it.
    guard = ToolLoopGuard(CONFIG, max_scopes=4)
    sessions = [_SlowSession(f"s{n}") for n in range(6)]

    def agent(index: int) -> None:
        for step in range(150):
            session = sessions[(index + step) % len(sessions)]
            args = {"step": step % 4}
            decision = guard.before_call("read", args, session=session, run_id="r")
            if not decision.blocked:
                guard.after_call("read", args, result=step % 2, session=session, run_id="r")

    assert _run_threads(6, agent) == []
    assert len(guard.detector._store) <= 4
    for session in sessions:
        assert len(guard.detector.history(session=session, run_id="r")) <= CONFIG.history_size

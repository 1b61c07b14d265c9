"""``batch._workers.read_all``: the pieces read by forked workers and the parent, in order."""

from __future__ import annotations

import os
import time

import pytest

from loopcore.batch import _workers

pytestmark = pytest.mark.skipif(not _workers.AVAILABLE, reason="fork workers: Linux only")


def _double(task: int) -> tuple[int, int]:
    time.sleep(0.002)  # long enough for each process to claim some
    return task * 2, os.getpid()


def test_every_task_read_once_in_order() -> None:
    tasks = list(range(40))
    claimed: list[int] = []
    results = _workers.read_all(tasks, 3, _double, claimed.append)
    assert [value for value, _pid in results] == [t * 2 for t in tasks]
    assert claimed == sorted(claimed)  # counts claimed, never back
    assert all(1 <= count <= len(tasks) for count in claimed)
    assert os.getpid() in {pid for _value, pid in results}  # the parent read some


def test_one_task_is_read_in_the_parent() -> None:
    assert _workers.read_all([5], 4, _double) == [(10, os.getpid())]
    assert _workers.read_all([], 4, _double) == []


PARENT = os.getpid()


def _fails_in_a_worker(task: int) -> int:
    if os.getpid() != PARENT:
        raise ValueError(f"task: {task} failed")
    time.sleep(0.002)
    return task


def test_a_worker_error_is_raised_in_the_parent() -> None:
    with pytest.raises(ValueError, match=r"task: \d+ failed"):
        _workers.read_all(list(range(50)), 2, _fails_in_a_worker)


def _dies_in_a_worker(task: int) -> int:
    if os.getpid() != PARENT:
        os._exit(3)
    time.sleep(0.002)
    return task


def test_a_worker_that_dies_is_an_error() -> None:
    # The worker claims a task and dies: the parent reads the rest, then finds nothing sent.
    with pytest.raises(_workers.WorkerError, match="ended before sending"):
        _workers.read_all(list(range(50)), 2, _dies_in_a_worker)


class _Unpicklable(Exception):
    def __reduce__(self) -> str | tuple[object, ...]:
        raise TypeError("not picklable")


def _unpicklable_error(task: int) -> int:
    if os.getpid() != PARENT:
        raise _Unpicklable("odd")
    time.sleep(0.002)
    return task


def test_an_error_that_does_not_pickle_is_sent_as_text() -> None:
    with pytest.raises(_workers.WorkerError, match="_Unpicklable: odd"):
        _workers.read_all(list(range(50)), 2, _unpicklable_error)

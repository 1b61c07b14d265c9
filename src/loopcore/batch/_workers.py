"""Who does the pieces of a ``--jobs N`` replay? N - 1 forked workers and the parent itself.

The pieces are those of the input (``formats._parallel``). The scan's blocks
are counted by threads instead (``_scan.stats``): numpy lets go of the GIL.

A process pool would fork N workers and leave the parent waiting on them; here
the parent forks N - 1 workers (``os.fork``: loopcore is already imported in
them) and reads pieces too. Every process claims the next unread piece from a
counter they share, so a process slowed by the machine reads fewer pieces,
and keeps what it read; once no piece is left, each worker writes its pieces
(pickled) to a memory file of its own, made by the parent before the fork, tells
the parent their length through a pipe, and exits: the parent reads them in one
go, where a pipe would have taken them 64 KiB at a time, a switch of process
for each. The parent then has every piece, and hands them on in input order: what
is read, and so every output, does not depend on which process read what.

Only where ``fork`` is the platform's safe choice (Linux); elsewhere the
input is read by a process pool (``formats._parallel``).
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["AVAILABLE", "read_all"]

#: Is this way of reading open here?
AVAILABLE = sys.platform.startswith("linux")

#: The length header of a worker's message.
_HEADER = 8
#: What a worker sends: ("ok", [(index, piece), ...]) or ("error", exception).
_Message = tuple[str, Any]


class WorkerError(RuntimeError):
    """A worker ended without sending what it read."""


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int, pipe: bool) -> bytearray:
    data = bytearray(size)
    view = memoryview(data)
    at = 0
    while at < size:
        count = os.readv(fd, [view[at:]]) if pipe else os.preadv(fd, [view[at:]], at)
        if not count:
            raise WorkerError("a worker process ended before sending its pieces")
        at += count
    return data


def _memory_file() -> int:
    """A file in memory (a temporary file where the kernel has no ``memfd_create``)."""
    try:
        return os.memfd_create("loopcore-pieces", os.MFD_CLOEXEC)
    except OSError:
        import tempfile

        with tempfile.TemporaryFile() as stream:
            return os.dup(stream.fileno())


class _Counter:
    """The index of the next unread piece, shared by the parent and its workers."""

    def __init__(self) -> None:
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self.value = context.RawValue("q", 0)
        self.lock = context.Lock()

    def claim(self) -> int:
        with self.lock:
            index: int = self.value.value
            self.value.value = index + 1
        return index

    def claimed(self) -> int:
        return int(self.value.value)


def _claim_all(
    counter: _Counter, tasks: Sequence[Any], read: Callable[[Any], Any]
) -> list[tuple[int, Any]]:
    got: list[tuple[int, Any]] = []
    while (index := counter.claim()) < len(tasks):
        got.append((index, read(tasks[index])))
    return got


def _work(
    fd: int, file: int, counter: _Counter, tasks: Sequence[Any], read: Callable[[Any], Any]
) -> None:
    """A worker's life: read pieces until none is left, send them, exit (never returns)."""
    code = 0
    try:
        message: _Message
        try:
            message = ("ok", _claim_all(counter, tasks, read))
        except BaseException as exc:  # sent to the parent, which raises it in its turn
            message = ("error", exc)
        try:
            data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # what does not pickle is sent as its text
            failed = message[1] if message[0] == "error" else exc
            data = pickle.dumps(("error", WorkerError(f"{type(failed).__name__}: {failed}")))
        _write_all(file, data)
        _write_all(fd, len(data).to_bytes(_HEADER, "little"))
    except BaseException:
        code = 1  # the parent sees the pipe end early
    finally:
        os._exit(code)  # no atexit handlers, no flush of the parent's buffers


def read_all(
    tasks: Sequence[Any],
    jobs: int,
    read: Callable[[Any], Any],
    progress: Callable[[int], None] | None = None,
) -> list[Any]:
    """``[read(task) for task in tasks]``, read by ``jobs`` processes (the parent one of them).

    ``progress(count)`` is told, after each piece the parent reads, how many
    pieces have been claimed so far.
    """
    workers = min(jobs, len(tasks)) - 1
    counter = _Counter()
    children: list[tuple[int, int, int]] = []  # (pid, read end of its pipe, its memory file)
    done = False
    try:
        for _ in range(workers):
            file = _memory_file()
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child's coverage is not collected
                os.close(read_end)
                _work(write_end, file, counter, tasks, read)
            os.close(write_end)
            children.append((pid, read_end, file))
        results: list[Any] = [None] * len(tasks)
        while (index := counter.claim()) < len(tasks):
            results[index] = read(tasks[index])
            if progress is not None:
                progress(min(counter.claimed(), len(tasks)))
        for _pid, fd, file in children:
            size = int.from_bytes(_read_exactly(fd, _HEADER, True), "little")
            kind, value = pickle.loads(_read_exactly(file, size, False))
            if kind != "ok":
                raise value
            for index, piece in value:
                results[index] = piece
        done = True
        return results
    finally:
        for pid, fd, file in children:
            os.close(fd)
            os.close(file)
            if not done:  # the parent stopped early: its workers' pieces are not wanted
                os.kill(pid, signal.SIGKILL)  # not reaped yet, so still there to be killed
            os.waitpid(pid, 0)

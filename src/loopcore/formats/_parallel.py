"""How is a replay's input read on several cores? Pieces read by worker processes, merged in order.

``load(..., jobs=N)`` cuts the input into pieces: each file, and a large plain
loopcore JSONL file into ranges of whole lines (a loopcore line is one event,
read alone). Worker processes read the pieces (``read_piece``; on Linux the
parent is one of the N, ``_workers``); the parent appends each piece's rows to
one builder in input order (``CallTableBuilder.extend``: scopes numbered by
first appearance, a compaction pending at the end of one piece arming the next
piece's call), and
replays each piece's malformed-line reports through the file's ``Problems``
with the piece's first line added. So the table, the line numbers, the counts
and every report (and, with ``--strict``, the first one that stops the load)
are those of reading the input in one process, and so is every output.

Inputs that are not regular files (pipes, FIFOs, ``/dev/stdin``) are read in
the parent, in their turn.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import stat
import sys
import zlib
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from ..batch import CallTable, CallTableBuilder, _workers
from ..batch._table import PartRows, TablePart
from ._detect import detect
from ._files import InputError, open_trace, reason
from ._reader import LOOPCORE, MAX_REPORTS, SKIP_CHUNK, FileSummary, LineSource, Problems

__all__ = [
    "MIN_PIECE_BYTES",
    "PARALLEL_MIN_BYTES",
    "Piece",
    "Task",
    "plan",
    "read_piece",
    "worth_workers",
]

#: Inputs smaller than this (in all) are read in-process whatever ``jobs`` says: starting
#: workers costs more than it saves.
PARALLEL_MIN_BYTES = 8 << 20
#: A fork copies the parent's page tables, and the pages both processes then write: its
#: cost grows with the parent's resident memory, not with the input. So forked workers
#: read only an input of at least this share of it (1/5). A library caller's large
#: process would otherwise pay more than the workers save: with 1.5 GB resident, a
#: 44 MB trace took 209 ms in two processes against 99 ms in one (in a 0.1 GB
#: process, 86 against 94).
RESIDENT_SHARE = 5
#: A file is cut into pieces no smaller than this.
MIN_PIECE_BYTES = 4 << 20
#: How much of a file's start is looked at to tell whether it is loopcore JSONL.
PEEK_BYTES = 1 << 20


@dataclass(frozen=True)
class Task:
    """One piece of the input: a whole file, or a range of whole lines of one."""

    file: int  # index into the files
    path: str
    forced: str | None
    limit: int
    strict: bool
    start: int = 0
    end: int | None = None  # None: to the end of the file
    first: bool = True  # the file's first piece (where its format is detected)
    local: bool = False  # read in the parent (not a regular file)
    size: int = 0  # bytes, for the progress bar


@dataclass
class Piece:
    """What a worker read from one ``Task``."""

    part: TablePart
    row_lines: bytes  # int64 line numbers, counted from the piece's first line
    summary: FileSummary
    lines: int
    blank: int
    count: int  # malformed lines, the unreported ones included
    reports: list[tuple[int, str]] = field(default_factory=list)
    error: str | None = None  # an InputError's message, raised in turn by the parent


class _Stop(Exception):
    """A strict read stops at its first report (the parent raises it, in turn)."""


class _Recorded(Problems):
    """Problems that keep the first ``MAX_REPORTS`` reports for the parent, printing nothing."""

    __slots__ = ("reports",)

    def __init__(self, path: str, strict: bool) -> None:
        super().__init__(path, strict, io.StringIO())
        self.reports: list[tuple[int, str]] = []

    def __call__(self, line: int, reason: str) -> None:
        self.count += 1
        if len(self.reports) < MAX_REPORTS:
            self.reports.append((line, reason))
        if self.strict:
            raise _Stop

    def close(self) -> None:
        pass


class _Range(io.RawIOBase):
    """The bytes of a file from ``start`` to ``end``, as a raw stream.

    Buffered (``_range``), its lines are read by ``BufferedReader.readline`` in C: a
    Python ``readline`` of its own would cost a Python call per line of the piece.
    """

    def __init__(self, stream: io.BufferedReader, start: int, end: int | None) -> None:
        super().__init__()
        stream.seek(start)
        self.stream = stream
        self.left = sys.maxsize if end is None else end - start

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        wanted = min(len(view), self.left)
        if wanted <= 0:
            return 0
        count = self.stream.readinto(view[:wanted])
        self.left -= count
        return count


#: The read buffer of a piece: large reads, and a line's bytes copied once.
RANGE_BUFFER = 1 << 20


def _range(stream: io.BufferedReader, start: int, end: int | None) -> io.BufferedReader:
    return io.BufferedReader(_Range(stream, start, end), RANGE_BUFFER)


def read_piece(task: Task) -> Piece:
    """Read one piece into a builder of its own (in a worker process, or in the parent)."""
    from ._load import _File, _reader

    builder = CallTableBuilder()
    row_lines: array[int] = array("q")
    summary = FileSummary(task.path)
    report = _Recorded(task.path, task.strict)
    error: str | None = None
    source: LineSource | None = None
    try:
        stream, raw = open_trace(task.path)
        try:
            with stream, raw:
                if task.first and task.end is None:
                    source = LineSource(stream, task.limit, report)
                else:
                    source = LineSource(_range(raw, task.start, task.end), task.limit, report)
                lines = iter(source)
                if task.first:
                    _File(builder, row_lines, summary, report, task.forced, task.limit).read(
                        lines, lambda: None
                    )
                    for _ in lines:  # a document left too long to read: counted to its end
                        pass
                else:
                    reader = _reader(LOOPCORE, builder, row_lines, report, summary)
                    reader.run(lines, lambda: None)
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{task.path}: cannot read: {reason(exc)}") from None
    except InputError as exc:
        error = str(exc)
    except _Stop:
        pass
    return Piece(
        part=builder.part(),
        row_lines=row_lines.tobytes(),
        summary=summary,
        lines=source.count if source is not None else 0,
        blank=report.blank,
        count=report.count,
        reports=report.reports,
        error=error,
    )


def worth_workers(input_bytes: int) -> bool:
    """Is an input of this many bytes in all worth reading with workers?

    Large enough to gain from them (``PARALLEL_MIN_BYTES``) and, where this
    process's resident memory is known (Linux, where the workers are forked), at
    least a ``RESIDENT_SHARE``-th of it.
    """
    if input_bytes < PARALLEL_MIN_BYTES:
        return False
    resident = resident_bytes()
    return resident is None or input_bytes * RESIDENT_SHARE >= resident


def resident_bytes() -> int | None:
    """This process's resident memory, from ``/proc/self/statm``; None where unknown."""
    try:
        with open("/proc/self/statm", "rb") as stream:
            fields = stream.read().split()
        return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False  # reported in the parent, in its turn


def _loopcore_lines(path: str, forced: str | None, limit: int) -> bool:
    """May this file be cut into ranges of lines? Plain (not gzip) loopcore JSONL."""
    if forced not in (None, LOOPCORE):
        return False
    try:
        with open(path, "rb") as stream:
            head = stream.read(PEEK_BYTES)
    except OSError:
        return False
    if head[:2] == b"\x1f\x8b":
        return False
    if forced == LOOPCORE:
        return True
    for number, line in enumerate(head.split(b"\n")[:-1], 1):
        if not line.strip() or len(line) > limit:
            continue  # neither decides the format (a too-long line is skipped unread)
        try:
            event = json.loads(line.decode("utf-8-sig" if number == 1 else "utf-8"))
        except (ValueError, RecursionError):
            return False
        return isinstance(event, dict) and detect(event) == LOOPCORE
    return False


def _cuts(path: str, size: int, count: int) -> list[int]:
    """Offsets just past a line end, near each ``size * k / count``."""
    cuts: list[int] = []
    with open(path, "rb") as stream:
        for k in range(1, count):
            stream.seek(max(size * k // count - 1, cuts[-1] if cuts else 0))
            while True:
                chunk = stream.readline(SKIP_CHUNK)
                if not chunk or chunk[-1] == 10:
                    break
            at = stream.tell()
            if at < size and (not cuts or at > cuts[-1]):
                cuts.append(at)
    return cuts


def plan(
    files: list[str], sizes: list[int], jobs: int, forced: str | None, limit: int, strict: bool
) -> list[Task]:
    """The pieces of the input, in input order."""
    piece = max(MIN_PIECE_BYTES, -(-sum(sizes) // (jobs * 4)))
    tasks: list[Task] = []
    for index, (path, size) in enumerate(zip(files, sizes, strict=True)):
        if not _regular(path):
            tasks.append(Task(index, path, forced, limit, strict, local=True, size=size))
            continue
        # Rounded, not floored: a file of ``jobs * 4`` pieces less a byte is cut into as many,
        # so the workers finish together instead of one reading a last piece alone.
        count = (size + piece // 2) // piece
        if count < 2 or not _loopcore_lines(path, forced, limit):
            tasks.append(Task(index, path, forced, limit, strict, size=size))
            continue
        edges = [0, *_cuts(path, size, count), size]
        for n, (start, end) in enumerate(itertools.pairwise(edges)):
            last = n == len(edges) - 2
            tasks.append(
                Task(
                    index,
                    path,
                    forced,
                    limit,
                    strict,
                    start=start,
                    end=None if last else end,
                    first=n == 0,
                    size=end - start,
                )
            )
    return tasks


def _context() -> Any:
    import multiprocessing

    # fork starts a worker in milliseconds with loopcore already imported; where it is
    # not the platform's safe choice (macOS, Windows) the default context is used.
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def pieces(
    tasks: list[Task], jobs: int, claimed: Callable[[int], None] | None = None
) -> Iterator[tuple[Task, Piece]]:
    """Every task with its piece, in order: regular files read by ``jobs`` processes, the
    others in the parent when their turn comes.

    On Linux the parent is one of the ``jobs`` (``_workers``), and ``claimed(count)`` is
    told, as it reads, how many of the regular files' pieces have been claimed.
    """
    remote = [task for task in tasks if not task.local]
    if _workers.AVAILABLE:
        results = iter(_workers.read_all(remote, jobs, read_piece, claimed))
        for task in tasks:
            yield task, read_piece(task) if task.local else next(results)
        return
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(
        max_workers=min(jobs, len(remote) or 1), mp_context=_context()
    ) as pool:
        results = pool.map(read_piece, remote)
        for task in tasks:
            yield task, read_piece(task) if task.local else next(results)


class Merge:
    """Appends pieces, in input order, to the table and the files' summaries.

    Each piece's rows are taken by the builder (``CallTableBuilder.take``: its
    scopes numbered, its compactions armed) and kept, with its line numbers, until
    ``build`` joins every column once: no column grows piece by piece.
    """

    def __init__(self, builder: CallTableBuilder, err: TextIO) -> None:
        self.builder = builder
        self.err = err
        self.summary: FileSummary | None = None
        self.report: Problems | None = None
        self.offset = 0  # lines of the file's earlier pieces
        self.taken: list[PartRows] = []
        self.lines: list[npt.NDArray[np.int64]] = []
        self.rows = len(builder)  # rows of the table so far, the taken ones included

    def start(self, path: str, strict: bool) -> FileSummary:
        self.summary = FileSummary(path, first_row=self.rows)
        self.report = Problems(path, strict, self.err)
        self.offset = 0
        return self.summary

    def add(self, task: Task, piece: Piece) -> None:
        summary, report = self.summary, self.report
        assert summary is not None
        assert report is not None
        offset = self.offset
        try:
            for line, text in piece.reports:
                report(line + offset, text)
            report.count += piece.count - len(piece.reports)
            if piece.error is not None:
                raise InputError(piece.error)
        except InputError:
            report.close()
            raise
        taken = self.builder.take(piece.part)
        self.taken.append(taken)
        self.rows += len(taken.scope)
        self.lines.append(np.frombuffer(piece.row_lines, np.int64) + offset)
        if task.first:
            summary.format = piece.summary.format
        summary.unanswered += piece.summary.unanswered
        summary.orphan_results += piece.summary.orphan_results
        report.blank += piece.blank
        self.offset += piece.lines

    def finish(self) -> None:
        summary, report = self.summary, self.report
        assert summary is not None
        assert report is not None
        report.close()
        summary.lines = self.offset
        summary.blank = report.blank
        summary.skipped = report.count
        summary.calls = self.rows - summary.first_row

    def build(self) -> tuple[CallTable, npt.NDArray[np.int64]]:
        """The table (the builder's rows, then every piece's) and each row's line number."""
        table = self.builder.build(self.taken)
        lines = np.concatenate(self.lines) if self.lines else np.zeros(0, np.int64)
        return table, lines

"""How are trace files read into one ``CallTable``? ``load``, choosing each file's reader.

A file's format is the one its first decisive line shows (``_detect``): a line
that fits two (a bare compaction) waits for the next one. A file whose first
line opens a JSON document it does not close is one document of chat
conversations (``_json``), unless its later lines show it is JSONL with a
broken first line. ``input_format`` forces one format for every file.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import zlib
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from ..batch import CallTable, CallTableBuilder
from . import _parallel
from ._chat import ChatReader
from ._detect import CHAT, detect
from ._files import InputError, expand, file_size, open_trace, reason
from ._json import Document, decode_located, opens_document
from ._reader import (
    CHAT_FORMATS,
    FORMATS,
    LOOPCORE,
    MAX_LINE_BYTES,
    PI,
    SKIP,
    FileSummary,
    Lines,
    LineSource,
    Problems,
    json_type,
    line_limit,
    parse,
)
from .loopcore import EventReader
from .pi import PiReader

__all__ = ["PROGRESS_DELAY", "Traces", "load", "read_lines"]

#: Seconds before the progress bar appears: quick inputs never show one.
PROGRESS_DELAY = 1.0


@dataclass
class Traces:
    """Every call read, as one table, with where each call came from."""

    table: CallTable
    files: list[FileSummary]
    #: per call: its line number in its file (in a transcript, the line of the message that
    #: made the call)
    lines: npt.NDArray[np.int64]
    #: per call: its index into ``files``
    file_index: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))

    @property
    def skipped(self) -> int:
        return sum(f.skipped for f in self.files)

    @property
    def unanswered(self) -> int:
        return sum(f.unanswered for f in self.files)

    @property
    def orphan_results(self) -> int:
        return sum(f.orphan_results for f in self.files)

    @property
    def held(self) -> bool:
        """Did any file hold more than blank lines?"""
        return any(f.held for f in self.files)


class _Progress:
    """A tqdm bar over the bytes read, shown only on a terminal and after a second."""

    def __init__(self, total: int, enabled: bool, err: TextIO) -> None:
        self.bar: Any = None
        if enabled and err.isatty():
            try:
                from tqdm import tqdm
            except ImportError:  # an optional extra (loopcore[cli]): without it, no bar
                return
            self.bar = tqdm(
                total=total,
                unit="B",
                unit_scale=True,
                delay=PROGRESS_DELAY,
                file=err,
                desc="reading",
                leave=False,
            )

    def update(self, done: int) -> None:
        if self.bar is not None and done > self.bar.n:  # never back (claimed, then merged)
            self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _reader(
    kind: str,
    builder: CallTableBuilder,
    row_lines: array[int],
    report: Problems,
    summary: FileSummary,
) -> Any:
    summary.format = kind
    if kind == LOOPCORE:
        return EventReader(builder, row_lines, report, summary)
    if kind == PI:
        return PiReader(builder, row_lines, report, summary)
    return ChatReader(builder, row_lines, report, summary, None if kind == CHAT else kind)


class _File:
    """One file being read: choosing its reader, then handing it the lines."""

    def __init__(
        self,
        builder: CallTableBuilder,
        row_lines: array[int],
        summary: FileSummary,
        report: Problems,
        forced: str | None,
        limit: int,
    ) -> None:
        self.builder = builder
        self.row_lines = row_lines
        self.summary = summary
        self.report = report
        self.forced = forced
        self.limit = limit

    def read(self, lines: Lines, tick: Callable[[], None]) -> None:
        forced = self.forced
        if forced in (LOOPCORE, PI):
            reader = _reader(forced, self.builder, self.row_lines, self.report, self.summary)
            reader.run(lines, tick)
            reader.finish()
            return
        early: list[tuple[int, Any]] = []
        kind = forced
        documents = True  # until the first line with content: may it open a document?
        for number, line in lines:
            if documents and opens_document(line, number):
                document = Document(number, line, lines, self.limit)
                if self._document(document):
                    return
                lines = itertools.chain(document.held(), lines)  # JSONL after all
                break
            documents = documents and not line.strip()
            event = parse(line, number, self.report, arrays=True)
            if event is SKIP:
                continue
            early.append((number, event))
            if kind is not None:
                break  # forced: the first line is the reader's to judge
            kind = detect(event)
            if kind is not None:
                break
        self._lines(kind, early, lines, tick)

    def _lines(
        self, kind: str | None, early: list[tuple[int, Any]], lines: Lines, tick: Callable[[], None]
    ) -> None:
        if kind is None:
            # Still undecided: read on, the first decisive line choosing the reader.
            for number, line in lines:
                event = parse(line, number, self.report, arrays=True)
                if event is SKIP:
                    continue
                early.append((number, event))
                kind = detect(event)
                if kind is not None:
                    break
        reader = _reader(kind or LOOPCORE, self.builder, self.row_lines, self.report, self.summary)
        for number, event in early:
            if isinstance(reader, ChatReader) or isinstance(event, dict):
                reader.take(number, event)
            else:  # an array line, undecided before: what the line readers say of one
                self.report(number, f"expected a JSON object, got {json_type(event)}")
        reader.run(lines, tick)
        reader.finish()

    def _document(self, document: Document) -> bool:
        """Read a held document; False when it is rather JSONL with a broken first line."""
        report = self.report
        if document.too_long:
            if document.looks_like_lines():
                return False
            report(
                document.first,
                f"JSON document longer than {self.limit} bytes (--max-line-bytes)",
            )
            document.data.clear()
            return True  # the rest of the file is left unread
        try:
            value, located = decode_located(document.text())
        except UnicodeDecodeError as exc:
            if document.looks_like_lines():
                return False
            line = document.line_at_byte(exc.start)
            report(line, f"not UTF-8 text ({exc.reason} in the JSON document)")
            return True
        except json.JSONDecodeError as exc:
            if document.looks_like_lines():
                return False
            line = document.line_of(exc.lineno)
            report(line, f"invalid JSON document: {exc.msg} (column {exc.colno})")
            return True
        except RecursionError:
            report(document.first, "invalid JSON document: nested too deeply")
            return True
        except ValueError as exc:  # an integer past the interpreter's digit limit
            report(document.first, f"invalid JSON document: {exc}")
            return True
        kind = self.forced if self.forced in CHAT_FORMATS else CHAT
        reader = _reader(kind, self.builder, self.row_lines, report, self.summary)
        lines = {key: document.line_of(line) for key, line in located.items()}
        document.data.clear()
        reader.take_document(value, lines, document.first)
        reader.finish()
        return True


def _read(
    path: str,
    builder: CallTableBuilder,
    row_lines: array[int],
    summary: FileSummary,
    report: Problems,
    progress: _Progress,
    offset: int,
    max_line_bytes: int,
    forced: str | None,
) -> None:
    stream, raw = open_trace(path)
    # A pipe or a FIFO has no position (its size is 0 too): the bar then stays where it was.
    seekable = raw.seekable()

    def tick() -> None:
        if seekable:
            progress.update(offset + raw.tell())

    try:
        with stream, raw:
            source = LineSource(stream, max_line_bytes, report)
            lines = iter(source)
            _File(builder, row_lines, summary, report, forced, max_line_bytes).read(lines, tick)
            for _ in lines:  # a document left too long to read: counted to its end
                pass
            summary.lines = source.count
            summary.blank = report.blank
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: cannot read: {reason(exc)}") from None
    finally:
        report.close()


def load(
    paths: Iterable[str],
    *,
    strict: bool = False,
    progress: bool = True,
    err: TextIO,
    max_line_bytes: int = MAX_LINE_BYTES,
    input_format: str | None = None,
    jobs: int = 1,
) -> Traces:
    """Read every trace named by ``paths`` into one table (see ``loopcore.formats``).

    A line longer than ``max_line_bytes`` (its line end not counted) is
    malformed: reported, counted and streamed past without being held; so is
    a JSON document longer than that. ``input_format`` (one of ``FORMATS``)
    reads every file in that format instead of detecting each one's.
    ``jobs`` above 1 reads the files, and pieces of a large loopcore file, in that
    many worker processes (``_parallel``), when the input is large enough to gain
    from it (and, where workers are forked, large beside this process's resident
    memory, which a fork copies the page tables of): the result is the same.
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs: expected a positive integer, got {jobs!r}")
    line_limit(max_line_bytes)
    if input_format is not None and input_format not in FORMATS:
        raise ValueError(
            f"input_format: expected one of {', '.join(FORMATS)}, got {input_format!r}"
        )
    files = expand(paths)
    builder = CallTableBuilder()
    row_lines: array[int] = array("q")
    summaries: list[FileSummary] = []
    sizes = [file_size(path) for path in files]
    bar = _Progress(sum(sizes), progress, err)
    offset = 0
    if jobs > 1 and _parallel.worth_workers(sum(sizes)):
        tasks = _parallel.plan(files, sizes, jobs, input_format, max_line_bytes, strict)
        if len(tasks) > 1:
            return _load_parallel(tasks, jobs, builder, summaries, bar, err)
    try:
        for path, size in zip(files, sizes, strict=True):
            summary = FileSummary(path, first_row=len(builder))
            summaries.append(summary)
            report = Problems(path, strict, err)
            _read(
                path, builder, row_lines, summary, report, bar, offset, max_line_bytes, input_format
            )
            summary.skipped = report.count
            summary.calls = len(builder) - summary.first_row
            offset += size
            bar.update(offset)
    finally:
        bar.close()
    return _traces(builder, row_lines, summaries)


def read_lines(
    lines: Iterable[bytes | str],
    path: str,
    *,
    strict: bool = False,
    err: TextIO,
    max_line_bytes: int = MAX_LINE_BYTES,
    input_format: str | None = None,
) -> Traces:
    """The calls of one file given as its lines (as ``load`` reads a file named ``path``).

    A line is ``bytes`` or ``str`` (UTF-8 encoded), with or without its line
    end; a gzip file's bytes, given whole as one item, are gunzipped first.
    """
    line_limit(max_line_bytes)
    if input_format is not None and input_format not in FORMATS:
        raise ValueError(
            f"input_format: expected one of {', '.join(FORMATS)}, got {input_format!r}"
        )
    chunks = [
        line.encode("utf-8", "surrogatepass") if isinstance(line, str) else bytes(line)
        for line in lines
    ]
    stream: io.BufferedIOBase
    if len(chunks) == 1 and chunks[0][:2] == b"\x1f\x8b":
        stream = gzip.GzipFile(fileobj=io.BytesIO(chunks[0]), mode="rb")  # read as a stream
    else:
        stream = io.BytesIO(b"".join(c if c.endswith(b"\n") else c + b"\n" for c in chunks))
    builder = CallTableBuilder()
    row_lines: array[int] = array("q")
    summary = FileSummary(path)
    report = Problems(path, strict, err)
    try:
        source = LineSource(stream, max_line_bytes, report)
        lines_read = iter(source)
        _File(builder, row_lines, summary, report, input_format, max_line_bytes).read(
            lines_read, lambda: None
        )
        for _ in lines_read:
            pass
        summary.lines = source.count
        summary.blank = report.blank
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: cannot read: {reason(exc)}") from None
    finally:
        report.close()
    summary.skipped = report.count
    summary.calls = len(builder)
    return _traces(builder, row_lines, [summary])


def _load_parallel(
    tasks: list[_parallel.Task],
    jobs: int,
    builder: CallTableBuilder,
    summaries: list[FileSummary],
    bar: _Progress,
    err: TextIO,
) -> Traces:
    merge = _parallel.Merge(builder, err)
    # While the pieces are read, the bar shows the bytes of those claimed so far.
    claimed = [0, *itertools.accumulate(task.size for task in tasks if not task.local)]
    offset = 0
    try:
        for task, piece in _parallel.pieces(tasks, jobs, lambda count: bar.update(claimed[count])):
            if task.first:
                if summaries:
                    merge.finish()
                summaries.append(merge.start(task.path, task.strict))
            merge.add(task, piece)
            offset += task.size
            bar.update(offset)
        if summaries:
            merge.finish()
    finally:
        bar.close()
    table, lines = merge.build()
    return _traced(table, lines, summaries)


def _traces(
    builder: CallTableBuilder, row_lines: array[int], summaries: list[FileSummary]
) -> Traces:
    return _traced(builder.build(), np.frombuffer(row_lines, np.int64).copy(), summaries)


def _traced(table: CallTable, lines: npt.NDArray[np.int64], summaries: list[FileSummary]) -> Traces:
    starts = np.array([s.first_row for s in summaries], np.int64)
    file_index = np.searchsorted(starts, np.arange(len(table)), side="right") - 1
    return Traces(table=table, files=summaries, lines=lines, file_index=file_index.astype(np.int64))

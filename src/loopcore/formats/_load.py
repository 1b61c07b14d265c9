"""How are trace files read into one ``CallTable``? ``load``, choosing each file's reader.

A file's format is the one its first decisive line shows (``_detect``): a line
that fits both (a bare compaction) waits for the next one.
"""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from ..batch import CallTable, CallTableBuilder
from ..batch._table import EVENT_FIELDS
from ._files import InputError, expand, file_size, open_trace, reason
from ._reader import (
    LOOPCORE,
    MAX_LINE_BYTES,
    PI,
    SKIP,
    FileSummary,
    LineSource,
    Problems,
    line_limit,
    parse,
)
from .loopcore import EventReader
from .pi import PiReader

__all__ = ["PROGRESS_DELAY", "Traces", "load"]

#: Seconds before the progress bar appears: quick inputs never show one.
PROGRESS_DELAY = 1.0


@dataclass
class Traces:
    """Every call read, as one table, with where each call came from."""

    table: CallTable
    files: list[FileSummary]
    #: per call: its line number in its file (for pi, the line of the assistant message)
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


def _detect(event: dict[str, Any]) -> str | None:
    """The format a parsed line shows, or None when it fits both (a bare compaction line)."""
    kind = event.get("type")
    if "tool" in event or kind == "call":
        return LOOPCORE
    if kind == "compaction":
        # pi's compaction entries carry an id, a summary, token counts: fields no event has.
        return PI if any(key not in EVENT_FIELDS for key in event) else None
    if isinstance(kind, str):
        return PI
    return LOOPCORE  # no tool, no type: a broken event; the loopcore reader names the field


class _Progress:
    """A tqdm bar over the bytes read, shown only on a terminal and after a second."""

    def __init__(self, total: int, enabled: bool, err: TextIO) -> None:
        self.bar: Any = None
        if enabled and err.isatty():
            try:
                from tqdm import tqdm
            except ImportError:  # a broken install; the bar is a nicety
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
        if self.bar is not None:
            self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _read(
    path: str,
    builder: CallTableBuilder,
    row_lines: array[int],
    summary: FileSummary,
    report: Problems,
    progress: _Progress,
    offset: int,
    max_line_bytes: int,
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
            early: list[tuple[int, dict[str, Any]]] = []
            kind = None
            for number, line in lines:
                event = parse(line, number, report)
                if event is SKIP:
                    continue
                early.append((number, event))
                kind = _detect(event)
                if kind is not None:
                    break
            summary.format = kind or LOOPCORE
            reader_type = PiReader if kind == PI else EventReader
            reader = reader_type(builder, row_lines, report, summary)
            for early_number, event in early:
                reader.take(early_number, event)
            reader.run(lines, tick)
            summary.lines = source.count
            reader.finish()
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
) -> Traces:
    """Read every trace named by ``paths`` into one table (see ``loopcore.formats``).

    A line longer than ``max_line_bytes`` (its line end not counted) is
    malformed: reported, counted and streamed past without being held.
    """
    line_limit(max_line_bytes)
    files = expand(paths)
    builder = CallTableBuilder()
    row_lines: array[int] = array("q")
    summaries: list[FileSummary] = []
    sizes = [file_size(path) for path in files]
    bar = _Progress(sum(sizes), progress, err)
    offset = 0
    try:
        for path, size in zip(files, sizes, strict=True):
            summary = FileSummary(path, first_row=len(builder))
            summaries.append(summary)
            report = Problems(path, strict, err)
            _read(path, builder, row_lines, summary, report, bar, offset, max_line_bytes)
            summary.skipped = report.count
            summary.calls = len(builder) - summary.first_row
            offset += size
            bar.update(offset)
    finally:
        bar.close()
    table = builder.build()
    starts = np.array([s.first_row for s in summaries], np.int64)
    file_index = np.searchsorted(starts, np.arange(len(table)), side="right") - 1
    return Traces(
        table=table,
        files=summaries,
        lines=np.frombuffer(row_lines, np.int64).copy(),
        file_index=file_index.astype(np.int64),
    )

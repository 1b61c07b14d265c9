"""What does every trace reader share? Line parsing, malformed-line reports, a file's counts.

A file's lines come from ``LineSource``: numbered, and never longer than the
line limit in memory (a longer line is reported and streamed past, so a gzip
bomb or ``/dev/zero`` costs bounded memory).
"""

from __future__ import annotations

import io
import json
import sys
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from .._twins import compiled
from ..batch import CallTableBuilder
from ._files import InputError
from ._text import printable

__all__ = [
    "ANTHROPIC",
    "CHAT_FORMATS",
    "DECODER",
    "FORMATS",
    "LOOPCORE",
    "MAX_LINE_BYTES",
    "MAX_REPORTS",
    "OPENAI_CHAT",
    "OPENAI_RESPONSES",
    "PI",
    "PROGRESS_EVERY",
    "SKIP",
    "FileSummary",
    "LineSource",
    "Lines",
    "Problems",
    "Reader",
    "Tick",
    "json_type",
    "line_limit",
    "parse",
]

#: Malformed lines reported one by one per file; the rest are only counted.
MAX_REPORTS = 20
#: Lines between two progress updates: often enough for a smooth bar, rare enough to be free.
PROGRESS_EVERY = 1 << 14
#: A line longer than this many bytes (its line end not counted) is malformed: ``--max-line-bytes``.
MAX_LINE_BYTES = 64 << 20
#: How much of an over-long line is read at a time while streaming past it.
SKIP_CHUNK = 1 << 20

LOOPCORE = "loopcore"
PI = "pi"
OPENAI_CHAT = "openai-chat"
OPENAI_RESPONSES = "openai-responses"
ANTHROPIC = "anthropic"
#: The conversation formats: one reader (``formats._chat``) reads them all.
CHAT_FORMATS = (OPENAI_CHAT, OPENAI_RESPONSES, ANTHROPIC)
#: Every format a file can be read as (``--input-format``).
FORMATS = (LOOPCORE, PI, *CHAT_FORMATS)


@dataclass
class FileSummary:
    """What was read from one file."""

    path: str
    format: str = LOOPCORE
    lines: int = 0
    calls: int = 0
    skipped: int = 0  # malformed lines (or JSON documents)
    unanswered: int = 0  # transcripts: tool calls whose result never came
    orphan_results: int = 0  # transcripts: tool results that answer no call
    first_row: int = 0
    blank: int = 0  # lines holding only white space

    @property
    def held(self) -> bool:
        """Did the file hold anything but blank lines? (One that did, yet gave no call, is
        no trace.)"""
        return self.lines > self.blank


class Problems:
    """Reports a file's malformed lines on stderr (the first ``MAX_REPORTS``) and counts them."""

    __slots__ = ("blank", "count", "err", "path", "strict")

    def __init__(self, path: str, strict: bool, err: TextIO) -> None:
        self.path = path
        self.strict = strict
        self.err = err
        self.count = 0
        #: blank lines met by ``parse`` (not malformed, but not content either)
        self.blank = 0

    def __call__(self, line: int, reason: str) -> None:
        self.count += 1
        if not self.strict and self.count > MAX_REPORTS:
            return  # only counted
        # Paths and reasons can carry text from the trace (an unknown field's name).
        where = printable(f"{self.path}:{line}: {reason}")
        if self.strict:
            raise InputError(f"{where} (--strict: stopping at the first malformed line)")
        print(where, file=self.err)

    def close(self) -> None:
        hidden = self.count - MAX_REPORTS
        if hidden > 0:
            print(f"{printable(self.path)}: ... {hidden} more malformed lines", file=self.err)


SKIP: Any = object()
#: ``json.loads`` without its per-call argument handling and encoding sniffing (bytes are
#: decoded as UTF-8 here): a measurable share of a large replay.
DECODER = json.JSONDecoder()


def parse(line: bytes, number: int, report: Problems, arrays: bool = False) -> Any:
    """The line's JSON object (or, with ``arrays``, array), or ``SKIP`` for a blank line or
    (reported) a malformed one."""
    try:
        value = DECODER.decode(line.decode("utf-8-sig" if number == 1 else "utf-8"))
    except UnicodeDecodeError as exc:
        report(number, f"not UTF-8 text ({exc.reason} at byte {exc.start + 1})")
        return SKIP
    except json.JSONDecodeError as exc:
        if not line.strip():
            report.blank += 1
            return SKIP
        report(number, f"invalid JSON: {exc.msg} (column {exc.colno})")
        return SKIP
    except RecursionError:
        report(number, "invalid JSON: nested too deeply")
        return SKIP
    except ValueError as exc:  # e.g. an integer past the interpreter's digit limit
        report(number, f"invalid JSON: {exc}")
        return SKIP
    if isinstance(value, dict) or (arrays and isinstance(value, list)):
        return value
    wanted = "a JSON object or array" if arrays else "a JSON object"
    report(number, f"expected {wanted}, got {json_type(value)}")
    return SKIP


def json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


Lines = Iterator[tuple[int, bytes]]
Tick = Callable[[], None]


def line_limit(limit: object) -> int:
    """``limit`` if it is a usable line limit (an ``int`` from 1 below ``sys.maxsize``)."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        shown = f"a {type(limit).__name__}"
    elif 0 < limit < sys.maxsize:
        return limit
    else:
        shown = str(limit) if limit.bit_length() < 100 else "a larger one"
    raise ValueError(
        f"max_line_bytes: expected a positive integer up to {sys.maxsize - 1}, got {shown}"
    )


#: ``_lines_c.Lines``, unless extensions are disabled or it was not built.
_COMPILED_LINES: Any = getattr(compiled("loopcore.formats._lines_c"), "Lines", None)


class LineSource:
    """A binary stream's lines, numbered from 1; a line longer than ``limit`` is not one of them.

    Each line is read with a bounded ``readline``: one that does not end within
    ``limit`` bytes (its line end not counted) is reported as malformed, then
    the rest of it is read ``SKIP_CHUNK`` bytes at a time and dropped. So the
    memory a line costs is bounded by the limit, whatever the input, and a
    non-seekable stream (a pipe, a FIFO) reads like a file. An input that never
    ends (``/dev/zero``) is read for ever, in bounded memory.
    """

    __slots__ = ("count", "limit", "report", "stream")

    def __init__(self, stream: io.BufferedIOBase, limit: int, report: Problems) -> None:
        self.stream = stream
        self.limit = line_limit(limit)
        self.report = report
        #: lines read so far, the skipped ones included (final once the lines are exhausted)
        self.count = 0

    def __iter__(self) -> Lines:
        if _COMPILED_LINES is not None:
            lines: Lines = _COMPILED_LINES(self)
            return lines
        return self.lines()

    def lines(self) -> Lines:
        """The lines as a generator (the reference twin of ``_lines_c.Lines``)."""
        readline = self.stream.readline
        limit = self.limit
        size = limit + 1  # room for the line end of a line of exactly ``limit`` bytes
        number = self.count
        try:
            while True:
                line = readline(size)
                if not line:
                    return
                number += 1
                if len(line) > limit and line[-1] != 10:  # no b"\n" within the limit
                    self.report(number, f"line longer than {limit} bytes (--max-line-bytes)")
                    self._skip()
                    continue
                yield number, line
        finally:
            self.count = number

    def _skip(self) -> None:
        """Read past the rest of an over-long line, holding at most a chunk of it."""
        readline = self.stream.readline
        while True:
            chunk = readline(SKIP_CHUNK)
            if not chunk or chunk[-1] == 10:
                return


class Reader:
    """What every reader writes to: the table, each row's line, the reports, the file's counts."""

    def __init__(
        self, builder: CallTableBuilder, lines: array[int], report: Problems, summary: FileSummary
    ) -> None:
        self.builder = builder
        self.row_lines = lines
        self.report = report
        self.summary = summary

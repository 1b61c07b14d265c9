"""What does every trace reader share? Line parsing, malformed-line reports, a file's counts."""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from ..batch import CallTableBuilder
from ._files import InputError

__all__ = [
    "DECODER",
    "LOOPCORE",
    "MAX_REPORTS",
    "PI",
    "PROGRESS_EVERY",
    "SKIP",
    "FileSummary",
    "Lines",
    "Problems",
    "Reader",
    "Tick",
    "json_type",
    "parse",
]

#: Malformed lines reported one by one per file; the rest are only counted.
MAX_REPORTS = 20
#: Lines between two progress updates: often enough for a smooth bar, rare enough to be free.
PROGRESS_EVERY = 1 << 14

LOOPCORE = "loopcore"
PI = "pi"


@dataclass
class FileSummary:
    """What was read from one file."""

    path: str
    format: str = LOOPCORE
    lines: int = 0
    calls: int = 0
    skipped: int = 0  # malformed lines
    unanswered: int = 0  # pi: tool calls whose result never came
    orphan_results: int = 0  # pi: tool results that answer no call
    first_row: int = 0


class Problems:
    """Reports a file's malformed lines on stderr (the first ``MAX_REPORTS``) and counts them."""

    __slots__ = ("count", "err", "path", "strict")

    def __init__(self, path: str, strict: bool, err: TextIO) -> None:
        self.path = path
        self.strict = strict
        self.err = err
        self.count = 0

    def __call__(self, line: int, reason: str) -> None:
        self.count += 1
        where = f"{self.path}:{line}: {reason}"
        if self.strict:
            raise InputError(f"{where} (--strict: stopping at the first malformed line)")
        if self.count <= MAX_REPORTS:
            print(where, file=self.err)

    def close(self) -> None:
        hidden = self.count - MAX_REPORTS
        if hidden > 0:
            print(f"{self.path}: ... {hidden} more malformed lines", file=self.err)


SKIP: Any = object()
#: ``json.loads`` without its per-call argument handling and encoding sniffing (bytes are
#: decoded as UTF-8 here): a measurable share of a large replay.
DECODER = json.JSONDecoder()


def parse(line: bytes, number: int, report: Problems) -> Any:
    """The line's JSON object, or ``SKIP`` for a blank line or (reported) a malformed one."""
    try:
        value = DECODER.decode(line.decode("utf-8-sig" if number == 1 else "utf-8"))
    except UnicodeDecodeError as exc:
        report(number, f"not UTF-8 text ({exc.reason} at byte {exc.start + 1})")
        return SKIP
    except json.JSONDecodeError as exc:
        if not line.strip():
            return SKIP
        report(number, f"invalid JSON: {exc.msg} (column {exc.colno})")
        return SKIP
    except RecursionError:
        report(number, "invalid JSON: nested too deeply")
        return SKIP
    except ValueError as exc:  # e.g. an integer past the interpreter's digit limit
        report(number, f"invalid JSON: {exc}")
        return SKIP
    if not isinstance(value, dict):
        report(number, f"expected a JSON object, got {json_type(value)}")
        return SKIP
    return value


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


class Reader:
    """What both readers write to: the table, each row's line, the reports, the file's counts."""

    def __init__(
        self, builder: CallTableBuilder, lines: array[int], report: Problems, summary: FileSummary
    ) -> None:
        self.builder = builder
        self.row_lines = lines
        self.report = report
        self.summary = summary

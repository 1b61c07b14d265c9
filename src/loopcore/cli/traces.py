"""Which tool calls does a recorded trace hold? Reading loopcore JSONL and pi/OpenClaw transcripts.

``load`` turns files (plain or gzip, or directories of them) into one
``CallTable``, remembering for every call the file and line it came from.
Each file's format is detected from its first decisive line:

- a loopcore event log: one ``CallTableBuilder.add_event`` mapping per line;
- a pi / OpenClaw session transcript: ``{"type": "message", "message": ...}``
  lines whose assistant ``toolCall`` blocks are paired with the later
  ``toolResult`` message of the same ``toolCallId``.

A malformed line is reported as ``FILE:LINE: reason``, counted and skipped
(or, when strict, stops the load); an unreadable file is an ``InputError``.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import zlib
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np
import numpy.typing as npt

from .._calltable import EVENT_FIELDS, CallTable, CallTableBuilder
from .._outcome import UNSET

__all__ = ["MAX_REPORTS", "TRACE_SUFFIXES", "FileSummary", "InputError", "Traces", "load"]

#: What a directory's trace files are called (searched recursively, hidden entries skipped).
TRACE_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz")
#: Malformed lines reported one by one per file; the rest are only counted.
MAX_REPORTS = 20
#: Seconds before the progress bar appears: quick inputs never show one.
PROGRESS_DELAY = 1.0
#: Lines between two progress updates: often enough for a smooth bar, rare enough to be free.
_PROGRESS_EVERY = 1 << 14

LOOPCORE = "loopcore"
PI = "pi"


class InputError(Exception):
    """An input cannot be read (or, when strict, holds a malformed line); the message names it."""


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


# -- finding and opening files ------------------------------------------------------------------


def _is_trace(name: str) -> bool:
    return name.endswith(TRACE_SUFFIXES) and not name.startswith(".")


def _unreadable(exc: OSError) -> None:
    raise InputError(f"{exc.filename}: cannot read: {_reason(exc)}")


def expand(paths: Iterable[str]) -> list[str]:
    """The trace files named by ``paths``, directories expanded, each file once."""
    out: list[str] = []
    seen: set[str] = set()

    def keep(path: str) -> None:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            out.append(path)

    for path in paths:
        if not os.path.isdir(path):
            keep(path)  # a missing file is reported when it is opened
            continue
        found: list[str] = []

        for root, dirs, files in os.walk(path, onerror=_unreadable):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found.extend(os.path.join(root, name) for name in sorted(files) if _is_trace(name))
        if not found:
            suffixes = ", ".join(TRACE_SUFFIXES)
            raise InputError(f"{path}: directory holds no trace files ({suffixes})")
        for file in found:
            keep(file)
    return out


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _open(path: str) -> tuple[io.BufferedIOBase, io.BufferedReader]:
    """The file's lines (gunzipped when it starts with the gzip magic) and the raw file."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed by the caller, with the stream
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {_reason(exc)}") from None
    try:
        magic = raw.peek(2)[:2]
    except OSError as exc:  # a directory on some systems, an I/O error
        raw.close()
        raise InputError(f"{path}: cannot read: {_reason(exc)}") from None
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    return raw, raw


# -- malformed lines ----------------------------------------------------------------------------


class _Problems:
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


_SKIP: Any = object()
#: ``json.loads`` without its per-call argument handling and encoding sniffing (bytes are
#: decoded as UTF-8 here): a measurable share of a large replay.
_DECODER = json.JSONDecoder()


def _parse(line: bytes, number: int, report: _Problems) -> Any:
    """The line's JSON object, or ``_SKIP`` for a blank line or (reported) a malformed one."""
    try:
        value = _DECODER.decode(line.decode("utf-8-sig" if number == 1 else "utf-8"))
    except UnicodeDecodeError as exc:
        report(number, f"not UTF-8 text ({exc.reason} at byte {exc.start + 1})")
        return _SKIP
    except json.JSONDecodeError as exc:
        if not line.strip():
            return _SKIP
        report(number, f"invalid JSON: {exc.msg} (column {exc.colno})")
        return _SKIP
    except RecursionError:
        report(number, "invalid JSON: nested too deeply")
        return _SKIP
    except ValueError as exc:  # e.g. an integer past the interpreter's digit limit
        report(number, f"invalid JSON: {exc}")
        return _SKIP
    if not isinstance(value, dict):
        report(number, f"expected a JSON object, got {_json_type(value)}")
        return _SKIP
    return value


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


# -- format detection ---------------------------------------------------------------------------


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


# -- readers ------------------------------------------------------------------------------------

_Lines = Iterator[tuple[int, bytes]]
_Tick = Callable[[], None]


class _Reader:
    """What both readers write to: the table, each row's line, the reports, the file's counts."""

    def __init__(
        self, builder: CallTableBuilder, lines: array[int], report: _Problems, summary: FileSummary
    ) -> None:
        self.builder = builder
        self.row_lines = lines
        self.report = report
        self.summary = summary


class _EventReader(_Reader):
    """loopcore's own format: every line is one ``add_event`` mapping."""

    def take(self, number: int, event: dict[str, Any]) -> None:
        try:
            row = self.builder.add_event(event)
        except (TypeError, ValueError) as exc:
            self.report(number, str(exc))
            return
        if row is not None:
            self.row_lines.append(number)

    def run(self, lines: _Lines, tick: _Tick) -> int:
        """Read the remaining lines; returns the number of the last one."""
        # The hot loop of a large replay: names bound locally, blank and bad lines
        # handled only on the exception path.
        decode = _DECODER.decode
        add = self.builder.add_event
        keep = self.row_lines.append
        report = self.report
        number = 0
        for number, line in lines:
            try:
                event = decode(line.decode())
            except (ValueError, RecursionError):
                event = _parse(line, number, report)  # a blank line, a BOM, or a report
                if event is _SKIP:
                    continue
            if type(event) is not dict:
                _parse(line, number, report)
                continue
            try:
                row = add(event)
            except (TypeError, ValueError) as exc:
                report(number, str(exc))
                continue
            if row is not None:
                keep(number)
            if not number % _PROGRESS_EVERY:
                tick()
        return number

    def finish(self) -> None:
        pass


class _Call:
    """A pi tool call waiting for its result (calls are added in the order they were made)."""

    __slots__ = ("args", "call_id", "done", "error", "line", "name", "result", "run_id")

    def __init__(self, line: int, name: str, args: Any, call_id: str, run_id: str) -> None:
        self.line = line
        self.name = name
        self.args = args
        self.call_id = call_id
        self.run_id = run_id
        self.result: Any = UNSET
        self.error: Any = UNSET
        self.done = False


class _Compaction:
    __slots__ = ("run_id",)

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id


def _error_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [
        block["text"]
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    ]
    return "\n".join(texts)


class _PiReader(_Reader):
    """pi / OpenClaw session transcripts: tool calls paired with their results, runs per prompt.

    The scope's session is the id of the ``session`` header line, else the file's
    path; a new run (``run-1``, ``run-2``, ...) starts at each user message, and
    calls before the first one belong to ``run-0``.
    """

    def __init__(
        self, builder: CallTableBuilder, lines: array[int], report: _Problems, summary: FileSummary
    ) -> None:
        super().__init__(builder, lines, report, summary)
        self.session = summary.path
        self.run_number = 0
        self.queue: deque[_Call | _Compaction] = deque()
        self.waiting: dict[str, deque[_Call]] = {}

    @property
    def run_id(self) -> str:
        return f"run-{self.run_number}"

    def run(self, lines: _Lines, tick: _Tick) -> int:
        """Read the remaining lines; returns the number of the last one."""
        number = 0
        for number, line in lines:
            entry = _parse(line, number, self.report)
            if entry is not _SKIP:
                self.take(number, entry)
            if not number % _PROGRESS_EVERY:
                tick()
        return number

    def take(self, number: int, entry: dict[str, Any]) -> None:
        kind = entry.get("type")
        if kind is None:
            self.report(number, "type: missing")
        elif not isinstance(kind, str):
            self.report(number, f"type: expected a string, got {_json_type(kind)}")
        elif kind == "message":
            self._message(number, entry.get("message"))
        elif kind == "compaction":
            self.queue.append(_Compaction(self.run_id))
            self._flush()
        elif kind == "session":
            session = entry.get("id")
            if not isinstance(session, str) or not session:
                self.report(number, "id: expected the session id, a non-empty string")
                return
            # A header mid-file starts another session (files joined together).
            self._flush(everything=True)
            self.session = session
            self.run_number = 0
        # Any other entry (model_change, thinking_level_change, custom, label, ...)
        # says nothing about tool calls.

    def _message(self, number: int, message: object) -> None:
        if not isinstance(message, dict):
            self.report(number, f"message: expected an object, got {_json_type(message)}")
            return
        role = message.get("role")
        if not isinstance(role, str):
            self.report(number, "message.role: expected a string")
        elif role == "user":
            self._flush(everything=True)
            self.run_number += 1
        elif role == "assistant":
            self._calls(number, message.get("content"))
        elif role == "toolResult":
            self._result(number, message)

    def _calls(self, number: int, content: object) -> None:
        if not isinstance(content, list):
            return  # a plain-text reply
        calls = []
        for index, block in enumerate(content):
            if not isinstance(block, dict) or block.get("type") != "toolCall":
                continue
            name, call_id = block.get("name"), block.get("id")
            where = f"message.content[{index}]"
            if not isinstance(name, str):
                self.report(number, f"{where}.name: expected a string")
                return
            if not isinstance(call_id, str):
                self.report(number, f"{where}.id: expected a string")
                return
            calls.append(_Call(number, name, block.get("arguments", {}), call_id, self.run_id))
        for call in calls:
            self.queue.append(call)
            self.waiting.setdefault(call.call_id, deque()).append(call)

    def _result(self, number: int, message: dict[str, Any]) -> None:
        call_id = message.get("toolCallId")
        if not isinstance(call_id, str):
            self.report(number, "message.toolCallId: expected a string")
            return
        waiting = self.waiting.get(call_id)
        if not waiting:
            self.summary.orphan_results += 1
            return
        call = waiting.popleft()
        if not waiting:
            del self.waiting[call_id]
        if message.get("isError") is True:
            call.error = _error_text(message.get("content"))
        else:
            call.result = {"content": message.get("content"), "details": message.get("details")}
        call.done = True
        self._flush()

    def _flush(self, everything: bool = False) -> None:
        """Add the calls at the front of the queue whose outcome is known (or all of them)."""
        queue = self.queue
        while queue:
            item = queue[0]
            if isinstance(item, _Compaction):
                self.builder.add_compaction(session=self.session, run_id=item.run_id)
            elif item.done or everything:
                if not item.done:
                    self.summary.unanswered += 1
                self._add(item)
            else:
                return
            queue.popleft()
        if everything:
            self.waiting.clear()

    def _add(self, call: _Call) -> None:
        try:
            self.builder.add(
                call.name,
                call.args,
                result=call.result,
                error=call.error,
                tool_call_id=call.call_id,
                session=self.session,
                run_id=call.run_id,
            )
        except (TypeError, ValueError) as exc:  # pragma: no cover - every field is checked above
            self.report(call.line, str(exc))
            return
        self.row_lines.append(call.line)

    def finish(self) -> None:
        self._flush(everything=True)


# -- the whole load -----------------------------------------------------------------------------


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


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _read(
    path: str,
    builder: CallTableBuilder,
    row_lines: array[int],
    summary: FileSummary,
    report: _Problems,
    progress: _Progress,
    offset: int,
) -> None:
    stream, raw = _open(path)

    def tick() -> None:
        progress.update(offset + raw.tell())

    try:
        with stream, raw:
            lines = enumerate(stream, 1)
            early: list[tuple[int, dict[str, Any]]] = []
            kind = None
            number = 0
            for number, line in lines:
                event = _parse(line, number, report)
                if event is _SKIP:
                    continue
                early.append((number, event))
                kind = _detect(event)
                if kind is not None:
                    break
            summary.format = kind or LOOPCORE
            reader_type = _PiReader if kind == PI else _EventReader
            reader = reader_type(builder, row_lines, report, summary)
            for early_number, event in early:
                reader.take(early_number, event)
            summary.lines = max(number, reader.run(lines, tick))
            reader.finish()
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{path}: cannot read: {_reason(exc)}") from None
    finally:
        report.close()


def load(
    paths: Iterable[str], *, strict: bool = False, progress: bool = True, err: TextIO
) -> Traces:
    """Read every trace named by ``paths`` into one table (see the module docstring)."""
    files = expand(paths)
    builder = CallTableBuilder()
    row_lines: array[int] = array("q")
    summaries: list[FileSummary] = []
    sizes = [_size(path) for path in files]
    bar = _Progress(sum(sizes), progress, err)
    offset = 0
    try:
        for path, size in zip(files, sizes, strict=True):
            summary = FileSummary(path, first_row=len(builder))
            summaries.append(summary)
            report = _Problems(path, strict, err)
            _read(path, builder, row_lines, summary, report, bar, offset)
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

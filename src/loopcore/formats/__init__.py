"""Which tool calls does a recorded trace hold? Reading loopcore JSONL and pi/OpenClaw transcripts.

``load`` turns files (plain or gzip, or directories of them) into one
``CallTable``, remembering for every call the file and line it came from.
Each file's format is detected from its first decisive line:

- a loopcore event log: one ``CallTableBuilder.add_event`` mapping per line
  (``formats.loopcore``);
- a pi / OpenClaw session transcript: ``{"type": "message", "message": ...}``
  lines whose assistant ``toolCall`` blocks are paired with the later
  ``toolResult`` message of the same ``toolCallId`` (``formats.pi``).

A malformed line is reported as ``FILE:LINE: reason``, counted and skipped
(or, when strict, stops the load); an unreadable file is an ``InputError``.
A line longer than ``max_line_bytes`` (``MAX_LINE_BYTES``, 64 MiB) is malformed
and streamed past, never held; pipes and FIFOs are read as streams; a
directory's FIFOs, sockets and devices are not traces.

- ``_files``: which files the paths name, and opening them (gzip or plain);
- ``_reader``: what the readers share (bounded lines, parsing, malformed-line reports);
- ``_text``: ``printable``, control characters from a trace escaped for a terminal;
- ``_load``: ``load`` itself, and the ``Traces`` it returns.
"""

from __future__ import annotations

from ._files import TRACE_SUFFIXES, InputError
from ._load import Traces, load
from ._reader import MAX_LINE_BYTES, MAX_REPORTS, FileSummary

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_REPORTS",
    "TRACE_SUFFIXES",
    "FileSummary",
    "InputError",
    "Traces",
    "load",
]

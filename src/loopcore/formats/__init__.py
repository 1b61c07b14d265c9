"""Which tool calls does a recorded trace hold? loopcore JSONL, pi/OpenClaw and chat conversations.

``load`` turns files (plain or gzip, or directories of them) into one
``CallTable``, remembering for every call the file and line it came from.
Each file's format is detected from its first decisive line (or forced for
every file with ``input_format``, one of ``FORMATS``):

- ``loopcore``: an event log, one ``CallTableBuilder.add_event`` mapping per
  line (``formats.loopcore``);
- ``pi``: a pi / OpenClaw session transcript, ``{"type": "message", "message":
  ...}`` lines whose assistant ``toolCall`` blocks are paired with the later
  ``toolResult`` message of the same ``toolCallId`` (``formats.pi``);
- ``openai-chat``, ``openai-responses``, ``anthropic``: chat conversations
  (OpenAI Chat Completions messages, OpenAI Responses items, Anthropic
  Messages), JSONL one message a line, or records each holding one
  conversation, as JSONL or as one JSON document (``formats._chat``, reading
  messages with ``formats.openai`` and ``formats.anthropic``).

A malformed line is reported as ``FILE:LINE: reason``, counted and skipped
(or, when strict, stops the load); an unreadable file is an ``InputError``.
A line longer than ``max_line_bytes`` (``MAX_LINE_BYTES``, 64 MiB) is malformed
and streamed past, never held (so is a JSON document longer than that); pipes
and FIFOs are read as streams; a directory's FIFOs, sockets and devices are
not traces.

- ``_files``: which files the paths name, and opening them (gzip or plain);
- ``_reader``: what the readers share (bounded lines, parsing, malformed-line reports);
- ``_detect``: which format a line shows;
- ``_json``: a file that is one JSON document, and the line of each record in it;
- ``_pairing``: tool calls waiting for their answers;
- ``_messages``: what the chat formats share (arguments, results and errors);
- ``_text``: ``printable``, control characters from a trace escaped for a terminal;
- ``_load``: ``load`` itself, and the ``Traces`` it returns.
"""

from __future__ import annotations

from ._files import TRACE_SUFFIXES, InputError
from ._load import Traces, load
from ._reader import CHAT_FORMATS, FORMATS, MAX_LINE_BYTES, MAX_REPORTS, FileSummary

__all__ = [
    "CHAT_FORMATS",
    "FORMATS",
    "MAX_LINE_BYTES",
    "MAX_REPORTS",
    "TRACE_SUFFIXES",
    "FileSummary",
    "InputError",
    "Traces",
    "load",
]

"""How is a file of chat conversations read? Records, conversations, sessions and runs.

One reader for the three chat formats (OpenAI Chat Completions, OpenAI
Responses, Anthropic Messages): the messages of each are read by
``formats.openai`` and ``formats.anthropic``, and what they hold is paired
here, call with answer, as for pi transcripts (``_pairing``).

A file holds either one conversation as JSONL, one message per line, or
records that each hold one conversation, as JSONL (a record a line) or as one
JSON document (a list of records, or a single record). A record is a list of
messages, or an object holding that list under ``messages``, or else under the
one key whose value is a list of messages (a message being a mapping with a
``role``, or a ``type`` of ``message``, ``function_call`` or
``function_call_output``; Responses reasoning items may sit among them).

Each conversation is one run, ``run-INDEX``; its session is the record's
``id``, ``session_id`` or ``conversation_id`` when it has one, else
``FILE#INDEX`` (INDEX the record's 0-based place in the file); a file of
messages, one a line, is the session ``FILE`` with the run ``run-0``.

With a forced format only that format's messages are read; otherwise each
message is read by the format its shape shows, and the file is labelled by
the first one seen (``openai-chat`` when none is).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Hashable
from typing import Any

from ..batch import CallTableBuilder
from ._messages import field, outcome
from ._pairing import Pairing
from ._reader import (
    ANTHROPIC,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    PROGRESS_EVERY,
    SKIP,
    FileSummary,
    Lines,
    Problems,
    Reader,
    Tick,
    json_type,
    parse,
)
from .anthropic import is_anthropic_message, read_anthropic
from .openai import is_chat_message, is_responses_item, read_chat, read_responses

__all__ = [
    "MESSAGE_TYPES",
    "RESPONSES_ITEMS",
    "ChatReader",
    "conversation_of",
    "is_item",
    "is_message",
    "session_of",
]

#: Item types that make a mapping a message (besides a ``role``).
MESSAGE_TYPES = frozenset({"message", "function_call", "function_call_output"})
#: Responses item types besides messages and function calls: they carry no call for loopcore
#: (a file of items may open with one).
RESPONSES_ITEMS = frozenset(
    {
        "reasoning",
        "web_search_call",
        "file_search_call",
        "computer_call",
        "computer_call_output",
        "code_interpreter_call",
        "image_generation_call",
        "local_shell_call",
        "local_shell_call_output",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "mcp_approval_response",
        "custom_tool_call",
        "custom_tool_call_output",
        "item_reference",
    }
)
#: The record fields that name its session, in order of preference.
SESSION_FIELDS = ("id", "session_id", "conversation_id")

_Read = Callable[[dict[str, Any], str, int, Any], None]
_READERS: dict[str, _Read] = {
    OPENAI_CHAT: read_chat,
    OPENAI_RESPONSES: read_responses,
    ANTHROPIC: read_anthropic,
}
NOT_A_CONVERSATION = (
    "expected a conversation: a list of messages, or an object holding one under 'messages'"
)


def is_message(value: object) -> bool:
    """Is ``value`` a chat message (or a Responses message or function-call item)?"""
    if not isinstance(value, dict):
        return False
    kind = value.get("type")
    return "role" in value or (isinstance(kind, str) and kind in MESSAGE_TYPES)


def is_item(value: object) -> bool:
    """Is ``value`` a message, or another Responses item (one that holds no call)?"""
    if is_message(value):
        return True
    kind = value.get("type") if isinstance(value, dict) else None
    return isinstance(kind, str) and kind in RESPONSES_ITEMS


def _message_list(value: object) -> bool:
    """A list of typed mappings with at least one message among them."""
    if not isinstance(value, list) or not value:
        return False
    for item in value:
        if not isinstance(item, dict) or not ("role" in item or isinstance(item.get("type"), str)):
            return False
    return any(is_message(item) for item in value)


def conversation_of(record: object) -> tuple[list[Any], str] | str:
    """A record's messages and the key holding them ("" for a list), or why it holds none."""
    if isinstance(record, list):
        return record, ""
    if not isinstance(record, dict):
        return f"{NOT_A_CONVERSATION}, got {json_type(record)}"
    if "messages" in record:
        messages = record["messages"]
        if not isinstance(messages, list):
            return f"messages: expected a list of messages, got {json_type(messages)}"
        return messages, "messages"
    keys = [key for key, value in record.items() if _message_list(value)]
    if len(keys) == 1:
        return record[keys[0]], keys[0]
    if keys:
        shown = ", ".join(repr(key) for key in keys[:3])
        return f"{len(keys)} keys hold lists of messages ({shown}); expected one"
    return NOT_A_CONVERSATION


def session_of(record: object) -> Hashable:
    """The session a record names (``id``, ``session_id``, ``conversation_id``), or None."""
    if not isinstance(record, dict):
        return None
    for key in SESSION_FIELDS:
        value = record.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if type(value) is int:
            return value
    return None


def flavour_of(message: dict[str, Any]) -> str | None:
    """The format a message's shape shows, or None for one with no tool call or answer."""
    if is_responses_item(message):
        return OPENAI_RESPONSES
    if is_anthropic_message(message):
        return ANTHROPIC
    if is_chat_message(message):
        return OPENAI_CHAT
    return None


class _Conversation:
    """One run being read: its calls wait for their answers (the ``Sink`` of the formats)."""

    __slots__ = ("answered", "pairing", "reader", "run_id", "session")

    def __init__(self, reader: ChatReader, session: Hashable, run_id: str) -> None:
        self.reader = reader
        self.session = session
        self.run_id = run_id
        self.pairing = Pairing(reader.builder, reader.row_lines, reader.report, reader.summary)
        self.answered = 0

    def call(self, line: int, name: str, args: Any, call_id: str) -> None:
        self.pairing.call(line, name, args, call_id, self.session, self.run_id)

    def answer(self, call_id: str, content: object, is_error: object) -> None:
        result, error = outcome(content, is_error)
        self.answered += 1
        self.pairing.answer(call_id, result=result, error=error)

    def problem(self, line: int, where: str, reason: str) -> None:
        self.reader.report(line, f"{where}: {reason}" if where else reason)

    def message(self, message: object, where: str, line: int) -> None:
        if not isinstance(message, dict):
            self.problem(line, where, f"expected a message (an object), got {json_type(message)}")
            return
        reader = self.reader
        flavour = reader.forced or flavour_of(message)
        answered = self.answered
        if flavour is not None:
            reader.seen(flavour)
            _READERS[flavour](message, where, line, self)
        if message.get("role") == "user" and self.answered == answered:
            # A new prompt: every API answers a turn's calls before it, so calls still
            # waiting are unanswered (and no longer held).
            self.pairing.flush(everything=True)

    def end(self) -> None:
        self.pairing.flush(everything=True)


class ChatReader(Reader):
    """Chat conversations, JSONL or one JSON document (see the module docstring).

    ``flavour`` forces one format (``openai-chat``, ``openai-responses``,
    ``anthropic``); None reads each message by its shape.
    """

    def __init__(
        self,
        builder: CallTableBuilder,
        lines: array[int],
        report: Problems,
        summary: FileSummary,
        flavour: str | None = None,
    ) -> None:
        super().__init__(builder, lines, report, summary)
        self.forced = flavour
        self.decided = flavour is not None
        summary.format = flavour or OPENAI_CHAT
        self.records = 0
        self.located: dict[int, int] = {}
        self.conversation: _Conversation | None = None  # a file of messages, one a line

    def seen(self, flavour: str) -> None:
        if not self.decided:
            self.decided = True
            self.summary.format = flavour

    def run(self, lines: Lines, tick: Tick) -> int:
        """Read the remaining lines; returns the number of the last one."""
        number = 0
        for number, line in lines:
            value = parse(line, number, self.report, arrays=True)
            if value is not SKIP:
                self.take(number, value)
            if not number % PROGRESS_EVERY:
                tick()
        return number

    def take(self, number: int, value: Any) -> None:
        """One JSONL line: a message of the file's conversation, or records."""
        if isinstance(value, dict) and "messages" not in value and is_item(value):
            if self.conversation is None:
                self.conversation = _Conversation(self, self.summary.path, "run-0")
            self.conversation.message(value, "", number)
            return
        self._records(value, number)

    def take_document(self, value: Any, located: dict[int, int], number: int) -> None:
        """A whole JSON document; ``located`` gives containers' lines (``decode_located``)."""
        self.located = located
        try:
            self.take(number, value)
        finally:
            self.located = {}

    def _line(self, value: object, default: int) -> int:
        return self.located.get(id(value), default)

    def _records(self, value: Any, number: int) -> None:
        if isinstance(value, list) and value and not any(is_message(item) for item in value):
            # Not a conversation's messages: a list of conversations.
            for index, record in enumerate(value):
                self._record(record, f"[{index}]", self._line(record, number))
        else:
            self._record(value, "", number)

    def _record(self, record: Any, where: str, line: int) -> None:
        index = self.records
        self.records += 1
        found = conversation_of(record)
        if isinstance(found, str):
            self.report(line, f"{where}: {found}" if where else found)
            return
        messages, key = found
        session = session_of(record)
        if session is None:
            session = f"{self.summary.path}#{index}"
        conversation = _Conversation(self, session, f"run-{index}")
        prefix = field(where, key) if key else where
        for place, message in enumerate(messages):
            at = field(prefix, f"[{place}]")
            conversation.message(message, at, self._line(message, line))
        conversation.end()

    def finish(self) -> None:
        if self.conversation is not None:
            self.conversation.end()

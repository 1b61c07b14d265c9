"""How is a pi / OpenClaw session transcript read? Tool calls paired with their results."""

from __future__ import annotations

from array import array
from typing import Any

from ..batch import CallTableBuilder
from ._pairing import Pairing
from ._reader import (
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

__all__ = ["PiReader"]


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


class PiReader(Reader):
    """pi / OpenClaw session transcripts: tool calls paired with their results, runs per prompt.

    The scope's session is the id of the ``session`` header line, else the file's
    path; a new run (``run-1``, ``run-2``, ...) starts at each user message, and
    calls before the first one belong to ``run-0``.
    """

    def __init__(
        self, builder: CallTableBuilder, lines: array[int], report: Problems, summary: FileSummary
    ) -> None:
        super().__init__(builder, lines, report, summary)
        self.session = summary.path
        self.run_number = 0
        self.pairing = Pairing(builder, lines, report, summary)

    @property
    def run_id(self) -> str:
        return f"run-{self.run_number}"

    def run(self, lines: Lines, tick: Tick) -> int:
        """Read the remaining lines; returns the number of the last one."""
        number = 0
        for number, line in lines:
            entry = parse(line, number, self.report)
            if entry is not SKIP:
                self.take(number, entry)
            if not number % PROGRESS_EVERY:
                tick()
        return number

    def take(self, number: int, entry: dict[str, Any]) -> None:
        kind = entry.get("type")
        if kind is None:
            self.report(number, "type: missing")
        elif not isinstance(kind, str):
            self.report(number, f"type: expected a string, got {json_type(kind)}")
        elif kind == "message":
            self._message(number, entry.get("message"))
        elif kind == "compaction":
            self.pairing.compaction(self.session, self.run_id)
        elif kind == "session":
            session = entry.get("id")
            if not isinstance(session, str) or not session:
                self.report(number, "id: expected the session id, a non-empty string")
                return
            # A header mid-file starts another session (files joined together).
            self.pairing.flush(everything=True)
            self.session = session
            self.run_number = 0
        # Any other entry (model_change, thinking_level_change, custom, label, ...)
        # says nothing about tool calls.

    def _message(self, number: int, message: object) -> None:
        if not isinstance(message, dict):
            self.report(number, f"message: expected an object, got {json_type(message)}")
            return
        role = message.get("role")
        if not isinstance(role, str):
            self.report(number, "message.role: expected a string")
        elif role == "user":
            self.pairing.flush(everything=True)
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
            calls.append((name, block.get("arguments", {}), call_id))
        for name, args, call_id in calls:
            self.pairing.call(number, name, args, call_id, self.session, self.run_id)

    def _result(self, number: int, message: dict[str, Any]) -> None:
        call_id = message.get("toolCallId")
        if not isinstance(call_id, str):
            self.report(number, "message.toolCallId: expected a string")
            return
        if message.get("isError") is True:
            self.pairing.answer(call_id, error=_error_text(message.get("content")))
        else:
            result = {"content": message.get("content"), "details": message.get("details")}
            self.pairing.answer(call_id, result=result)

    def finish(self) -> None:
        self.pairing.flush(everything=True)

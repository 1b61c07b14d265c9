"""How is a pi / OpenClaw session transcript read? Tool calls paired with their results."""

from __future__ import annotations

from array import array
from collections import deque
from typing import Any

from .._outcome import UNSET
from ..batch import CallTableBuilder
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
        self.queue: deque[_Call | _Compaction] = deque()
        self.waiting: dict[str, deque[_Call]] = {}

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
            self.report(number, f"message: expected an object, got {json_type(message)}")
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

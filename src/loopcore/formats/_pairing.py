"""How is a transcript's tool call paired with its answer? Calls wait, in order, for their results.

A transcript (pi, or a chat conversation) writes a tool call in one message
and its result in a later one, matched by the call's id. The table needs each
call with its outcome, in the order the calls were made: so a call waits in a
queue until its answer comes, and the calls at the front of the queue whose
answers are known are added. At the end of a run (or of the file) everything
still waiting is added without an outcome and counted as unanswered; an
answer whose id no waiting call has is counted as answering no call.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Hashable
from typing import Any

from .._outcome import UNSET
from ..batch import CallTableBuilder
from ._reader import FileSummary, Problems, Reader

__all__ = ["Pairing", "PendingCall"]


class PendingCall:
    """A tool call waiting for its outcome."""

    __slots__ = ("args", "call_id", "done", "error", "line", "name", "result", "run_id", "session")

    def __init__(
        self, line: int, name: str, args: Any, call_id: str, session: Hashable, run_id: str
    ) -> None:
        self.line = line
        self.name = name
        self.args = args
        self.call_id = call_id
        self.session = session
        self.run_id = run_id
        self.result: Any = UNSET
        self.error: Any = UNSET
        self.done = False


class _Compaction:
    __slots__ = ("run_id", "session")

    def __init__(self, session: Hashable, run_id: str) -> None:
        self.session = session
        self.run_id = run_id


class Pairing(Reader):
    """Calls waiting for their answers, added to the table in the order they were made.

    It writes to what its reader writes to (the table, each row's line, the
    reports, the file's counts): a ``Reader`` of its own over the same.
    """

    def __init__(
        self, builder: CallTableBuilder, lines: array[int], report: Problems, summary: FileSummary
    ) -> None:
        super().__init__(builder, lines, report, summary)
        self.queue: deque[PendingCall | _Compaction] = deque()
        self.waiting: dict[str, deque[PendingCall]] = {}

    def call(
        self, line: int, name: str, args: Any, call_id: str, session: Hashable, run_id: str
    ) -> None:
        """A tool call made at ``line``: it waits for the answer with its id."""
        call = PendingCall(line, name, args, call_id, session, run_id)
        self.queue.append(call)
        self.waiting.setdefault(call_id, deque()).append(call)

    def compaction(self, session: Hashable, run_id: str) -> None:
        """A context compaction, after the calls made so far."""
        self.queue.append(_Compaction(session, run_id))
        self.flush()

    def answer(self, call_id: str, *, result: Any = UNSET, error: Any = UNSET) -> None:
        """The outcome of the oldest waiting call with this id (or one answer to no call)."""
        waiting = self.waiting.get(call_id)
        if not waiting:
            self.summary.orphan_results += 1
            return
        call = waiting.popleft()
        if not waiting:
            del self.waiting[call_id]
        call.result = result
        call.error = error
        call.done = True
        self.flush()

    def flush(self, everything: bool = False) -> None:
        """Add the calls at the front of the queue whose outcome is known (or all of them)."""
        queue = self.queue
        while queue:
            item = queue[0]
            if isinstance(item, _Compaction):
                self.builder.add_compaction(session=item.session, run_id=item.run_id)
            elif item.done or everything:
                if not item.done:
                    self.summary.unanswered += 1
                self._add(item)
            else:
                return
            queue.popleft()
        if everything:
            self.waiting.clear()

    def _add(self, call: PendingCall) -> None:
        try:
            self.builder.add(
                call.name,
                call.args,
                result=call.result,
                error=call.error,
                tool_call_id=call.call_id,
                session=call.session,
                run_id=call.run_id,
            )
        except (TypeError, ValueError) as exc:  # pragma: no cover - every field is checked first
            self.report(call.line, str(exc))
            return
        self.row_lines.append(call.line)

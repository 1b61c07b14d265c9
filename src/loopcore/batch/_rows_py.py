"""How does one call become a row of a ``CallTable``? (reference twin of the row builder)

``Rows`` is the part of a ``CallTableBuilder`` that runs once per call: the
call's scope looked up, its call and outcome hashed with the chosen outcome
twin, its row appended to the builder's packed columns; and the loop of the
msgspec reading path (``formats._fast``) that feeds it. The compiled twin
(``_rows_c``) does the same in C, and is held equal to this one row for row.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any

from .. import _outcome
from .._records import KIND_TERMINAL_EXEC, KIND_VETO

if TYPE_CHECKING:
    from ._table import CallTableBuilder

__all__ = ["IMPLEMENTATION", "Rows"]

IMPLEMENTATION = "python"

#: Session and run id types ``add_checked`` looks up as read (hashed and compared in C).
_CACHED = frozenset({str, int, type(None)})
_RUNS = frozenset({str, type(None)})


class Rows:
    """The rows of one builder: its columns, scopes and names, appended to call by call."""

    __slots__ = ("builder",)

    def __init__(self, builder: CallTableBuilder) -> None:
        self.builder = builder

    def add_checked(
        self,
        tool_name: str,
        args: Any,
        result: Any,
        error: Any,
        session: Hashable,
        run_id: str | None,
    ) -> None:
        """``CallTableBuilder.add`` once ``tool_name`` is known to be a ``str``."""
        builder = self.builder
        key = (session, run_id)
        cached = type(session) in _CACHED and type(run_id) in _RUNS
        scope = builder._seen.get(key) if cached else None
        if scope is None:
            scope = builder._scope(session, run_id)
            if cached:
                builder._seen[key] = scope
        self.row(scope, tool_name, args, result, error)

    def row(self, scope: int, tool_name: str, args: Any, result: Any, error: Any) -> int:
        """Fingerprint one call and its outcome into a new row of ``scope``; its index."""
        builder = self.builder
        # The chooser's functions as they are now: a builder made under ``use_twin``
        # hashes with that twin.
        args_hash = _outcome.hash_call(tool_name, args)
        result_hash, unknown, kind, identity, no_progress = _outcome.outcome_of(
            tool_name,
            args,
            result=result,
            error=error,
            normalizers=builder._normalizers,
            send_tools=builder._send_tools,
        )
        tool = builder._tool_hashes.get(tool_name)
        if tool is None:
            tool = builder._name(tool_name)
        hashes = (
            tool,
            args_hash,
            result_hash or 0,
            0 if unknown is None else builder._name(unknown),
            identity or 0,
        )
        flags = (
            result_hash is not None,
            unknown is not None,
            _outcome.is_known_poll(tool_name, args),
            scope in builder._pending,
            kind == KIND_VETO,
            kind == KIND_TERMINAL_EXEC,
            bool(no_progress),
            False,
        )
        # Everything that could fail has run: the three columns grow together.
        builder._pending.discard(scope)
        builder._scope_column.append(scope)
        builder._hashes.extend(hashes)
        builder._flags.extend(flags)
        return len(builder._scope_column) - 1

    def read(
        self,
        lines: Iterator[tuple[int, bytes]],
        tick: Callable[[], None],
        row_lines: array[int],
        slow: Callable[[int, bytes], None],
        decoder: tuple[
            Callable[[bytes], Any], tuple[type[BaseException], ...], Any, Any, int, type
        ],
    ) -> int:
        """The msgspec reading loop (see ``formats._fast.read_fast``); the last line's number.

        ``decoder`` is ``(decode, errors, missing, unset, every, event_type)``: the line
        decoder, what it raises, its missing-field value, the outcome's ``UNSET``, how
        many lines pass between two ``tick`` calls, and the type ``decode`` returns.
        """
        decode, errors, missing, unset, every, _ = decoder
        keep = row_lines.append
        number = 0
        for number, line in lines:
            try:
                event = decode(line)
            except errors:
                slow(number, line)
                continue
            tool = event.tool
            args = event.args
            ts = event.ts
            call_id = event.tool_call_id
            session = event.session
            if (
                event.type != "call"
                or type(event.type) is not str
                or type(tool) is not str
                or args is missing
                or not (ts is None or type(ts) in (int, float, str))
                or not (call_id is None or type(call_id) is str)
                or (type(session) is float and session != session)
            ):
                slow(number, line)  # rare shapes: the reference judges them, and words the reports
                continue
            result = event.result
            error = event.error
            try:
                self.add_checked(
                    tool,
                    args,
                    unset if result is missing else result,
                    unset if error is missing else error,
                    session,
                    event.run_id,
                )
            except (TypeError, ValueError):
                slow(number, line)  # e.g. a bad run_id: the reference words the report
                continue
            keep(number)
            if not number % every:
                tick()
        return number

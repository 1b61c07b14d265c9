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

from .. import _fingerprint, _outcome
from .._records import KIND_TERMINAL_EXEC, KIND_VETO
from .._scopes import scope_key

if TYPE_CHECKING:
    from ._table import CallTableBuilder

__all__ = ["IMPLEMENTATION", "Rows", "name_hash"]

IMPLEMENTATION = "python"

#: Session and run id types ``add_checked`` looks up as read (hashed and compared in C).
_CACHED = frozenset({str, int, type(None)})
_RUNS = frozenset({str, type(None)})


def name_hash(name: str) -> int:
    """The hash a tool name or unknown-tool name is kept under in a ``CallTable``."""
    return _fingerprint.fingerprint(name, b"loopcore:name\x00")


class Rows:
    """The rows of one builder: its columns, scopes and names, appended to call by call.

    It holds the builder's containers, not the builder (which holds it): no cycle,
    so a builder and its columns are freed as soon as it is dropped.
    """

    __slots__ = (
        "flags",
        "hashes",
        "names",
        "normalizers",
        "pending",
        "scope_column",
        "scope_ids",
        "seen",
        "send_tools",
        "tool_hashes",
    )

    def __init__(self, builder: CallTableBuilder) -> None:
        # The builder never rebinds these (it grows them in place).
        self.scope_column = builder._scope_column
        self.hashes = builder._hashes
        self.flags = builder._flags
        self.scope_ids = builder._scope_ids
        self.names = builder._names
        self.tool_hashes = builder._tool_hashes
        self.pending = builder._pending
        self.seen = builder._seen
        self.normalizers = builder._normalizers
        self.send_tools = builder._send_tools

    def scope(self, session: Hashable, run_id: object) -> int:
        """The id of the scope ``(session, run_id)``, numbered in order of first appearance."""
        key = scope_key(session, run_id)  # type: ignore[arg-type]
        scope = self.scope_ids.get(key)
        if scope is None:
            scope = self.scope_ids[key] = len(self.scope_ids)
        return scope

    def name(self, name: str) -> int:
        """The hash of a tool name, kept with the name for messages."""
        found = self.tool_hashes.get(name)
        if found is None:
            found = self.tool_hashes[name] = name_hash(name)
            self.names.setdefault(found, name)
        return found

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
        key = (session, run_id)
        cached = type(session) in _CACHED and type(run_id) in _RUNS
        scope = self.seen.get(key) if cached else None
        if scope is None:
            scope = self.scope(session, run_id)
            if cached:
                self.seen[key] = scope
        self.row(scope, tool_name, args, result, error)

    def row(self, scope: int, tool_name: str, args: Any, result: Any, error: Any) -> int:
        """Fingerprint one call and its outcome into a new row of ``scope``; its index."""
        # The chooser's functions as they are now: a builder made under ``use_twin``
        # hashes with that twin.
        args_hash = _outcome.hash_call(tool_name, args)
        result_hash, unknown, kind, identity, no_progress = _outcome.outcome_of(
            tool_name,
            args,
            result=result,
            error=error,
            normalizers=self.normalizers,
            send_tools=self.send_tools,
        )
        tool = self.tool_hashes.get(tool_name)
        if tool is None:
            tool = self.name(tool_name)
        hashes = (
            tool,
            args_hash,
            result_hash or 0,
            0 if unknown is None else self.name(unknown),
            identity or 0,
        )
        flags = (
            result_hash is not None,
            unknown is not None,
            _outcome.is_known_poll(tool_name, args),
            scope in self.pending,
            kind == KIND_VETO,
            kind == KIND_TERMINAL_EXEC,
            bool(no_progress),
            False,
        )
        # Everything that could fail has run: the three columns grow together.
        self.pending.discard(scope)
        self.scope_column.append(scope)
        self.hashes.extend(hashes)
        self.flags.extend(flags)
        return len(self.scope_column) - 1

    def read(
        self,
        lines: Iterator[tuple[int, bytes]],
        tick: Callable[[], None],
        row_lines: array[int],
        slow: Callable[[int, bytes], None],
        decoder: tuple[Any, ...],
    ) -> int:
        """The msgspec reading loop (see ``formats._fast.read_fast``); the last line's number."""
        return read_events(self.add_checked, lines, tick, row_lines, slow, decoder)


def read_events(
    add: Callable[[str, Any, Any, Any, Any, Any], object],
    lines: Iterator[tuple[int, bytes]],
    tick: Callable[[], None],
    row_lines: array[int],
    slow: Callable[[int, bytes], None],
    decoder: tuple[Any, ...],
) -> int:
    """The msgspec reading loop, each call's row made by ``add`` (a ``Rows.add_checked``);
    the last line's number. The compiled twin runs its own loop, and this one where
    it cannot read the event's fields at their slots.

    ``decoder`` is ``(decode, errors, missing, unset, every, event_type, raw)``: the
    line decoder, what it raises, its missing-field value, the outcome's ``UNSET``,
    how many lines pass between two ``tick`` calls, the type ``decode`` returns, and
    the raw-args decoders (``formats._fast``), which only the compiled loop uses.
    """
    decode, errors, missing, unset, every = decoder[:5]
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
            add(
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

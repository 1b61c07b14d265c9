"""How is a recorded trace turned into columns of hashes for the batch scans? (SPEC §7)

A ``CallTable`` holds one row per call of a trace, already fingerprinted: the
numbers a gateway's ring would keep for it (SPEC §3, §8.0: hashes, outcome kind,
failure identity, no-progress flag), plus the flags the scans need.
``CallTableBuilder`` fills one from call events, hashing each call and outcome
exactly as the per-call path does (the chosen outcome twin), once; the work done
per call (a row, and the msgspec reading loop) is its rows twin's (``_rows``).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from .._outcome import (
    UNSET,
    Normalizer,
    check_call_id,
    check_normalizers,
    check_send_tools,
    check_tool_name,
)
from .._records import KIND_TERMINAL_EXEC, KIND_VETO
from .._scopes import ScopeKey, session_of
from ._columns import check_kinds, checked_column, scope_keys
from ._rows import new_rows
from ._rows_py import name_hash

__all__ = [
    "EVENT_FIELDS",
    "WAIT_HASH",
    "Block",
    "CallTable",
    "CallTableBuilder",
    "EventError",
    "PartRows",
    "TablePart",
    "name_hash",
]

#: The fields a call event may carry (``type`` only to mark a compaction).
EVENT_FIELDS = frozenset(
    {"type", "tool", "args", "result", "error", "tool_call_id", "session", "run_id", "ts"}
)


class EventError(ValueError):
    """A call event is malformed; the message names the field."""


#: The tool hash of ``wait``, whose known-poll critical row has its own threshold (SPEC §8.8).
WAIT_HASH = name_hash("wait")


U64 = npt.NDArray[np.uint64]
Flags = npt.NDArray[np.bool_]
Bools = Flags
Ints = npt.NDArray[np.int64]


#: Columns of ``CallTable.hashes`` and ``CallTable.flags`` (eight flags: one 64-bit word a row).
TOOL, ARGS, RESULT, UNKNOWN, IDENTITY = range(5)
HASH_COLUMNS = 5
HAS_RESULT, HAS_UNKNOWN, KNOWN_POLL, COMPACTION, VETO, TERMINAL, NO_PROGRESS = range(7)
FLAG_COLUMNS = 8
#: What a call's outcome sets; a veto has none of it (SPEC §8.1).
_OUTCOME_FLAGS = np.array([HAS_RESULT, HAS_UNKNOWN, TERMINAL, NO_PROGRESS], np.intp)


class CallTable:
    """One row per call, in trace order; every column has the same length.

    ``scope`` indexes ``scopes`` (the ``(session, run_id)`` keys). Hash columns
    are meaningful only where their mask is set (``identity_hash`` where the
    call ended in a terminal exec failure). ``veto`` marks a call whose recorded
    outcome is the detector's own block (SPEC §8.1), ``terminal_exec`` one whose
    outcome is a terminal exec failure (§8.4), ``no_progress`` one whose outcome
    proves nothing changed (an error, a write no-op: §8.0). ``compaction`` marks
    the first call of a scope after a context compaction (it arms the
    post-compaction guard). ``names`` maps tool and unknown-tool hashes back to
    names, for messages; a hash without a name is shown as ``tool#<hex>``, except
    ``WAIT_HASH``, which is always the tool ``wait``.

    The hashes are stored row by row (``hashes``, shape ``(n, 5)``) and so are
    the flags, because the scans visit calls scope by scope, in an order far
    from the trace's: one call's numbers then share a cache line. The named
    columns are read-only views of them.
    """

    __slots__ = ("flags", "hashes", "names", "scope", "scopes")

    def __init__(
        self,
        scope: npt.NDArray[np.int64],
        hashes: npt.NDArray[np.uint64],
        flags: npt.NDArray[np.bool_],
        scopes: tuple[ScopeKey, ...],
        names: Mapping[int, str],
    ) -> None:
        # Callers build these through ``from_columns`` or ``CallTableBuilder``, which check them.
        for column in (scope, hashes, flags):
            column.flags.writeable = False
        self.scope = scope
        self.hashes = hashes
        self.flags = flags
        self.scopes = scopes
        # The verdict table knows ``wait`` by its name (SPEC §8.8): so does every table.
        self.names = {WAIT_HASH: "wait", **names}

    tool_hash = property(lambda self: self.hashes[:, TOOL], doc="tool name hashes (uint64)")
    args_hash = property(lambda self: self.hashes[:, ARGS], doc="call hashes (uint64)")
    result_hash = property(lambda self: self.hashes[:, RESULT], doc="outcome hashes (uint64)")
    unknown_hash = property(lambda self: self.hashes[:, UNKNOWN], doc="unknown-tool name hashes")
    identity_hash = property(
        lambda self: self.hashes[:, IDENTITY], doc="terminal exec failure identities (§8.4)"
    )
    has_result = property(lambda self: self.flags[:, HAS_RESULT], doc="the call has an outcome")
    has_unknown = property(lambda self: self.flags[:, HAS_UNKNOWN], doc="it named an unknown tool")
    known_poll = property(lambda self: self.flags[:, KNOWN_POLL], doc="it is a known poll")
    compaction = property(lambda self: self.flags[:, COMPACTION], doc="first call after compaction")
    veto = property(lambda self: self.flags[:, VETO], doc="its outcome is a loop veto (§8.1)")
    terminal_exec = property(
        lambda self: self.flags[:, TERMINAL], doc="its outcome is a terminal exec failure (§8.4)"
    )
    no_progress = property(
        lambda self: self.flags[:, NO_PROGRESS], doc="its outcome proves no progress (§8.0)"
    )

    @classmethod
    def from_columns(
        cls,
        *,
        scope: npt.ArrayLike,
        tool_hash: npt.ArrayLike,
        args_hash: npt.ArrayLike,
        result_hash: npt.ArrayLike | None = None,
        has_result: npt.ArrayLike | None = None,
        unknown_hash: npt.ArrayLike | None = None,
        has_unknown: npt.ArrayLike | None = None,
        known_poll: npt.ArrayLike | None = None,
        compaction: npt.ArrayLike | None = None,
        kind: npt.ArrayLike | None = None,
        identity_hash: npt.ArrayLike | None = None,
        no_progress: npt.ArrayLike | None = None,
        scopes: Sequence[ScopeKey] | None = None,
        names: Mapping[int, str] | None = None,
    ) -> CallTable:
        """A table from pre-fingerprinted columns, checked; optional columns default to off.

        ``scope`` holds non-negative scope ids indexing ``scopes``; without
        ``scopes`` the id ``i`` stands for the scope ``(None, "scope-i")``. Hash
        columns take unsigned or signed 64-bit values (a signed one keeps its bits).
        ``kind`` holds outcome kind codes (``loopcore._records.KIND_*``: 0 none,
        1 loop veto, 2 terminal exec failure, 3 argument validation); a veto has
        no result and no unknown tool, a terminal failure has a result.
        """
        scope_ids = checked_column("scope", scope, np.int64, None)
        n = len(scope_ids)
        if n and scope_ids.min() < 0:
            raise ValueError(f"scope: expected non-negative scope ids, got {scope_ids.min()}")
        if scopes is None:
            # Ids may be sparse (database keys): renumber them densely, keep them in the names.
            used, scope_ids = np.unique(scope_ids, return_inverse=True)
            scope_ids = scope_ids.astype(np.int64).reshape(n)
            keys: tuple[ScopeKey, ...] = tuple((None, f"scope-{i}") for i in used.tolist())
        else:
            keys = scope_keys(scopes)
            count = int(scope_ids.max()) + 1 if n else 0
            if len(keys) < count:
                raise ValueError(f"scopes: expected at least {count} scope keys, got {len(keys)}")
        hashes = np.zeros((n, HASH_COLUMNS), np.uint64)
        for column, name, values in (
            (TOOL, "tool_hash", tool_hash),
            (ARGS, "args_hash", args_hash),
            (RESULT, "result_hash", result_hash),
            (UNKNOWN, "unknown_hash", unknown_hash),
            (IDENTITY, "identity_hash", identity_hash),
        ):
            if values is not None or column in (TOOL, ARGS):
                hashes[:, column] = checked_column(name, values, np.uint64, n)
        flags = np.zeros((n, FLAG_COLUMNS), np.bool_)
        for column, name, values in (
            (HAS_RESULT, "has_result", has_result),
            (HAS_UNKNOWN, "has_unknown", has_unknown),
            (KNOWN_POLL, "known_poll", known_poll),
            (COMPACTION, "compaction", compaction),
            (NO_PROGRESS, "no_progress", no_progress),
        ):
            if values is not None:
                flags[:, column] = checked_column(name, values, np.bool_, n)
        if kind is not None:
            kinds = checked_column("kind", kind, np.int64, n)
            check_kinds(kinds, flags[:, HAS_RESULT], flags[:, HAS_UNKNOWN])
            flags[:, VETO] = kinds == KIND_VETO
            flags[:, TERMINAL] = kinds == KIND_TERMINAL_EXEC
        return cls(scope_ids, hashes, flags, keys, dict(names or {}))

    def __len__(self) -> int:
        return len(self.scope)

    def name(self, hash_value: int) -> str:
        """The name behind a tool or unknown-tool hash, or ``tool#<hex>``."""
        return self.names.get(hash_value) or f"tool#{hash_value:016x}"

    def __repr__(self) -> str:
        return f"CallTable({len(self)} calls, {len(self.scopes)} scopes)"


class Block(NamedTuple):
    """Rows of whole scopes (or of scope segments), in time order, as the batch kernels read
    them: a gateway's records of those calls."""

    tool: U64
    args: U64
    result: U64
    unknown: U64
    identity: U64
    has_result: Bools
    has_unknown: Bools
    veto: Bools
    terminal: Bools
    stale: Bools
    compaction: Bools
    #: each row's position in its scope (0 starts a scope)
    pos: Ints

    @classmethod
    def gather(cls, table: CallTable, rows: Ints, pos: Ints, vetoed: Bools | None = None) -> Block:
        """The table's ``rows``; those marked in ``vetoed`` become veto records (SPEC §8.1)."""
        # One gather of whole rows each: the calls of a block lie scattered over the table.
        hashes = np.take(table.hashes, rows, axis=0)
        words = table.flags.view(np.uint64).reshape(-1)
        flags = np.take(words, rows).view(np.bool_).reshape(-1, FLAG_COLUMNS)
        if vetoed is not None and vetoed.any():
            # The call never ran: no outcome, only the veto (tool and args hash stay).
            flags[np.ix_(vetoed, _OUTCOME_FLAGS)] = False
            flags[vetoed, VETO] = True
        return cls(
            hashes[:, TOOL],
            np.ascontiguousarray(hashes[:, ARGS]),
            hashes[:, RESULT],
            hashes[:, UNKNOWN],
            hashes[:, IDENTITY],
            flags[:, HAS_RESULT],
            flags[:, HAS_UNKNOWN],
            flags[:, VETO],
            flags[:, TERMINAL],
            flags[:, NO_PROGRESS],
            flags[:, COMPACTION],
            pos,
        )


class TablePart(NamedTuple):
    """The rows a builder collected, as picklable values: one piece of a table read elsewhere
    (a worker process), to be appended to another builder with ``CallTableBuilder.extend``."""

    #: the builder's scope keys in id order, sessions as the host gave them
    scopes: list[tuple[Hashable, str | None]]
    scope: bytes  # int64 scope ids, one a row
    hashes: bytes  # uint64, HASH_COLUMNS a row
    flags: bytes  # uint8, FLAG_COLUMNS a row
    names: dict[int, str]
    #: scope ids whose compaction still waits for their next call
    pending: list[int]


class PartRows(NamedTuple):
    """The rows of a ``TablePart`` as ``CallTableBuilder.take`` numbered them: the scope ids
    of the builder (int64), the hashes (uint64, HASH_COLUMNS a row) and the flags (uint8,
    FLAG_COLUMNS a row)."""

    scope: npt.NDArray[np.int64]
    hashes: npt.NDArray[np.uint64]
    flags: npt.NDArray[np.uint8]


class CallTableBuilder:
    """Collects call events, fingerprinted as they arrive, into a ``CallTable``.

    Each call is what a gateway records for it when it runs: one row, with
    the outcome's hash, kind, failure identity and no-progress flag when it has
    an outcome (a loop veto outcome is kept as a veto, SPEC §8.1).
    """

    def __init__(
        self,
        *,
        normalizers: Mapping[str, Normalizer] | None = None,
        send_tools: Iterable[str] = (),
    ) -> None:
        self._normalizers = check_normalizers(normalizers)
        self._send_tools = check_send_tools(send_tools)
        self._scope_ids: dict[ScopeKey, int] = {}
        self._names: dict[int, str] = {}
        self._tool_hashes: dict[str, int] = {}
        self._pending: set[int] = set()
        # The table's rows as packed machine values (8 + 40 + 8 bytes a call, not the
        # hundreds that Python ints in lists take); a missing result, unknown name or
        # identity is 0 with its flag off. The compiled rows grow them in C, which does
        # not check for exported buffers: nothing here keeps a view of them (``build``
        # and ``part`` copy).
        self._scope_column = array("q")
        self._hashes = array("Q")
        self._flags = array("B")
        # (session, run_id) as read -> scope id, for the sessions and run ids of exact
        # plain types: ``add_checked`` then skips ``scope_key`` on a scope it has seen.
        self._seen: dict[tuple[object, object], int] = {}
        # The per-call work (``_rows``): made last, it holds the columns above.
        self._rows = new_rows(self)

    def __len__(self) -> int:
        return len(self._scope_column)

    def _scope(self, session: Hashable, run_id: object) -> int:
        return self._rows.scope(session, run_id)

    def add(
        self,
        tool_name: str,
        args: Any,
        *,
        result: Any = UNSET,
        error: Any = UNSET,
        tool_call_id: str | None = None,
        session: Hashable = None,
        run_id: str | None = None,
    ) -> int:
        """Fingerprint one call and its outcome; returns its row index."""
        check_tool_name(tool_name)
        check_call_id(tool_call_id)
        return self._row(self._scope(session, run_id), tool_name, args, result, error)

    def add_checked(
        self,
        tool_name: str,
        args: Any,
        result: Any,
        error: Any,
        session: Hashable,
        run_id: str | None,
    ) -> None:
        """``add`` for a reader that has checked ``tool_name`` is a ``str`` (and the call id,
        not kept here): the same row, made with fewer Python steps (a large replay's loop)."""
        self._rows.add_checked(tool_name, args, result, error, session, run_id)

    def _row(self, scope: int, tool_name: str, args: Any, result: Any, error: Any) -> int:
        """Fingerprint one call and its outcome into a new row of ``scope``; its index."""
        return self._rows.row(scope, tool_name, args, result, error)

    def add_compaction(self, *, session: Hashable = None, run_id: str | None = None) -> None:
        """A context compaction in this scope: the guard is armed for its next calls."""
        self._pending.add(self._scope(session, run_id))

    def add_event(self, event: Mapping[str, Any]) -> int | None:
        """Add one event mapping (see ``scan``); returns its row, or None for a compaction.

        Raises ``EventError`` naming the field when the event is malformed.
        """
        if not isinstance(event, Mapping):
            raise EventError(f"event: expected a mapping, got {type(event).__name__}")
        if not EVENT_FIELDS.issuperset(event):
            unknown_fields = [str(k) for k in event if k not in EVENT_FIELDS]
            known = ", ".join(sorted(EVENT_FIELDS))
            raise EventError(f"{unknown_fields[0]}: unknown event field (known: {known})")
        kind = event.get("type", "call")
        session = event.get("session")
        if isinstance(session, float) and session != session:
            # NaN never equals itself: every call would start a scope of its own.
            raise EventError("session: NaN is not a usable session id")
        run_id = event.get("run_id")
        try:
            if kind == "compaction":
                self.add_compaction(session=session, run_id=run_id)
                return None
            if kind != "call":
                raise EventError(f"type: expected 'call' or 'compaction', got {kind!r}")
            if "tool" not in event:
                raise EventError("tool: missing")
            if "args" not in event:
                raise EventError("args: missing")
            ts = event.get("ts")
            if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float, str))):
                raise EventError(f"ts: expected a number or a string, got {type(ts).__name__}")
            return self.add(
                event["tool"],
                event["args"],
                result=event.get("result", UNSET),
                error=event.get("error", UNSET),
                tool_call_id=event.get("tool_call_id"),
                session=session,
                run_id=run_id,
            )
        except TypeError as exc:
            # The per-call checks name the argument; an event names the field.
            message = str(exc)
            if message.startswith("tool_name:"):
                message = "tool:" + message[len("tool_name:") :]
            raise EventError(message) from None

    def part(self) -> TablePart:
        """Everything added so far, as a ``TablePart`` (for ``extend`` in another process)."""
        return TablePart(
            [(session_of(key), key[1]) for key in self._scope_ids],
            self._scope_column.tobytes(),
            self._hashes.tobytes(),
            self._flags.tobytes(),
            dict(self._names),
            sorted(self._pending),
        )

    def extend(self, part: TablePart) -> None:
        """Append the rows of ``part``, read after everything added so far (say, the next
        piece of the same file): the table is the one adding its calls here would build.

        Scopes are matched by key and numbered in order of first appearance; a
        compaction still pending here arms the part's first call of that scope.
        """
        scope, _, flags = self.take(part)
        self._scope_column.frombytes(scope.tobytes())
        self._hashes.frombytes(part.hashes)
        self._flags.frombytes(flags.tobytes())

    def take(self, part: TablePart) -> PartRows:
        """``extend`` without appending: the part's rows, its scopes numbered here and its
        compactions armed, to be handed to ``build`` after the rows of this builder and
        of the parts taken before it (the scopes, names and pending compactions are
        this builder's now, as ``extend`` leaves them). A merge of many parts so joins
        each column once, instead of growing it part by part."""
        local = np.array(
            [self._scope(session, run_id) for session, run_id in part.scopes], np.int64
        )
        scope = np.frombuffer(part.scope, np.int64)
        flags = np.frombuffer(part.flags, np.uint8).reshape(-1, FLAG_COLUMNS)
        if len(scope) != len(flags) or len(part.hashes) != len(scope) * HASH_COLUMNS * 8:
            raise ValueError("part: its columns differ in length")
        mapped = local[scope] if len(scope) else scope
        used, first = np.unique(scope, return_index=True)
        armed = [
            int(row)
            for id_, row in zip(local[used].tolist(), first.tolist(), strict=True)
            if id_ in self._pending
        ]
        if armed:
            flags = flags.copy()
            flags[armed, COMPACTION] = 1
        self._pending.difference_update(local[used].tolist())
        self._pending.update(local[part.pending].tolist() if part.pending else ())
        for hash_value, name in part.names.items():
            self._names.setdefault(hash_value, name)
        hashes = np.frombuffer(part.hashes, np.uint64).reshape(-1, HASH_COLUMNS)
        return PartRows(mapped.astype(np.int64, copy=False), hashes, flags)

    def build(self, taken: Sequence[PartRows] = ()) -> CallTable:
        """The table of everything added so far, followed by the rows of ``taken`` (parts
        given to ``take``, in the order taken); the builder can go on adding."""
        n = len(self._scope_column)
        scope = np.frombuffer(self._scope_column, np.int64)
        hashes = np.frombuffer(self._hashes, np.uint64).reshape(n, HASH_COLUMNS)
        flags = np.frombuffer(self._flags, np.uint8).reshape(n, FLAG_COLUMNS)
        if taken:
            # One copy of each column (the builder's own rows are copied too: the
            # compiled rows grow its arrays, so no view of them may stay).
            scope = np.concatenate([scope, *(rows.scope for rows in taken)])
            hashes = np.concatenate([hashes, *(rows.hashes for rows in taken)])
            flags = np.concatenate([flags, *(rows.flags for rows in taken)])
        else:
            scope = scope.copy()
            hashes = hashes.copy()
        scopes = tuple((session_of(key), key[1]) for key in self._scope_ids)
        return CallTable(scope, hashes, flags.astype(np.bool_), scopes, dict(self._names))

"""Where are a scope's recent calls kept, and what does one scan count? (SPEC §3-4, §8, Python twin)

A ``RingStore`` keeps, per scope key, a ring of the last ``history_size``
records and answers in hashes and numbers only: it appends calls and vetoes,
attaches outcomes, and scans a ring newest first for every count the verdict
table needs (``ScanStats``), or ``None`` ("quiet") when no count reaches the
alarm thresholds it is given, so the common call skips the table. It never
hashes a value, decides a verdict or calls back into the layers above. The
compiled twin keeps the same contract over fixed-width rows.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Collection, Hashable, Sequence
from typing import Any

from ._counts import ARGS as _ARGS
from ._counts import CALL_ID as _CALL_ID
from ._counts import IDENTITY as _IDENTITY
from ._counts import KIND as _KIND
from ._counts import RESULT as _RESULT
from ._counts import STALE as _STALE
from ._counts import TOOL as _TOOL
from ._counts import UNKNOWN as _UNKNOWN
from ._counts import churn_count, quiet, scan_window
from ._names import exact_str
from ._records import KIND_VETO, CallRecord, ScanStats, call_record
from ._scopes import ScopeKey, ScopeLock, ScopeTable

__all__ = ["IMPLEMENTATION", "RingStore", "scan_window"]

IMPLEMENTATION = "python"

_EMPTY = ScanStats()


def _record(tool: str, args_hash: int, call_id: str | None, now: float) -> list[Any]:
    return [tool, args_hash, call_id, now, None, None, 0, None, False]


def _complete(record: Sequence[Any]) -> bool:
    return record[_RESULT] is not None or record[_KIND] != 0


def _pending_match(
    ring: Sequence[list[Any]], tool: str, h: int, call_id: str | None
) -> list[Any] | None:
    """SPEC §9.1 (a)-(c): the pending record an outcome (or a reconcile) belongs to."""
    pending: list[list[Any]] = [r for r in reversed(ring) if not _complete(r) and r[_TOOL] == tool]
    same: list[list[Any]] = [r for r in pending if r[_ARGS] == h] if h is not None else pending
    if call_id is not None:
        for record in same:  # (a) the call with this id
            if record[_CALL_ID] == call_id:
                return record
        for record in same:  # (b) a call whose id was not known when it started
            if record[_CALL_ID] is None:
                return record
        if any(r[_CALL_ID] == call_id for r in ring if not _complete(r)):
            return None  # the id belongs to another call still running
    return same[0] if same else None  # (c)


class RingStore:
    """Per-scope rings of the last ``history_size`` records, at most ``max_scopes`` scopes.

    Keys are scope keys as ``_scopes.scope_key`` makes them. Every method takes
    the store's lock for its whole step, so concurrent callers never see half a
    record; the least recently used scope is evicted to make room for a new one.
    """

    __slots__ = ("_lock", "_rings", "evicted", "history_size")

    def __init__(self, history_size: int, max_scopes: int) -> None:
        if isinstance(history_size, bool) or not isinstance(history_size, int) or history_size < 1:
            raise ValueError(f"history_size: expected a positive integer, got {history_size!r}")
        self.history_size = history_size
        self._rings: ScopeTable[deque[list[Any]]] = ScopeTable(max_scopes)
        #: scopes evicted to make room (LRU), for ``stats()``
        self.evicted = 0
        # Store operations are compound (LRU touch, eviction, in-place fill): one
        # lock keeps them consistent across threads, and no host code runs under it.
        self._lock = ScopeLock()

    def __len__(self) -> int:
        return len(self._rings)

    @property
    def max_scopes(self) -> int:
        return self._rings.max_scopes

    def scan(
        self, key: ScopeKey, tool_name: str, args_hash: int, alarm: int = 0, unknown_alarm: int = 0
    ) -> ScanStats | None:
        """The counts for a call about to run, or None when none reaches its alarm."""
        with self._lock:
            stats = self._scan(key, tool_name, args_hash)
        return None if quiet(stats, alarm, unknown_alarm) else stats

    def scan_append(
        self,
        key: ScopeKey,
        tool_name: str,
        args_hash: int,
        tool_call_id: str | None,
        alarm: int,
        unknown_alarm: int,
    ) -> ScanStats | None:
        """``scan``; when quiet, the call is appended in the same step and None returned."""
        # Exact str: a str subclass's own methods (a ``__del__`` run when a record falls
        # out under the lock) never run in the store.
        tool_name, tool_call_id = exact_str(tool_name), exact_str(tool_call_id)
        with self._lock:
            stats = self._scan(key, tool_name, args_hash)
            if quiet(stats, alarm, unknown_alarm):
                self._append(key, _record(tool_name, args_hash, tool_call_id, time.time()))
                return None
        return stats

    def append(
        self,
        key: ScopeKey,
        tool_name: str,
        args_hash: int,
        tool_call_id: str | None,
        kind: int = 0,
    ) -> None:
        """Append a call without outcome (``kind``: a veto); the oldest falls out when full."""
        tool_name, tool_call_id = exact_str(tool_name), exact_str(tool_call_id)
        record = _record(tool_name, args_hash, tool_call_id, time.time())
        record[_KIND] = kind
        with self._lock:
            self._append(key, record)

    def attach(
        self,
        key: ScopeKey,
        tool_name: str,
        args_hash: int,
        tool_call_id: str | None,
        result_hash: int | None,
        unknown: str | None,
        kind: int = 0,
        identity: int | None = None,
        no_progress: bool = False,
    ) -> CallRecord:
        """Complete the pending record of this call (SPEC §9.1), or append one; return it.

        An outcome already recorded under this call id (SPEC §12.7), or a veto
        already recorded under it (§8.1), returns that record unchanged.
        """
        tool_name, tool_call_id = exact_str(tool_name), exact_str(tool_call_id)
        unknown = exact_str(unknown)
        now = time.time()
        with self._lock:
            ring = self._rings.get(key) or ()
            found = None
            if tool_call_id is not None:
                found = self._recorded(ring, tool_name, args_hash, tool_call_id, kind)
            if found is None:
                record = _pending_match(ring, tool_name, args_hash, tool_call_id)
                if record is None:
                    record = _record(tool_name, args_hash, tool_call_id, now)
                    self._append(key, record)
                elif tool_call_id is not None and record[_CALL_ID] is None:
                    record[_CALL_ID] = tool_call_id
                record[_RESULT] = result_hash
                record[_UNKNOWN] = unknown
                record[_KIND] = kind
                record[_IDENTITY] = identity
                record[_STALE] = bool(no_progress)
                found = record
            return call_record(key, found)

    @staticmethod
    def _recorded(
        ring: Sequence[list[Any]], tool: str, h: int, call_id: str, kind: int
    ) -> list[Any] | None:
        """The complete record this outcome repeats, if it was recorded already."""
        record: list[Any]
        for record in reversed(ring):
            if record[_CALL_ID] != call_id or not _complete(record):
                continue
            if kind == KIND_VETO:
                if record[_KIND] == KIND_VETO:
                    return record
            elif record[_TOOL] == tool and record[_ARGS] == h and record[_KIND] != KIND_VETO:
                return record
        return None

    def release(self, key: ScopeKey, tool_call_ids: Collection[str]) -> int:
        """Remove the pending records of these call ids (admitted, then skipped)."""
        # Exact strs in a set of our own: a host collection's ``__contains__`` never
        # runs under the lock.
        ids = frozenset(exact_str(i) for i in tool_call_ids if isinstance(i, str))
        with self._lock:
            ring = self._rings.get(key)
            if not ring:
                return 0
            kept = [r for r in ring if _complete(r) or r[_CALL_ID] not in ids]
            removed = len(ring) - len(kept)
            if removed:
                dead = list(ring)
                ring.clear()
                ring.extend(kept)
                self._lock.bury(dead)
            return removed

    def reconcile(
        self, key: ScopeKey, tool_name: str, args_hash: int, tool_call_id: str | None
    ) -> tuple[bool, bool, int, int]:
        """SPEC §8.7: re-hash the pending call a pre-call hook rewrote.

        Returns ``(found, changed, churn, variants)``: the churn count of the
        new hash over the records older than the call.
        """
        tool_name, tool_call_id = exact_str(tool_name), exact_str(tool_call_id)
        with self._lock:
            ring = self._rings.get(key)
            record = _pending_match(ring or (), tool_name, None, tool_call_id)  # type: ignore[arg-type]
            if ring is None or record is None:
                return False, False, 0, 0
            changed = record[_ARGS] != args_hash
            record[_ARGS] = args_hash
            older = list(ring)[: next(i for i, r in enumerate(ring) if r is record)]
            churn, variants = churn_count(older[::-1], tool_name, args_hash)
            return True, changed, churn, variants

    def window(self, key: ScopeKey) -> list[list[Any]]:
        """A copy of the scope's raw records, oldest first (for projected scans)."""
        with self._lock:
            return [list(record) for record in self._rings.get(key) or ()]

    def history(self, key: ScopeKey) -> list[CallRecord]:
        """The scope's records, oldest first."""
        with self._lock:
            ring = self._rings.get(key)
            return [call_record(key, record) for record in ring or ()]

    def drop(self, key: ScopeKey) -> bool:
        with self._lock:
            return self._rings.pop(key, self._lock) is not None

    def drop_session(self, session: Hashable) -> int:
        with self._lock:
            keys = self._rings.pop_session(session)
            self._lock.bury(*keys)
        return len(keys)

    def _scan(self, key: ScopeKey, tool_name: str, args_hash: int) -> ScanStats:
        ring = self._rings.get(key)
        if not ring:
            return _EMPTY
        return scan_window(ring, tool_name, args_hash)

    def _append(self, key: ScopeKey, record: list[Any]) -> None:
        ring = self._rings.get(key)
        if ring is None:
            ring = deque(maxlen=self.history_size)
            evicted = self._rings.put(key, ring)
            self.evicted += len(evicted)
            self._lock.bury(*evicted)
        ring.append(record)

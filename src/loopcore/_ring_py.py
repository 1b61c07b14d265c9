"""Where are a scope's recent calls kept, and what does one scan count? (SPEC §3-4, Python twin)

A ``RingStore`` keeps, per scope key, a ring of the last ``history_size``
records and answers in hashes and numbers only: it appends calls, attaches
outcomes, and scans a ring once, newest first, for every count the verdict
table needs (``ScanStats``), or ``None`` ("quiet") when no count reaches the
alarm thresholds it is given, so the common call skips the table. It never
hashes a value, decides a verdict or calls back into the layers above. The
compiled twin keeps the same contract over one slab of fixed-width rows.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Hashable, Sequence
from typing import Any

from ._names import exact_str
from ._records import CallRecord, ScanStats
from ._scopes import ScopeKey, ScopeLock, ScopeTable, session_of

__all__ = ["IMPLEMENTATION", "RingStore", "scan_window"]

IMPLEMENTATION = "python"

# Field positions of a stored record (a list, so an outcome can be filled in place).
_TOOL, _ARGS, _CALL_ID, _TS, _RESULT, _UNKNOWN = range(6)

_EMPTY = ScanStats()


def scan_window(ring: Sequence[list[Any]], tool_name: str, args_hash: int) -> ScanStats:
    """Every SPEC §4 count over a non-empty ring of records, oldest first."""
    newest = ring[-1]
    side_a = newest[_ARGS]
    side_b = None
    tail = 1
    tail_open = True
    results_a: object = newest[_RESULT]
    results_b: object = None
    no_progress = results_a is not None

    unknown_name = newest[_UNKNOWN] if newest[_TOOL] == tool_name else None
    unknown_streak = 0
    unknown_open = unknown_name is not None

    recent = 0
    streak = 0
    reference: object = None
    streak_open = True

    for position, record in enumerate(reversed(ring)):
        record_hash = record[_ARGS]
        result = record[_RESULT]
        if record_hash == args_hash:
            recent += 1
            if streak_open and result is not None:
                if reference is None:
                    reference = result
                    streak = 1
                elif result == reference:
                    streak += 1
                else:
                    streak_open = False
        if unknown_open:
            if record[_TOOL] == tool_name and record[_UNKNOWN] == unknown_name:
                unknown_streak += 1
            else:
                unknown_open = False
        if tail_open and position > 0:
            if position == 1:
                if record_hash == side_a:
                    tail_open = False
                    continue
                side_b = record_hash
                results_b = result
            elif record_hash != (side_a if position % 2 == 0 else side_b):
                tail_open = False
                continue
            tail += 1
            if result is None:
                no_progress = False
            elif position % 2 == 0:
                no_progress = no_progress and result == results_a
            else:
                no_progress = no_progress and result == results_b

    pingpong = tail + 1 if tail >= 2 and args_hash == side_b else 0
    return ScanStats(
        recent=recent,
        streak=streak,
        reference=reference,  # type: ignore[arg-type]
        unknown_streak=unknown_streak,
        unknown_name=unknown_name if unknown_streak else None,
        pingpong=pingpong,
        paired_tool=newest[_TOOL] if pingpong else None,
        paired_hash=side_a,
        pingpong_no_progress=bool(pingpong) and no_progress,
    )


def _quiet(stats: ScanStats, alarm: int, unknown_alarm: int) -> bool:
    return stats.recent < alarm and stats.pingpong < alarm and stats.unknown_streak < unknown_alarm


def _as_record(key: ScopeKey, record: list[Any]) -> CallRecord:
    tool_name, args_hash, tool_call_id, timestamp, result_hash, unknown = record
    return CallRecord(
        tool_name, args_hash, tool_call_id, session_of(key), key[1], timestamp, result_hash, unknown
    )


class RingStore:
    """Per-scope rings of the last ``history_size`` records, at most ``max_scopes`` scopes.

    Keys are scope keys as ``_scopes.scope_key`` makes them. Every method takes
    the store's lock for its whole step, so concurrent callers never see half a
    record; the least recently used scope is evicted to make room for a new one.
    """

    __slots__ = ("_lock", "_rings", "history_size")

    def __init__(self, history_size: int, max_scopes: int) -> None:
        if isinstance(history_size, bool) or not isinstance(history_size, int) or history_size < 1:
            raise ValueError(f"history_size: expected a positive integer, got {history_size!r}")
        self.history_size = history_size
        self._rings: ScopeTable[deque[list[Any]]] = ScopeTable(max_scopes)
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
        return None if _quiet(stats, alarm, unknown_alarm) else stats

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
            if _quiet(stats, alarm, unknown_alarm):
                self._append(key, [tool_name, args_hash, tool_call_id, time.time(), None, None])
                return None
        return stats

    def append(
        self, key: ScopeKey, tool_name: str, args_hash: int, tool_call_id: str | None
    ) -> None:
        """Append a call without outcome; the oldest record falls out past ``history_size``."""
        # Exact str: a str subclass's own methods (a ``__del__`` run when a record falls
        # out under the lock) never run in the store.
        tool_name, tool_call_id = exact_str(tool_name), exact_str(tool_call_id)
        now = time.time()
        with self._lock:
            self._append(key, [tool_name, args_hash, tool_call_id, now, None, None])

    def attach(
        self,
        key: ScopeKey,
        tool_name: str,
        args_hash: int,
        tool_call_id: str | None,
        result_hash: int,
        unknown: str | None,
    ) -> CallRecord:
        """Fill the newest pending record of this call (SPEC §3), or append one; return it."""
        # Exact str: a str subclass's own methods (a ``__del__`` run when a record falls
        # out under the lock) never run in the store.
        tool_name, tool_call_id = exact_str(tool_name), exact_str(tool_call_id)
        unknown = exact_str(unknown)
        now = time.time()
        with self._lock:
            ring = self._rings.get(key)
            for record in reversed(ring or ()):
                if (
                    record[_RESULT] is None
                    and record[_ARGS] == args_hash
                    and record[_TOOL] == tool_name
                    and (tool_call_id is None or record[_CALL_ID] == tool_call_id)
                ):
                    record[_RESULT] = result_hash
                    record[_UNKNOWN] = unknown
                    break
            else:
                record = [tool_name, args_hash, tool_call_id, now, result_hash, unknown]
                self._append(key, record)
            return _as_record(key, record)

    def history(self, key: ScopeKey) -> list[CallRecord]:
        """The scope's records, oldest first."""
        with self._lock:
            ring = self._rings.get(key)
            return [_as_record(key, record) for record in ring or ()]

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
            self._lock.bury(*self._rings.put(key, ring))
        ring.append(record)

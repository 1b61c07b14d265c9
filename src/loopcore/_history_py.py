"""Where are recent calls kept, and what does one scan of them yield? (SPEC §3-4, pure-Python twin)

A ``HistoryStore`` is the per-call core behind ``LoopDetector``: it hashes a
call, scans its scope's ring and records it, all under one lock. Each scope
owns a bounded deque of records; ``scan`` walks it once, newest first, and
returns every number the verdict table of SPEC §4 needs. The table itself is
the ``verdict`` callable the detector passes in, consulted only when some count
reaches ``alarm`` (below that no row of the table can match). The compiled twin
keeps the same contract over a slab of hash rings.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Hashable
from typing import Any

from ._outcome import check_call_id, hash_call, is_known_poll
from ._records import NOT_STUCK, CallRecord, ScanStats, Verdict
from ._scopes import ScopeKey, ScopeTable, scope_key

__all__ = ["IMPLEMENTATION", "HistoryStore", "OutcomeFn", "VerdictFn"]

IMPLEMENTATION = "python"

#: ``verdict(stats, tool_name, args_hash, known_poll)``: the SPEC §4 table.
VerdictFn = Callable[[ScanStats, str, int, bool], Verdict]
#: ``outcome(tool_name, args, result, error)`` -> ``(result_hash, unknown_tool_name)``.
OutcomeFn = Callable[[str, Any, Any, Any], "tuple[int | None, str | None]"]

# Field positions of a stored record (a list, so an outcome can be filled in place).
_TOOL, _ARGS, _CALL_ID, _TS, _RESULT, _UNKNOWN = range(6)

_EMPTY = ScanStats()


def _scan(ring: deque[list[Any]], tool_name: str, args_hash: int) -> ScanStats:
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


def _as_record(key: ScopeKey, record: list[Any]) -> CallRecord:
    tool_name, args_hash, tool_call_id, timestamp, result_hash, unknown = record
    return CallRecord(
        tool_name, args_hash, tool_call_id, key[0], key[1], timestamp, result_hash, unknown
    )


class HistoryStore:
    """Per-scope rings of the last ``history_size`` records, at most ``max_scopes`` scopes.

    ``alarm`` is the smallest count at which a row of the verdict table can
    match (the lowest threshold of the streak, recent-count and ping-pong rows),
    ``unknown_alarm`` the unknown-tool threshold. ``plain_outcome_exclusions``
    names the tools whose outcomes need more than the generic rule; this twin
    always asks ``outcome``, so it only matters to the compiled one.
    """

    __slots__ = (
        "_alarm",
        "_lock",
        "_outcome",
        "_rings",
        "_unknown_alarm",
        "_verdict",
        "history_size",
    )

    def __init__(
        self,
        history_size: int,
        max_scopes: int,
        *,
        alarm: int,
        unknown_alarm: int,
        verdict: VerdictFn,
        outcome: OutcomeFn,
        plain_outcome_exclusions: Collection[str] = (),
    ) -> None:
        self.history_size = history_size
        self._rings: ScopeTable[deque[list[Any]]] = ScopeTable(max_scopes)
        self._alarm = alarm
        self._unknown_alarm = unknown_alarm
        self._verdict = verdict
        self._outcome = outcome
        # Store operations are compound (LRU touch, eviction, in-place fill); one
        # lock keeps them consistent when a gateway calls from several threads.
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rings)

    # -- per call ---------------------------------------------------------------------------

    def check(self, tool_name: str, args: Any, session: Hashable, run_id: str | None) -> Verdict:
        """The verdict for a call about to run; records nothing."""
        key = scope_key(session, run_id)
        args_hash = hash_call(tool_name, args)
        with self._lock:
            stats = self.scan(key, tool_name, args_hash)
        return self._decide(stats, tool_name, args, args_hash)

    def check_and_record(
        self,
        tool_name: str,
        args: Any,
        tool_call_id: str | None,
        session: Hashable,
        run_id: str | None,
    ) -> Verdict:
        """``check``, then record the call unless the verdict is critical."""
        key = scope_key(session, run_id)
        args_hash = hash_call(tool_name, args)
        check_call_id(tool_call_id)
        with self._lock:
            stats = self.scan(key, tool_name, args_hash)
        verdict = self._decide(stats, tool_name, args, args_hash)
        if verdict.level != "critical":
            self._record(key, tool_name, args_hash, tool_call_id)
        return verdict

    def record_call(
        self,
        tool_name: str,
        args: Any,
        tool_call_id: str | None,
        session: Hashable,
        run_id: str | None,
    ) -> None:
        """Append a call without outcome."""
        key = scope_key(session, run_id)
        args_hash = hash_call(tool_name, args)
        check_call_id(tool_call_id)
        self._record(key, tool_name, args_hash, tool_call_id)

    def record_outcome(
        self,
        tool_name: str,
        args: Any,
        result: Any,
        error: Any,
        tool_call_id: str | None,
        session: Hashable,
        run_id: str | None,
    ) -> CallRecord | None:
        """Fill the newest pending record of this call, or append one.

        Returns the record; with no outcome hash nothing is recorded and it is None.
        """
        key = scope_key(session, run_id)
        args_hash = hash_call(tool_name, args)
        check_call_id(tool_call_id)
        result_hash, unknown = self._outcome(tool_name, args, result, error)
        if result_hash is None:
            return None
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

    # -- per scope --------------------------------------------------------------------------

    def history(self, session: Hashable, run_id: str | None) -> list[CallRecord]:
        """The scope's records, oldest first."""
        key = scope_key(session, run_id)
        with self._lock:
            ring = self._rings.get(key)
            return [_as_record(key, record) for record in ring or ()]

    def drop(self, session: Hashable, run_id: str | None) -> bool:
        key = scope_key(session, run_id)
        with self._lock:
            return self._rings.pop(key) is not None

    def drop_session(self, session: Hashable) -> int:
        scope_key(session, None)
        with self._lock:
            return self._rings.pop_session(session)

    def scan(self, key: ScopeKey, tool_name: str, args_hash: int) -> ScanStats:
        """Every SPEC §4 count for a call about to run (caller holds the lock)."""
        ring = self._rings.get(key)
        if not ring:
            return _EMPTY
        return _scan(ring, tool_name, args_hash)

    # -- internals --------------------------------------------------------------------------

    def _decide(self, stats: ScanStats, tool_name: str, args: Any, args_hash: int) -> Verdict:
        if (
            stats.recent < self._alarm
            and stats.pingpong < self._alarm
            and stats.unknown_streak < self._unknown_alarm
        ):
            return NOT_STUCK
        return self._verdict(stats, tool_name, args_hash, is_known_poll(tool_name, args))

    def _record(
        self, key: ScopeKey, tool_name: str, args_hash: int, tool_call_id: str | None
    ) -> None:
        now = time.time()
        with self._lock:
            self._append(key, [tool_name, args_hash, tool_call_id, now, None, None])

    def _append(self, key: ScopeKey, record: list[Any]) -> None:
        ring = self._rings.get(key)
        if ring is None:
            ring = deque(maxlen=self.history_size)
            self._rings.put(key, ring)
        ring.append(record)

"""Where are recent calls kept, and what does one scan of them yield? (SPEC §3-4, pure-Python twin)

Each scope owns a bounded deque of records; ``scan`` walks it once, newest
first, and returns every number the verdict table of SPEC §4 needs. The
compiled twin keeps the same contract over a slab of hash rings.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from typing import NamedTuple

from ._scopes import ScopeKey, ScopeTable

__all__ = ["IMPLEMENTATION", "HistoryStore", "RawRecord", "ScanStats"]

IMPLEMENTATION = "python"

# Field positions of a stored record (a list, so an outcome can be filled in place).
_TOOL, _ARGS, _CALL_ID, _TS, _RESULT, _UNKNOWN = range(6)

#: ``(tool_name, args_hash, tool_call_id, timestamp, result_hash, unknown_tool_name)``
RawRecord = tuple[str, int, "str | None", float, "int | None", "str | None"]


class ScanStats(NamedTuple):
    """What one scope's history says about a call about to run (SPEC §4)."""

    #: earlier records with the same args hash, with or without results
    recent: int = 0
    #: no-progress streak: newest results of this args hash equal to the newest one
    streak: int = 0
    #: the newest result of this args hash (the streak's reference), if any
    reference: int | None = None
    #: newest-first run of this tool failing with the same unknown tool name
    unknown_streak: int = 0
    unknown_name: str | None = None
    #: ping-pong count including the call about to run; 0 when it does not continue one
    pingpong: int = 0
    #: tool and args hash of the newest record (the other side of the alternation)
    paired_tool: str | None = None
    paired_hash: int = 0
    #: every tail record has a result and each side's results are all equal
    pingpong_no_progress: bool = False


_EMPTY = ScanStats()


def _scan(ring: deque[list[object]], tool_name: str, args_hash: int) -> ScanStats:
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
        unknown_name=unknown_name if unknown_streak else None,  # type: ignore[arg-type]
        pingpong=pingpong,
        paired_tool=newest[_TOOL] if pingpong else None,  # type: ignore[arg-type]
        paired_hash=side_a,  # type: ignore[arg-type]
        pingpong_no_progress=bool(pingpong) and no_progress,
    )


class HistoryStore:
    """Per-scope rings of the last ``history_size`` records, at most ``max_scopes`` scopes."""

    __slots__ = ("_rings", "history_size")

    def __init__(self, history_size: int, max_scopes: int) -> None:
        self.history_size = history_size
        self._rings: ScopeTable[deque[list[object]]] = ScopeTable(max_scopes)

    def __len__(self) -> int:
        return len(self._rings)

    def scan(self, key: ScopeKey, tool_name: str, args_hash: int) -> ScanStats:
        ring = self._rings.get(key)
        if not ring:
            return _EMPTY
        return _scan(ring, tool_name, args_hash)

    def append(
        self,
        key: ScopeKey,
        tool_name: str,
        args_hash: int,
        tool_call_id: str | None,
        timestamp: float,
        result_hash: int | None = None,
        unknown_tool_name: str | None = None,
    ) -> RawRecord:
        ring = self._rings.get(key)
        if ring is None:
            ring = deque(maxlen=self.history_size)
            self._rings.put(key, ring)
        record: list[object] = [
            tool_name,
            args_hash,
            tool_call_id,
            timestamp,
            result_hash,
            unknown_tool_name,
        ]
        ring.append(record)
        return tuple(record)  # type: ignore[return-value]

    def attach(
        self,
        key: ScopeKey,
        tool_name: str,
        args_hash: int,
        tool_call_id: str | None,
        result_hash: int,
        unknown_tool_name: str | None,
    ) -> RawRecord | None:
        """Fill in the newest pending record of this call; None when there is none."""
        ring = self._rings.get(key)
        if not ring:
            return None
        for record in reversed(ring):
            if (
                record[_RESULT] is None
                and record[_ARGS] == args_hash
                and record[_TOOL] == tool_name
                and (tool_call_id is None or record[_CALL_ID] == tool_call_id)
            ):
                record[_RESULT] = result_hash
                record[_UNKNOWN] = unknown_tool_name
                return tuple(record)  # type: ignore[return-value]
        return None

    def records(self, key: ScopeKey) -> list[RawRecord]:
        ring = self._rings.get(key)
        if not ring:
            return []
        return [tuple(record) for record in ring]  # type: ignore[misc]

    def drop(self, key: ScopeKey) -> bool:
        return self._rings.pop(key) is not None

    def drop_session(self, session: Hashable) -> int:
        return self._rings.pop_session(session)

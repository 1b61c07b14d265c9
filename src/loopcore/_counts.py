"""What does a newest-first walk over a scope's records count? (SPEC §4, §8.1-§8.4, reference)

Each count of the verdict table, written once, over records in the Python
ring's layout (a list a record, fields at the positions below; ``RingStore.window``
gives any store's records in it). ``scan_window`` is every count of one call;
the per-call store, the batch admission's projection and the batch scans'
``verdict(i)`` read these; the compiled ring counts the same in C.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ._records import KIND_TERMINAL_EXEC, KIND_VETO, ScanStats

__all__ = [
    "ARGS",
    "CALL_ID",
    "IDENTITY",
    "KIND",
    "RESULT",
    "STABLE_VARIANT",
    "STALE",
    "TOOL",
    "TS",
    "UNKNOWN",
    "alternation",
    "churn_count",
    "churn_of",
    "churn_tail",
    "no_progress_streak",
    "pingpong",
    "quiet",
    "scan_records",
    "scan_window",
    "terminal_streak",
    "unknown_streak",
]

# Field positions of a stored record (a list, so an outcome can be filled in place).
TOOL, ARGS, CALL_ID, TS, RESULT, UNKNOWN, KIND, IDENTITY, STALE = range(9)

#: Calls of one argument variant that make it a stable part of a churn (SPEC §8.3).
STABLE_VARIANT = 3


def no_progress_streak(newest_first: Sequence[Any], tool: str, h: int) -> tuple[int, Any]:
    """SPEC §8.1: equal results of this call, each carrying the vetoes newer than it."""
    pending = streak = 0
    reference = None
    for record in newest_first:
        if record[ARGS] != h or record[TOOL] != tool:
            continue
        if record[KIND] == KIND_VETO:
            pending += 1
        elif record[RESULT] is not None:
            if reference is None:
                reference = record[RESULT]
            elif record[RESULT] != reference:
                break
            streak += pending + 1
            pending = 0
    return (streak if reference is not None else pending), reference


def terminal_streak(newest_first: Iterable[Any], tool: str) -> tuple[int, Any]:
    """SPEC §8.4: terminal failures of this tool across changing commands."""
    pending = streak = 0
    anchor: list[Any] | None = None
    for record in newest_first:
        if record[TOOL] != tool:
            break
        if record[KIND] == KIND_VETO:
            pending += 1
            continue
        if record[RESULT] is None:
            continue
        if record[KIND] != KIND_TERMINAL_EXEC:
            break
        if anchor is None:
            anchor = record
        elif record[RESULT] != anchor[RESULT] and (
            record[ARGS] != anchor[ARGS] or record[IDENTITY] != anchor[IDENTITY]
        ):
            break
        streak += pending + 1
        pending = 0
    return streak, (anchor[RESULT] if anchor is not None else None)


def churn_tail(newest_first: Sequence[Any], tool: str) -> dict[int, list[Any]]:
    """SPEC §8.3: this tool's churn tail, ``{args_hash: [first-seen result, calls]}``."""
    variants: dict[int, list[Any]] = {}
    for record in newest_first:
        if record[TOOL] != tool:
            break
        result = record[RESULT]
        if result is None:
            continue
        if not record[STALE]:
            break
        seen = variants.get(record[ARGS])
        if seen is None:
            variants[record[ARGS]] = [result, 1]
        elif seen[0] != result:
            break
        else:
            seen[1] += 1
    return variants


def churn_of(variants: dict[int, list[Any]], h: int) -> tuple[int, int]:
    """``(calls, stable variants)`` of the tail's churn when ``h`` is in it, else ``(0, 0)``."""
    if len(variants) < 2 or h not in variants:
        return 0, 0
    if any(count < STABLE_VARIANT for _, count in variants.values()):
        return 0, 0
    if len({result for result, _ in variants.values()}) != 1:
        return 0, 0
    return sum(count for _, count in variants.values()), len(variants)


def churn_count(newest_first: Sequence[Any], tool: str, h: int) -> tuple[int, int]:
    """SPEC §8.3: ``(calls, stable variants)`` of a churn ``h`` is part of, else ``(0, 0)``."""
    return churn_of(churn_tail(newest_first, tool), h)


def unknown_streak(newest_first: Iterable[Any], tool: str) -> tuple[int, Any]:
    """Newest-first failures of this tool naming one unknown tool; vetoes skipped (§8.1)."""
    name = None
    streak = 0
    for record in newest_first:
        if record[KIND] == KIND_VETO:
            continue
        if record[TOOL] != tool or record[UNKNOWN] is None:
            break
        if name is None:
            name = record[UNKNOWN]
        elif record[UNKNOWN] != name:
            break
        streak += 1
    return streak, name


def alternation(newest_first: Sequence[Any]) -> tuple[int, int | None, int, bool]:
    """SPEC §4 with §12.4: ``(A, B, tail, no progress)`` of the alternating tail at the newest.

    Veto records take part in the alternation by their hash and are neutral
    for progress: each side is judged on its records that are not vetoes.
    """
    side_a = newest_first[0][ARGS]
    side_b = None
    tail = 0
    sides: list[list[Any]] = [[], []]
    missing = False
    for position, record in enumerate(newest_first):
        if position == 1:
            if record[ARGS] == side_a:
                break
            side_b = record[ARGS]
        elif position > 1 and record[ARGS] != (side_a if position % 2 == 0 else side_b):
            break
        tail += 1
        if record[KIND] == KIND_VETO:
            continue
        if record[RESULT] is None:
            missing = True
        else:
            sides[position % 2].append(record[RESULT])
    no_progress = (
        not missing and all(sides) and all(result == side[0] for side in sides for result in side)
    )
    return side_a, side_b, tail, no_progress


def pingpong(newest_first: Sequence[Any], h: int) -> tuple[int, bool]:
    """The ping-pong count of a call ``h`` that continues the alternation (0 if it does not)."""
    _, side_b, tail, no_progress = alternation(newest_first)
    if tail < 2 or h != side_b:
        return 0, False
    return tail + 1, no_progress


def scan_window(ring: Sequence[Sequence[Any]], tool_name: str, args_hash: int) -> ScanStats:
    """Every SPEC §4/§8 count over a non-empty ring of records, oldest first."""
    recent = sum(1 for record in ring if record[ARGS] == args_hash)
    newest = ring[-1]
    terminal, anchor = terminal_streak(reversed(ring), tool_name)
    unknown, unknown_name = unknown_streak(reversed(ring), tool_name)
    if not recent:
        # A call no record has: no streak of its own, no churn (it must be a
        # variant) and no ping-pong (it must be the earlier hash B).
        return ScanStats(
            streak=terminal,
            reference=anchor,
            unknown_streak=unknown,
            unknown_name=unknown_name if unknown else None,
            paired_hash=newest[ARGS],
        )
    newest_first = list(reversed(ring))
    streak, reference = no_progress_streak(newest_first, tool_name, args_hash)
    if terminal > streak:
        streak, reference = terminal, anchor
    alternation_count, no_progress = pingpong(newest_first, args_hash)
    churn, variants = churn_count(newest_first, tool_name, args_hash)
    return ScanStats(
        recent=recent,
        streak=streak,
        reference=reference,
        unknown_streak=unknown,
        unknown_name=unknown_name if unknown else None,
        pingpong=alternation_count,
        paired_tool=newest[TOOL] if alternation_count else None,
        paired_hash=newest[ARGS],
        pingpong_no_progress=no_progress,
        churn=churn,
        churn_variants=variants,
    )


def scan_records(records: Sequence[Sequence[Any]], tool_name: str, args_hash: int) -> ScanStats:
    """``scan_window``, or all zeros for a scope with no records."""
    return scan_window(records, tool_name, args_hash) if records else ScanStats()


def quiet(stats: ScanStats, alarm: int, unknown_alarm: int) -> bool:
    """Does no count reach its alarm threshold? (then no verdict row can hold)"""
    return (
        stats.recent < alarm
        and stats.streak < alarm
        and stats.pingpong < alarm
        and stats.churn < alarm
        and stats.unknown_streak < unknown_alarm
    )

"""What do a history record, a scan and a verdict look like? (SPEC §3-4 value types)

Shared by both history twins and the detector, so that neither twin depends on
the module that holds the verdict table.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Literal, NamedTuple

__all__ = ["NOT_STUCK", "CallRecord", "Level", "ScanStats", "Verdict"]

Level = Literal["warning", "critical"]


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One call in a scope's history, as ``LoopDetector.history()`` returns it."""

    tool_name: str
    args_hash: int
    tool_call_id: str | None
    session: Hashable
    run_id: str | None
    timestamp: float
    result_hash: int | None = None
    unknown_tool_name: str | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """What ``check`` says about a call about to run; ``bool(verdict)`` is ``stuck``."""

    stuck: bool = False
    level: Level | None = None
    detector: str | None = None
    count: int = 0
    message: str | None = None
    paired_tool_name: str | None = None
    warning_key: str | None = None

    def __bool__(self) -> bool:
        return self.stuck


NOT_STUCK = Verdict()


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

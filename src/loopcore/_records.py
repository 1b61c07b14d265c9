"""What do a history record, a scan and a verdict look like? (SPEC §3-4 value types)

Shared by both history twins and the detector, so that neither twin depends on
the module that holds the verdict table.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ._scopes import session_of

__all__ = [
    "KIND_NONE",
    "KIND_TERMINAL_EXEC",
    "KIND_VALIDATION",
    "KIND_VETO",
    "NOT_STUCK",
    "OUTCOME_KINDS",
    "CallRecord",
    "Level",
    "OutcomeKind",
    "ScanStats",
    "Verdict",
    "call_record",
]

Level = Literal["warning", "critical"]
OutcomeKind = Literal["tool-loop-veto", "terminal-exec-failure", "argument-validation"]

#: Codes of a record's outcome kind (SPEC §8.0), as the rings store them.
KIND_NONE, KIND_VETO, KIND_TERMINAL_EXEC, KIND_VALIDATION = 0, 1, 2, 3
#: A kind's name by its code (0: an ordinary outcome, or none yet).
OUTCOME_KINDS: tuple[OutcomeKind | None, ...] = (
    None,
    "tool-loop-veto",
    "terminal-exec-failure",
    "argument-validation",
)


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
    #: SPEC §8.0: what kind of outcome completed the record, if a special one
    outcome_kind: OutcomeKind | None = None
    #: SPEC §8.4: a terminal exec failure's identity across drifting output
    failure_identity_hash: int | None = None
    #: the outcome itself proves nothing changed (an error, a write no-op)
    no_progress: bool = False

    @property
    def complete(self) -> bool:
        """Has the call an outcome (a result hash, or a veto or other kind)?"""
        return self.result_hash is not None or self.outcome_kind is not None


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
    #: SPEC §8.3: ``"argument_churn"`` when the call keeps a stalled churn going
    liveness_signal: str | None = None

    def __bool__(self) -> bool:
        return self.stuck


NOT_STUCK = Verdict()


class ScanStats(NamedTuple):
    """What one scope's history says about a call about to run (SPEC §4)."""

    #: earlier records with the same args hash, with or without results
    recent: int = 0
    #: no-progress streak (SPEC §8.1, vetoes counted; for exec the terminal
    #: streak of §8.4 when it is longer)
    streak: int = 0
    #: the result the streak is counted against (the warning key's reference)
    reference: int | None = None
    #: newest-first run of this tool failing with the same unknown tool name
    unknown_streak: int = 0
    unknown_name: str | None = None
    #: ping-pong count including the call about to run; 0 when it does not continue one
    pingpong: int = 0
    #: tool and args hash of the newest record (the other side of the alternation)
    paired_tool: str | None = None
    paired_hash: int = 0
    #: every non-veto tail record has a result and each side's results are all equal
    pingpong_no_progress: bool = False
    #: SPEC §8.3: calls in this tool's argument-churn tail when ``args_hash`` is a
    #: stable variant of a churn, else 0; and the number of stable variants
    churn: int = 0
    churn_variants: int = 0


def call_record(key: tuple[Hashable, str | None], record: Sequence[Any]) -> CallRecord:
    """A stored record (the Python ring's list layout, ``_counts``) as ``history()`` gives it."""
    tool, args_hash, call_id, ts, result, unknown, kind, identity, stale = record
    return CallRecord(
        tool,
        args_hash,
        call_id,
        session_of(key),
        key[1],
        ts,
        result,
        unknown,
        OUTCOME_KINDS[kind],
        identity,
        stale,
    )

"""Which verdict does a scan of a scope's history give? (SPEC §4: the one verdict table)

Everything that decides a verdict lives here, once: the detector names and their
codes, the table's rows, the messages the model reads, the warning keys, the
tools whose outcomes follow special rules, and the post-compaction abort text.

A row's condition and count are written with ``&``, ``>=`` and attribute reads
only, so the same row works on one scan (ints and bools: the per-call path takes
the first row that holds) and on whole numpy columns of scans (the batch path
``np.select``\\ s the same rows). numpy is never imported here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ._config import LoopDetectionConfig
from ._records import NOT_STUCK, Level, ScanStats, Verdict

__all__ = [
    "ARGUMENT_CHURN",
    "COMPACTION_LOOP_PERSISTED",
    "DETECTORS",
    "GENERIC_REPEAT",
    "GLOBAL_CIRCUIT_BREAKER",
    "KNOWN_POLL_NO_PROGRESS",
    "LEVELS",
    "LIVENESS_ARGUMENT_CHURN",
    "LOOP_ADMISSION_FAILURE",
    "LOOP_STORE_UNAVAILABLE",
    "PING_PONG",
    "ROWS",
    "SPECIAL_OUTCOME_TOOLS",
    "UNKNOWN_TOOL_REPEAT",
    "Row",
    "Verdicts",
    "abort_message",
    "abort_summary",
    "alarm_thresholds",
    "churn_on",
    "compaction_error_message",
    "select",
    "verdict",
]

UNKNOWN_TOOL_REPEAT = "unknown_tool_repeat"
GLOBAL_CIRCUIT_BREAKER = "global_circuit_breaker"
KNOWN_POLL_NO_PROGRESS = "known_poll_no_progress"
PING_PONG = "ping_pong"
GENERIC_REPEAT = "generic_repeat"
ARGUMENT_CHURN = "argument_churn"
COMPACTION_LOOP_PERSISTED = "compaction_loop_persisted"
#: Not rows of the table: what blocks a call when the check itself failed
#: (SPEC §8.2) or the shared store could not be reached (§10).
LOOP_ADMISSION_FAILURE = "loop_admission_failure"
LOOP_STORE_UNAVAILABLE = "loop_store_unavailable"
#: ``Verdict.liveness_signal`` of a call that keeps a stalled churn going (SPEC §8.3).
LIVENESS_ARGUMENT_CHURN = "argument_churn"

#: Detector codes of the batch scans: the index into this tuple (0: none).
DETECTORS: tuple[str | None, ...] = (
    None,
    UNKNOWN_TOOL_REPEAT,
    GLOBAL_CIRCUIT_BREAKER,
    KNOWN_POLL_NO_PROGRESS,
    PING_PONG,
    GENERIC_REPEAT,
    ARGUMENT_CHURN,
)
#: Level codes of the batch scans (0: not stuck).
LEVELS: tuple[Level | None, ...] = (None, "warning", "critical")
_WARNING, _CRITICAL = 1, 2
_CODE = {name: code for code, name in enumerate(DETECTORS) if name is not None}

#: Tools whose outcomes follow a rule other than the generic one (SPEC §2).
SPECIAL_OUTCOME_TOOLS = frozenset(
    {"exec", "process", "sessions_send", "message", "update_plan", "write", "wait"}
)


class Row(NamedTuple):
    """One row of the table: when it holds, and what it says.

    ``when(scan, config)`` and ``count(scan)`` read ``scan.recent``,
    ``scan.streak``, ``scan.unknown_streak``, ``scan.pingpong``,
    ``scan.pingpong_no_progress``, ``scan.churn``, ``scan.known_poll`` and
    ``scan.wait``: ints and bools for one call, equal-length numpy columns for
    many.
    """

    level: int
    detector: str
    when: Callable[[Any, LoopDetectionConfig], Any]
    count: Callable[[Any], Any]


def _poll(s: Any, c: LoopDetectionConfig) -> Any:
    return s.known_poll & c.detectors.known_poll_no_progress


def _ping(s: Any, c: LoopDetectionConfig) -> Any:
    return (s.pingpong > 0) & c.detectors.ping_pong


def _generic(s: Any, c: LoopDetectionConfig) -> Any:
    return ~s.known_poll & c.detectors.generic_repeat


def _poll_critical(s: Any, c: LoopDetectionConfig) -> Any:
    # SPEC §8.8: ten unchanged outcomes already prove a ``wait`` stuck.
    return (s.streak >= c.critical_threshold) | (s.wait & (s.streak >= c.warning_threshold))


def churn_on(c: LoopDetectionConfig) -> bool:
    """Is the argument-churn detector on (SPEC §8.3; off means a churn count of 0)?"""
    return bool(getattr(c.detectors, "argument_churn", True))


def _churning(s: Any, c: LoopDetectionConfig) -> Any:
    return (s.churn >= c.warning_threshold) & churn_on(c)


def _streak(s: Any) -> Any:
    return s.streak


def _pingpong(s: Any) -> Any:
    return s.pingpong


#: SPEC §8.9, first match wins.
ROWS: tuple[Row, ...] = (
    Row(
        _CRITICAL,
        UNKNOWN_TOOL_REPEAT,
        lambda s, c: s.unknown_streak >= c.unknown_tool_threshold,
        lambda s: s.unknown_streak,
    ),
    Row(
        _CRITICAL,
        GLOBAL_CIRCUIT_BREAKER,
        lambda s, c: s.streak >= c.global_circuit_breaker_threshold,
        _streak,
    ),
    Row(
        _CRITICAL,
        KNOWN_POLL_NO_PROGRESS,
        lambda s, c: _poll(s, c) & _poll_critical(s, c),
        _streak,
    ),
    Row(
        _WARNING,
        KNOWN_POLL_NO_PROGRESS,
        lambda s, c: _poll(s, c) & (s.streak >= c.warning_threshold),
        _streak,
    ),
    Row(
        _CRITICAL,
        PING_PONG,
        lambda s, c: _ping(s, c) & (s.pingpong >= c.critical_threshold) & s.pingpong_no_progress,
        _pingpong,
    ),
    Row(
        _WARNING,
        PING_PONG,
        lambda s, c: _ping(s, c) & (s.pingpong >= c.warning_threshold),
        _pingpong,
    ),
    Row(
        _CRITICAL,
        GENERIC_REPEAT,
        lambda s, c: _generic(s, c) & (s.streak >= c.critical_threshold),
        _streak,
    ),
    Row(_WARNING, ARGUMENT_CHURN, _churning, lambda s: s.churn),
    Row(
        _WARNING,
        GENERIC_REPEAT,
        lambda s, c: _generic(s, c) & (s.recent >= c.warning_threshold),
        lambda s: s.recent,
    ),
)


def alarm_thresholds(config: LoopDetectionConfig) -> tuple[int, int]:
    """``(alarm, unknown_alarm)``: below these counts no row can hold.

    The store answers "quiet" for a scan whose recent count and ping-pong count
    are under ``alarm`` and whose unknown-tool streak is under ``unknown_alarm``
    (the streak never exceeds the recent count), so most calls skip the table.
    """
    alarm = min(
        config.warning_threshold, config.critical_threshold, config.global_circuit_breaker_threshold
    )
    return alarm, config.unknown_tool_threshold


class _Bool(int):
    """A bool whose ``~`` is logical, as numpy's is on bool columns."""

    __slots__ = ()

    def __invert__(self) -> bool:
        return not self


def verdict(
    stats: ScanStats,
    config: LoopDetectionConfig,
    tool_name: str,
    args_hash: int,
    known_poll: bool,
) -> Verdict:
    """The verdict of the first row that holds for one scan, or NOT_STUCK."""
    scan = _Scan(
        stats.recent,
        stats.streak,
        stats.unknown_streak,
        stats.pingpong,
        stats.pingpong_no_progress,
        _TRUE if known_poll else _FALSE,
        _TRUE if tool_name == "wait" else _FALSE,
        stats.churn,
    )
    for row in ROWS:
        if row.when(scan, config):
            count = int(row.count(scan))
            message, key = _TEXTS[row.detector](stats, tool_name, args_hash, count, row.level)
            return Verdict(
                True,
                LEVELS[row.level],
                row.detector,
                count,
                message,
                stats.paired_tool if row.detector == PING_PONG else None,
                key,
                _liveness(row, scan, config),
            )
    return NOT_STUCK


def _liveness(row: Row, scan: Any, config: LoopDetectionConfig) -> str | None:
    """SPEC §8.3: the churn row, and the poll and ping-pong warnings of a churning call."""
    if row.detector == ARGUMENT_CHURN:
        return LIVENESS_ARGUMENT_CHURN
    liveness_rows = (KNOWN_POLL_NO_PROGRESS, PING_PONG)
    if row.level == _WARNING and row.detector in liveness_rows and _churning(scan, config):
        return LIVENESS_ARGUMENT_CHURN
    return None


class _Scan(NamedTuple):
    recent: int
    streak: int
    unknown_streak: int
    pingpong: int
    pingpong_no_progress: bool
    known_poll: _Bool
    wait: _Bool
    churn: int


_TRUE = _Bool(1)
_FALSE = _Bool(0)


def select(scan: Any, config: LoopDetectionConfig) -> tuple[Any, Any, Any]:
    """``(level, detector, count)`` codes for numpy columns of scans: the same rows."""
    import numpy as np

    conditions = [np.asarray(row.when(scan, config), dtype=np.bool_) for row in ROWS]
    level = np.select(conditions, [row.level for row in ROWS], 0).astype(np.int8)
    detector = np.select(conditions, [_CODE[row.detector] for row in ROWS], 0).astype(np.int8)
    count = np.select(conditions, [row.count(scan) for row in ROWS], 0).astype(np.int32)
    return level, detector, count


# -- what the model reads, and the keys warnings are de-duplicated by --------------------------

_Text = Callable[[ScanStats, str, int, int, int], "tuple[str, str]"]


def _no_progress_key(stats: ScanStats, tool_name: str, args_hash: int) -> str:
    return f"{tool_name}:{args_hash:016x}:{(stats.reference or 0):016x}"


def _unknown_text(stats: ScanStats, tool: str, h: int, n: int, level: int) -> tuple[str, str]:
    name = stats.unknown_name
    return (
        f"CRITICAL: {tool} failed {n} times because the tool '{name}' is not available. It does "
        "not exist here: stop calling it and use only the tools you have been given.",
        f"{UNKNOWN_TOOL_REPEAT}:{tool}:{name}",
    )


def _global_text(stats: ScanStats, tool: str, h: int, n: int, level: int) -> tuple[str, str]:
    return (
        f"CRITICAL: {tool} returned the same result {n} times for the same arguments; the "
        "global circuit breaker blocked this call. Stop repeating it: change the arguments, try "
        "a different approach, or report that you are blocked.",
        f"{GLOBAL_CIRCUIT_BREAKER}:{_no_progress_key(stats, tool, h)}",
    )


def _poll_text(stats: ScanStats, tool: str, h: int, n: int, level: int) -> tuple[str, str]:
    key = f"{KNOWN_POLL_NO_PROGRESS}:{_no_progress_key(stats, tool, h)}"
    if level == _CRITICAL:
        return (
            f"CRITICAL: {tool} has been polled {n} times with no progress; this poll is "
            "blocked. The process is not changing: stop polling, inspect or stop it, or report "
            "that it is stuck.",
            key,
        )
    return (
        f"WARNING: {tool} has been polled {n} times with no progress. Do not poll in a tight "
        "loop: wait longer between checks, or find out why the process is not moving.",
        key,
    )


def _pingpong_text(stats: ScanStats, tool: str, h: int, n: int, level: int) -> tuple[str, str]:
    low, high = sorted((h, stats.paired_hash))
    key = f"{PING_PONG}:{low:016x}:{high:016x}"
    paired = stats.paired_tool
    if level == _CRITICAL:
        return (
            f"CRITICAL: {n} times alternating between {paired} and {tool} with the same results "
            "each time: a ping-pong loop with no progress; this call is blocked. Try a different "
            "approach or report that you are blocked.",
            key,
        )
    return (
        f"WARNING: you have alternated between {paired} and {tool} {n} times in a row, a "
        "ping-pong loop. If neither call is making progress, stop switching and try a different "
        "approach.",
        key,
    )


def _generic_text(stats: ScanStats, tool: str, h: int, n: int, level: int) -> tuple[str, str]:
    if level == _CRITICAL:
        return (
            f"CRITICAL: Called {tool} with identical outcomes {n} times. Session execution "
            "blocked to prevent runaway loops.",
            f"{GENERIC_REPEAT}:critical:{_no_progress_key(stats, tool, h)}",
        )
    return (
        f"WARNING: you have called {tool} {n} times with identical arguments. If this is not "
        "making progress, stop repeating the call and try a different approach.",
        f"{GENERIC_REPEAT}:{tool}:{h:016x}",
    )


def _churn_text(stats: ScanStats, tool: str, h: int, n: int, level: int) -> tuple[str, str]:
    return (
        f"WARNING: {tool} has cycled through {stats.churn_variants} repeated argument patterns "
        f"with the same stable outcome {n} times. Continued churn is treated as stalled run "
        "activity, but this tool call remains allowed.",
        f"argument-churn:{tool}",
    )


_TEXTS: dict[str, _Text] = {
    UNKNOWN_TOOL_REPEAT: _unknown_text,
    GLOBAL_CIRCUIT_BREAKER: _global_text,
    KNOWN_POLL_NO_PROGRESS: _poll_text,
    PING_PONG: _pingpong_text,
    GENERIC_REPEAT: _generic_text,
    ARGUMENT_CHURN: _churn_text,
}


# -- the post-compaction guard (SPEC §6) -----------------------------------------------------


def abort_message(tool_name: str, count: int, window_size: int) -> str:
    """What the run is aborted with when a loop survives a compaction."""
    return (
        f"CRITICAL: {COMPACTION_LOOP_PERSISTED}: {tool_name} repeated the same call with the same "
        f"result {count} times in the {window_size} attempts after context compaction; the run "
        "is aborted because the loop survived the compaction."
    )


def abort_summary(tool_name: str, window_size: int) -> str:
    """A replay report's one line for a run the guard would have aborted."""
    return (
        f"ABORT: {COMPACTION_LOOP_PERSISTED}: {tool_name} repeated the same call with the same "
        f"result {window_size} times after the context compaction"
    )


def compaction_error_message(tool_name: str, count: int) -> str:
    """``CompactionLoopPersisted``'s text when it is raised without a message."""
    return (
        f"{COMPACTION_LOOP_PERSISTED}: {tool_name} repeated the same call with the same result "
        f"{count} times after context compaction"
    )


class Verdicts:
    """``verdict`` for one config, remembering recent answers.

    A verdict is a pure function of the scan, the tool, the call hash and
    whether it is a known poll; an agent stuck in a loop asks the same
    question call after call, so the answers are kept (a bounded number).
    """

    __slots__ = ("_answers", "config")

    #: Distinct answers remembered; the table is cleared when it is full.
    SIZE = 4096

    def __init__(self, config: LoopDetectionConfig) -> None:
        self.config = config
        self._answers: dict[tuple[ScanStats, str, int, bool], Verdict] = {}

    def __call__(
        self, stats: ScanStats, tool_name: str, args_hash: int, known_poll: bool
    ) -> Verdict:
        if type(tool_name) is not str:  # a str subclass's own __hash__ must not decide
            return verdict(stats, self.config, tool_name, args_hash, known_poll)
        key = (stats, tool_name, args_hash, known_poll)
        found = self._answers.get(key)
        if found is None:
            found = verdict(stats, self.config, tool_name, args_hash, known_poll)
            if len(self._answers) >= self.SIZE:
                self._answers.clear()
            self._answers[key] = found
        return found

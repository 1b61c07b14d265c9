"""Where is the verdict table, and what does ``LoopDetector`` do per call? (SPEC §3-4)

The history twin counts; this module decides. ``verdict_from`` is the only
place the SPEC §4 table lives, shared by both twins and by the batch scans.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from functools import partial
from typing import Any

from . import _history
from ._config import LoopDetectionConfig, coerce_config
from ._outcome import (
    UNSET,
    Normalizer,
    check_normalizers,
    check_send_tools,
    check_tool_name,
    hash_outcome,
)
from ._records import NOT_STUCK, CallRecord, ScanStats, Verdict
from ._scopes import scope_key

__all__ = ["NOT_STUCK", "CallRecord", "LoopDetector", "Verdict", "verdict_from"]

#: Tools whose outcomes follow a rule other than the generic one (SPEC §2).
SPECIAL_OUTCOME_TOOLS = frozenset({"exec", "process", "sessions_send", "message", "update_plan"})


def _critical(
    detector: str, count: int, message: str, key: str, paired: str | None = None
) -> Verdict:
    return Verdict(True, "critical", detector, count, message, paired, key)


def _warning(
    detector: str, count: int, message: str, key: str, paired: str | None = None
) -> Verdict:
    return Verdict(True, "warning", detector, count, message, paired, key)


def verdict_from(
    stats: ScanStats,
    config: LoopDetectionConfig,
    tool_name: str,
    args_hash: int,
    known_poll: bool,
) -> Verdict:
    """Apply the SPEC §4 table (first match wins) to one scan of a scope's history."""
    warning_at = config.warning_threshold
    critical_at = config.critical_threshold
    detectors = config.detectors
    streak = stats.streak
    no_progress_key = f"{tool_name}:{args_hash:016x}:{(stats.reference or 0):016x}"

    if stats.unknown_streak >= config.unknown_tool_threshold:
        name = stats.unknown_name
        return _critical(
            "unknown_tool_repeat",
            stats.unknown_streak,
            f"CRITICAL: {tool_name} failed {stats.unknown_streak} times because the tool "
            f"'{name}' is not available. It does not exist here: stop calling it and use "
            "only the tools you have been given.",
            f"unknown_tool_repeat:{tool_name}:{name}",
        )
    if streak >= config.global_circuit_breaker_threshold:
        return _critical(
            "global_circuit_breaker",
            streak,
            f"CRITICAL: {tool_name} returned the same result {streak} times for the same "
            "arguments; the global circuit breaker blocked this call. Stop repeating it: change "
            "the arguments, try a different approach, or report that you are blocked.",
            f"global_circuit_breaker:{no_progress_key}",
        )
    if known_poll and detectors.known_poll_no_progress:
        key = f"known_poll_no_progress:{no_progress_key}"
        if streak >= critical_at:
            return _critical(
                "known_poll_no_progress",
                streak,
                f"CRITICAL: {tool_name} has been polled {streak} times with no progress; this "
                "poll is blocked. The process is not changing: stop polling, inspect or stop it, "
                "or report that it is stuck.",
                key,
            )
        if streak >= warning_at:
            return _warning(
                "known_poll_no_progress",
                streak,
                f"WARNING: {tool_name} has been polled {streak} times with no progress. Do not "
                "poll in a tight loop: wait longer between checks, or find out why the process "
                "is not moving.",
                key,
            )
    pingpong = stats.pingpong
    if detectors.ping_pong and pingpong:
        low, high = sorted((args_hash, stats.paired_hash))
        key = f"ping_pong:{low:016x}:{high:016x}"
        paired = stats.paired_tool
        if pingpong >= critical_at and stats.pingpong_no_progress:
            return _critical(
                "ping_pong",
                pingpong,
                f"CRITICAL: {pingpong} times alternating between {paired} and {tool_name} with "
                "the same results each time: a ping-pong loop with no progress; this call is "
                "blocked. Try a different approach or report that you are blocked.",
                key,
                paired,
            )
        if pingpong >= warning_at:
            return _warning(
                "ping_pong",
                pingpong,
                f"WARNING: you have alternated between {paired} and {tool_name} {pingpong} times "
                "in a row, a ping-pong loop. If neither call is making progress, stop switching "
                "and try a different approach.",
                key,
                paired,
            )
    if not known_poll and detectors.generic_repeat:
        if streak >= critical_at:
            return _critical(
                "generic_repeat",
                streak,
                f"CRITICAL: {tool_name} has been called {streak} times with identical arguments "
                "and identical outcomes; this call is blocked. Repeating it will not change the "
                "result: change the arguments, try a different approach, or report that you are "
                "blocked.",
                f"generic_repeat:critical:{no_progress_key}",
            )
        if stats.recent >= warning_at:
            return _warning(
                "generic_repeat",
                stats.recent,
                f"WARNING: you have called {tool_name} {stats.recent} times with identical "
                "arguments. If this is not making progress, stop repeating the call and try a "
                "different approach.",
                f"generic_repeat:{tool_name}:{args_hash:016x}",
            )
    return NOT_STUCK


class LoopDetector:
    """Per-scope call history and the SPEC §4 checks over it."""

    def __init__(
        self,
        config: LoopDetectionConfig | Mapping[str, Any] | None = None,
        *,
        normalizers: Mapping[str, Normalizer] | None = None,
        send_tools: Collection[str] = (),
        max_scopes: int = 100_000,
    ) -> None:
        self._config = config = coerce_config(config)
        normalizers = check_normalizers(normalizers)
        send_tools = check_send_tools(send_tools)
        self._enabled = config.enabled is True
        self._store = _history.HistoryStore(
            config.history_size,
            max_scopes,
            # Repaired ordering makes the warning threshold the lowest one of
            # the streak, recent-count and ping-pong rows; min() keeps it safe anyway.
            alarm=min(
                config.warning_threshold,
                config.critical_threshold,
                config.global_circuit_breaker_threshold,
            ),
            unknown_alarm=config.unknown_tool_threshold,
            verdict=partial(_verdict_for, config),
            outcome=partial(_outcome_for, normalizers, send_tools),
            plain_outcome_exclusions=SPECIAL_OUTCOME_TOOLS | send_tools | set(normalizers),
        )
        bind = getattr(self._store, "bind_detector", None)
        if bind is not None and all(
            getattr(type(self), name) is getattr(LoopDetector, name) for name in _PER_CALL
        ):
            # The compiled twin answers the per-call methods without a Python
            # frame (same signatures and results); subclasses keep their own.
            calls = bind(self._enabled, _disabled_check)
            for name in _PER_CALL:
                object.__setattr__(self, name, getattr(calls, name))

    @property
    def config(self) -> LoopDetectionConfig:
        return self._config

    @property
    def enabled(self) -> bool:
        return self._enabled

    def __repr__(self) -> str:
        return f"LoopDetector(enabled={self._enabled}, scopes={len(self._store)})"

    def check(
        self, tool_name: str, args: Any, *, session: Hashable = None, run_id: str | None = None
    ) -> Verdict:
        """The verdict for a call about to run, against its scope's history."""
        if self._enabled:
            return self._store.check(tool_name, args, session, run_id)
        return _disabled_check(tool_name, session, run_id)

    def record_call(
        self,
        tool_name: str,
        args: Any,
        tool_call_id: str | None = None,
        *,
        session: Hashable = None,
        run_id: str | None = None,
    ) -> None:
        """Append a call (without outcome) to its scope's history."""
        self._store.record_call(tool_name, args, tool_call_id, session, run_id)

    def record_outcome(
        self,
        tool_name: str,
        args: Any,
        *,
        result: Any = UNSET,
        error: Any = UNSET,
        tool_call_id: str | None = None,
        session: Hashable = None,
        run_id: str | None = None,
    ) -> CallRecord | None:
        """Attach an outcome to the newest pending matching call, or append one."""
        return self._store.record_outcome(
            tool_name, args, result, error, tool_call_id, session, run_id
        )

    def history(self, *, session: Hashable = None, run_id: str | None = None) -> list[CallRecord]:
        """The scope's records, oldest first."""
        return self._store.history(session, run_id)

    def end_run(self, *, session: Hashable = None, run_id: str | None = None) -> None:
        """Forget one scope's history."""
        self._store.drop(session, run_id)

    def end_session(self, session: Hashable) -> None:
        """Forget the history of every run of ``session``."""
        self._store.drop_session(session)


_PER_CALL = ("check", "record_call", "record_outcome")


def _disabled_check(tool_name: str, session: Hashable, run_id: str | None) -> Verdict:
    """``check`` when the detectors are off: arguments still validated, never stuck."""
    scope_key(session, run_id)
    check_tool_name(tool_name)
    return NOT_STUCK


def _verdict_for(
    config: LoopDetectionConfig, stats: ScanStats, tool_name: str, args_hash: int, known_poll: bool
) -> Verdict:
    return verdict_from(stats, config, tool_name, args_hash, known_poll)


def _outcome_for(
    normalizers: Mapping[str, Normalizer],
    send_tools: frozenset[str],
    tool_name: str,
    args: Any,
    result: Any,
    error: Any,
) -> tuple[int | None, str | None]:
    return hash_outcome(
        tool_name, args, result=result, error=error, normalizers=normalizers, send_tools=send_tools
    )

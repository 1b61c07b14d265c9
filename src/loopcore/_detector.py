"""Where is the verdict table, and what does ``LoopDetector`` do per call? (SPEC §3-4)

The history twin counts; this module decides. ``verdict_from`` is the only
place the SPEC §4 table lives, shared by both twins and by the batch scans.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from . import _history
from ._config import LoopDetectionConfig
from ._history_py import RawRecord, ScanStats
from ._outcome import (
    UNSET,
    Normalizer,
    check_tool_name,
    hash_call,
    hash_outcome,
    is_known_poll,
)
from ._scopes import ScopeKey, scope_key

__all__ = ["NOT_STUCK", "CallRecord", "LoopDetector", "Verdict", "verdict_from"]

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


def _coerce_config(config: LoopDetectionConfig | Mapping[str, Any] | None) -> LoopDetectionConfig:
    if config is None:
        return LoopDetectionConfig()
    if isinstance(config, LoopDetectionConfig):
        return config
    if isinstance(config, Mapping):
        return LoopDetectionConfig.from_mapping(config)
    raise TypeError(
        "config: expected a LoopDetectionConfig, a tools.loopDetection mapping or None, "
        f"got {type(config).__name__}"
    )


def _check_normalizers(normalizers: Mapping[str, Normalizer] | None) -> dict[str, Normalizer]:
    if normalizers is None:
        return {}
    if not isinstance(normalizers, Mapping):
        raise TypeError(f"normalizers: expected a mapping, got {type(normalizers).__name__}")
    for name, fn in normalizers.items():
        if not isinstance(name, str):
            raise TypeError(f"normalizers: keys must be tool names (str), got {name!r}")
        if not callable(fn):
            raise TypeError(f"normalizers[{name!r}]: expected a callable, got {type(fn).__name__}")
    return dict(normalizers)


def _check_send_tools(send_tools: Iterable[str]) -> frozenset[str]:
    if isinstance(send_tools, str) or not isinstance(send_tools, Iterable):
        raise TypeError(
            f"send_tools: expected an iterable of tool names, got {type(send_tools).__name__}"
        )
    names = frozenset(send_tools)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"send_tools: expected tool names (str), got {name!r}")
    return names


def _check_call_id(tool_call_id: object) -> str | None:
    if tool_call_id is not None and not isinstance(tool_call_id, str):
        raise TypeError(f"tool_call_id: expected a str or None, got {type(tool_call_id).__name__}")
    return tool_call_id


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
        self._config = _coerce_config(config)
        self._normalizers = _check_normalizers(normalizers)
        self._send_tools = _check_send_tools(send_tools)
        self._enabled = self._config.enabled is True
        self._store = _history.HistoryStore(self._config.history_size, max_scopes)
        # Store operations are compound (LRU touch, eviction, in-place fill); one
        # lock keeps them consistent when a gateway calls from several threads.
        self._lock = threading.Lock()

    @property
    def config(self) -> LoopDetectionConfig:
        return self._config

    def __repr__(self) -> str:
        return f"LoopDetector(enabled={self._enabled}, scopes={len(self._store)})"

    # -- public API ---------------------------------------------------------------------

    def check(
        self, tool_name: str, args: Any, *, session: Hashable = None, run_id: str | None = None
    ) -> Verdict:
        """The verdict for a call about to run, against its scope's history."""
        key = scope_key(session, run_id)
        if not self._enabled:
            check_tool_name(tool_name)
            return NOT_STUCK
        return self._check(key, tool_name, args, hash_call(tool_name, args))

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
        key = scope_key(session, run_id)
        self._record_call(key, tool_name, hash_call(tool_name, args), _check_call_id(tool_call_id))

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
        key = scope_key(session, run_id)
        args_hash = hash_call(tool_name, args)
        _, record = self._record_outcome(
            key, tool_name, args, args_hash, result, error, _check_call_id(tool_call_id)
        )
        return record

    def history(self, *, session: Hashable = None, run_id: str | None = None) -> list[CallRecord]:
        """The scope's records, oldest first."""
        key = scope_key(session, run_id)
        with self._lock:
            raw = self._store.records(key)
        return [self._as_record(key, item) for item in raw]

    def end_run(self, *, session: Hashable = None, run_id: str | None = None) -> None:
        """Forget one scope's history."""
        key = scope_key(session, run_id)
        with self._lock:
            self._store.drop(key)

    def end_session(self, session: Hashable) -> None:
        """Forget the history of every run of ``session``."""
        scope_key(session, None)
        with self._lock:
            self._store.drop_session(session)

    # -- shared with ToolLoopGuard, which hashes the args once per call ------------------

    @property
    def enabled(self) -> bool:
        return self._enabled

    def _check(self, key: ScopeKey, tool_name: str, args: Any, args_hash: int) -> Verdict:
        with self._lock:
            stats = self._store.scan(key, tool_name, args_hash)
        return verdict_from(
            stats, self._config, tool_name, args_hash, is_known_poll(tool_name, args)
        )

    def _record_call(
        self, key: ScopeKey, tool_name: str, args_hash: int, tool_call_id: str | None
    ) -> None:
        now = time.time()
        with self._lock:
            self._store.append(key, tool_name, args_hash, tool_call_id, now)

    def _record_outcome(
        self,
        key: ScopeKey,
        tool_name: str,
        args: Any,
        args_hash: int,
        result: Any,
        error: Any,
        tool_call_id: str | None,
    ) -> tuple[int | None, CallRecord | None]:
        """Hash and store an outcome; returns ``(result_hash, record)``."""
        result_hash, unknown = hash_outcome(
            tool_name,
            args,
            result=result,
            error=error,
            normalizers=self._normalizers,
            send_tools=self._send_tools,
        )
        if result_hash is None:
            return None, None
        now = time.time()
        with self._lock:
            raw = self._store.attach(key, tool_name, args_hash, tool_call_id, result_hash, unknown)
            if raw is None:
                raw = self._store.append(
                    key, tool_name, args_hash, tool_call_id, now, result_hash, unknown
                )
        return result_hash, self._as_record(key, raw)

    @staticmethod
    def _as_record(key: ScopeKey, raw: RawRecord) -> CallRecord:
        tool_name, args_hash, tool_call_id, timestamp, result_hash, unknown = raw
        return CallRecord(
            tool_name, args_hash, tool_call_id, key[0], key[1], timestamp, result_hash, unknown
        )

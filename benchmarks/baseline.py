"""What would a competent developer write without loopcore? The plain-Python baseline leg.

The straightforward implementation of SPEC §3-5 that the benchmarks compare
loopcore against: each scope keeps a list of dicts (the oldest popped past
``historySize``), calls and outcomes are fingerprinted as the SHA-256 of their
``json.dumps`` (keys sorted), and the SPEC §4 quantities are computed by plain
list scans, then put through the same verdict table. It is meant to be fair,
not sandbagged: no lock, no LRU bookkeeping, no post-compaction guard and none
of the SPEC §2 outcome rules (exec, process, sends, update_plan), so it does
less work per call than loopcore does. Its verdicts (level, detector, count)
match loopcore's for plain tools; ``test_bench_stuck_run.py`` checks that.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BaselineDecision", "BaselineDetector", "BaselineVerdict"]

logger = logging.getLogger("loopcore.benchmarks.baseline")

_UNSET: Any = object()

_DEFAULTS = {
    "historySize": 30,
    "warningThreshold": 10,
    "criticalThreshold": 20,
    "unknownToolThreshold": 10,
    "globalCircuitBreakerThreshold": 30,
}
_DETECTORS = {"genericRepeat": True, "knownPollNoProgress": True, "pingPong": True}

_UNKNOWN_TOOL = re.compile(
    r"unknown\s+tool(?::\s*|\s+)['\"`]?([a-z0-9_.-]+)"
    r"|tool\s+['\"`]?([a-z0-9_.-]+)['\"`]?\s+(?:not\s+found|is\s+not\s+available)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class BaselineVerdict:
    """What ``check`` says; ``bool(verdict)`` is ``stuck``."""

    stuck: bool = False
    level: str | None = None
    detector: str | None = None
    count: int = 0
    message: str | None = None
    warning_key: str | None = None

    def __bool__(self) -> bool:
        return self.stuck


@dataclass(frozen=True, slots=True)
class BaselineDecision:
    """What ``before_call`` decided."""

    blocked: bool
    reason: str | None
    verdict: BaselineVerdict
    warning: BaselineVerdict | None = None


NOT_STUCK = BaselineVerdict()


def fingerprint_call(tool_name: str, args: Any) -> str:
    """SHA-256 hex digest of the JSON of ``[tool_name, args]``, keys sorted."""
    data = json.dumps([tool_name, args], sort_keys=True, default=repr)
    return hashlib.sha256(data.encode()).hexdigest()


def fingerprint_result(result: Any) -> str:
    """SHA-256 hex digest of the JSON of a tool's result, keys sorted."""
    data = json.dumps(result, sort_keys=True, default=repr)
    return hashlib.sha256(data.encode()).hexdigest()


def _is_known_poll(tool_name: str, args: Any) -> bool:
    if tool_name == "command_status":
        return True
    return (
        tool_name == "process"
        and isinstance(args, Mapping)
        and args.get("action") in ("poll", "log")
    )


def _critical(detector: str, count: int, message: str, key: str) -> BaselineVerdict:
    return BaselineVerdict(True, "critical", detector, count, "CRITICAL: " + message, key)


def _warning(detector: str, count: int, message: str, key: str) -> BaselineVerdict:
    return BaselineVerdict(True, "warning", detector, count, "WARNING: " + message, key)


class BaselineDetector:
    """Per-scope call history as lists of dicts, with the SPEC §4 checks and §5 hook."""

    def __init__(self, config: Mapping[str, Any] | None = None, *, max_scopes: int = 100_000):
        config = dict(config or {})
        detectors = {**_DETECTORS, **config.pop("detectors", {})}
        settings = {**_DEFAULTS, **config}
        self.enabled = settings.get("enabled") is True
        self.history_size: int = settings["historySize"]
        self.warning_at: int = settings["warningThreshold"]
        self.critical_at: int = max(settings["criticalThreshold"], self.warning_at + 1)
        self.unknown_at: int = settings["unknownToolThreshold"]
        self.global_at: int = max(settings["globalCircuitBreakerThreshold"], self.critical_at + 1)
        self.generic_repeat: bool = detectors["genericRepeat"]
        self.known_poll: bool = detectors["knownPollNoProgress"]
        self.ping_pong: bool = detectors["pingPong"]
        self.max_scopes = max_scopes
        self._scopes: dict[tuple[Hashable, str | None], list[dict[str, Any]]] = {}
        self._warned: dict[tuple[Hashable, str | None], dict[str, int]] = {}

    # -- history ----------------------------------------------------------------------

    @staticmethod
    def _key(session: Hashable, run_id: str | None) -> tuple[Hashable, str | None]:
        if run_id is not None:
            run_id = run_id.strip() or None
        return (session, run_id)

    def _append(self, key: tuple[Hashable, str | None], record: dict[str, Any]) -> None:
        history = self._scopes.get(key)
        if history is None:
            if len(self._scopes) >= self.max_scopes:  # forget the oldest scope
                del self._scopes[next(iter(self._scopes))]
            history = self._scopes[key] = []
        history.append(record)
        if len(history) > self.history_size:
            history.pop(0)

    def record_call(
        self,
        tool_name: str,
        args: Any,
        tool_call_id: str | None = None,
        *,
        session: Hashable = None,
        run_id: str | None = None,
    ) -> None:
        record = {
            "tool": tool_name,
            "args_fp": fingerprint_call(tool_name, args),
            "call_id": tool_call_id,
            "ts": time.time(),
            "result_fp": None,
            "unknown_tool": None,
        }
        self._append(self._key(session, run_id), record)

    def record_outcome(
        self,
        tool_name: str,
        args: Any,
        *,
        result: Any = _UNSET,
        error: Any = _UNSET,
        tool_call_id: str | None = None,
        session: Hashable = None,
        run_id: str | None = None,
    ) -> dict[str, Any] | None:
        unknown = None
        if error is not _UNSET and error is not None:
            text = str(error) or type(error).__name__
            result_fp = "error:" + hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
            match = _UNKNOWN_TOOL.search(text)
            if match:
                unknown = (match.group(1) or match.group(2)).rstrip(".").lower()
        elif result is not _UNSET:
            result_fp = fingerprint_result(result)
        else:
            return None
        key = self._key(session, run_id)
        args_fp = fingerprint_call(tool_name, args)
        records: list[dict[str, Any]] = self._scopes.get(key) or []
        for pending in reversed(records):
            if (
                pending["result_fp"] is None
                and pending["args_fp"] == args_fp
                and pending["tool"] == tool_name
                and (tool_call_id is None or pending["call_id"] == tool_call_id)
            ):
                pending["result_fp"] = result_fp
                pending["unknown_tool"] = unknown
                return pending
        record = {
            "tool": tool_name,
            "args_fp": args_fp,
            "call_id": tool_call_id,
            "ts": time.time(),
            "result_fp": result_fp,
            "unknown_tool": unknown,
        }
        self._append(key, record)
        return record

    def history(self, *, session: Hashable = None, run_id: str | None = None) -> list[Any]:
        return list(self._scopes.get(self._key(session, run_id), ()))

    def __len__(self) -> int:
        return len(self._scopes)

    # -- detection (SPEC §4) ------------------------------------------------------------

    def check(
        self, tool_name: str, args: Any, *, session: Hashable = None, run_id: str | None = None
    ) -> BaselineVerdict:
        if not self.enabled:
            return NOT_STUCK
        return self._check(self._key(session, run_id), tool_name, args)

    def _check(
        self, key: tuple[Hashable, str | None], tool_name: str, args: Any
    ) -> BaselineVerdict:
        history = self._scopes.get(key)
        if not history:
            return NOT_STUCK
        fp = fingerprint_call(tool_name, args)

        # recent count and no-progress streak over the earlier calls with these args
        same = [record for record in history if record["args_fp"] == fp]
        recent = len(same)
        streak = 0
        reference = None
        for record in reversed(same):
            result_fp = record["result_fp"]
            if result_fp is None:
                continue
            if reference is None:
                reference = result_fp
            elif result_fp != reference:
                break
            streak += 1

        # unknown-tool streak
        unknown_streak = 0
        newest = history[-1]
        unknown_name = newest["unknown_tool"] if newest["tool"] == tool_name else None
        if unknown_name is not None:
            for record in reversed(history):
                if record["tool"] != tool_name or record["unknown_tool"] != unknown_name:
                    break
                unknown_streak += 1

        # ping-pong: the tail A, B, A, B, ... and whether this call continues it
        pingpong = 0
        pingpong_no_progress = False
        side_a = newest["args_fp"]
        side_b = None
        for record in reversed(history):
            if record["args_fp"] != side_a:
                side_b = record["args_fp"]
                break
        if side_b is not None and fp == side_b:
            tail = []
            for position, record in enumerate(reversed(history)):
                if record["args_fp"] != (side_a if position % 2 == 0 else side_b):
                    break
                tail.append(record)
            if len(tail) >= 2:
                pingpong = len(tail) + 1
                results_a = {record["result_fp"] for record in tail[0::2]}
                results_b = {record["result_fp"] for record in tail[1::2]}
                pingpong_no_progress = (
                    None not in results_a
                    and None not in results_b
                    and len(results_a) == 1
                    and len(results_b) == 1
                )

        # the verdict table, first match wins
        known_poll = _is_known_poll(tool_name, args)
        if unknown_streak >= self.unknown_at:
            return _critical(
                "unknown_tool_repeat",
                unknown_streak,
                f"{tool_name} failed {unknown_streak} times: tool '{unknown_name}' is not "
                "available. Stop calling it.",
                f"unknown_tool_repeat:{tool_name}:{unknown_name}",
            )
        no_progress_key = f"{tool_name}:{fp}:{reference}"
        if streak >= self.global_at:
            return _critical(
                "global_circuit_breaker",
                streak,
                f"{tool_name} returned the same result {streak} times; global circuit breaker.",
                f"global_circuit_breaker:{no_progress_key}",
            )
        if known_poll and self.known_poll:
            poll_key = f"known_poll_no_progress:{no_progress_key}"
            if streak >= self.critical_at:
                return _critical(
                    "known_poll_no_progress",
                    streak,
                    f"{tool_name} polled {streak} times with no progress. Stop polling.",
                    poll_key,
                )
            if streak >= self.warning_at:
                return _warning(
                    "known_poll_no_progress",
                    streak,
                    f"{tool_name} polled {streak} times with no progress. Wait longer.",
                    poll_key,
                )
        if self.ping_pong and pingpong:
            pair_key = "ping_pong:" + ":".join(sorted((fp, side_a)))
            if pingpong >= self.critical_at and pingpong_no_progress:
                return _critical(
                    "ping_pong",
                    pingpong,
                    f"{pingpong} times in a ping-pong loop with {tool_name}, no progress. Stop.",
                    pair_key,
                )
            if pingpong >= self.warning_at:
                return _warning(
                    "ping_pong",
                    pingpong,
                    f"{pingpong} times in a ping-pong loop with {tool_name}. Try something else.",
                    pair_key,
                )
        if not known_poll and self.generic_repeat:
            if streak >= self.critical_at:
                return _critical(
                    "generic_repeat",
                    streak,
                    f"{tool_name} called {streak} times with identical outcomes. Stop.",
                    f"generic_repeat:critical:{no_progress_key}",
                )
            if recent >= self.warning_at:
                return _warning(
                    "generic_repeat",
                    recent,
                    f"{tool_name} called {recent} times with identical arguments.",
                    f"generic_repeat:{tool_name}:{fp}",
                )
        return NOT_STUCK

    # -- the gateway hook (SPEC §5) -----------------------------------------------------

    def before_call(
        self,
        tool_name: str,
        args: Any,
        *,
        tool_call_id: str | None = None,
        session: Hashable = None,
        run_id: str | None = None,
    ) -> BaselineDecision:
        key = self._key(session, run_id)
        verdict = self._check(key, tool_name, args) if self.enabled else NOT_STUCK
        warning = None
        if verdict.level == "critical":
            logger.error("tool loop blocked: tool=%s detector=%s", tool_name, verdict.detector)
            return BaselineDecision(True, verdict.message, verdict)
        if verdict.stuck:
            warned = self._warned.setdefault(key, {})
            multiple = verdict.count // self.warning_at
            if multiple > warned.get(verdict.warning_key or "", 0):
                warned[verdict.warning_key or ""] = multiple
                logger.warning(
                    "tool loop warning: tool=%s detector=%s", tool_name, verdict.detector
                )
                warning = verdict
        self.record_call(tool_name, args, tool_call_id, session=session, run_id=run_id)
        return BaselineDecision(False, None, verdict, warning)

    def after_call(
        self,
        tool_name: str,
        args: Any,
        *,
        result: Any = _UNSET,
        error: Any = _UNSET,
        tool_call_id: str | None = None,
        session: Hashable = None,
        run_id: str | None = None,
    ) -> dict[str, Any] | None:
        return self.record_outcome(
            tool_name,
            args,
            result=result,
            error=error,
            tool_call_id=tool_call_id,
            session=session,
            run_id=run_id,
        )

"""What runs on every tool call, before the rules are consulted? (the per-call path, Python twin)

``DetectorCalls`` (``check``, ``record_call``, ``record_outcome``) and
``GuardCalls`` (``before_call``, ``after_call``) are the bases of
``LoopDetector`` and ``ToolLoopGuard``: they validate the scope and names,
hash the call and its outcome, and hand the hashes to the store. A scan that
the store calls quiet ends the call here; anything else goes to the policy
methods the subclass defines (``_verdict``: the verdict table; ``_decide``: what
a stuck verdict does; ``_observe``: the post-compaction guard), plain Python in
``_detector`` and ``_hook``. The compiled twin is the same path in C.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from ._outcome_py import (
    UNSET,
    Normalizer,
    check_call_id,
    check_tool_name,
    hash_call,
    hash_outcome,
)
from ._records import NOT_STUCK, CallRecord, ScanStats, Verdict
from ._scopes import ScopeKey, scope_key

__all__ = ["IMPLEMENTATION", "DetectorCalls", "GuardCalls"]

IMPLEMENTATION = "python"


class _Calls:
    """What both per-call bases hold: the store, the switch and the outcome settings."""

    # No __slots__: the policy subclass's instances carry their own attributes.
    _store: Any
    _enabled: bool
    _alarm: int
    _unknown_alarm: int
    _normalizers: Mapping[str, Normalizer]
    _send_tools: frozenset[str]

    def _bind_calls(
        self,
        store: Any,
        enabled: bool,
        alarm: int,
        unknown_alarm: int,
        normalizers: Mapping[str, Normalizer],
        send_tools: frozenset[str],
    ) -> None:
        self._store = store
        self._enabled = enabled
        self._alarm = alarm
        self._unknown_alarm = unknown_alarm
        self._normalizers = normalizers
        self._send_tools = send_tools

    def _attach(
        self,
        tool_name: str,
        args: Any,
        result: Any,
        error: Any,
        tool_call_id: str | None,
        key: ScopeKey,
    ) -> CallRecord | None:
        args_hash = hash_call(tool_name, args)
        check_call_id(tool_call_id)
        result_hash, unknown = hash_outcome(
            tool_name,
            args,
            result=result,
            error=error,
            normalizers=self._normalizers,
            send_tools=self._send_tools,
        )
        if result_hash is None:
            return None
        record: CallRecord = self._store.attach(
            key, tool_name, args_hash, tool_call_id, result_hash, unknown
        )
        return record


class DetectorCalls(_Calls):
    """``LoopDetector``'s per-call methods."""

    def _verdict(self, stats: ScanStats, tool_name: str, args: Any, args_hash: int) -> Verdict:
        raise NotImplementedError  # the policy subclass decides

    def check(
        self, tool_name: str, args: Any, *, session: Hashable = None, run_id: str | None = None
    ) -> Verdict:
        """The verdict for a call about to run, against its scope's history."""
        key = scope_key(session, run_id)
        if not self._enabled:
            check_tool_name(tool_name)
            return NOT_STUCK
        args_hash = hash_call(tool_name, args)
        stats = self._store.scan(key, tool_name, args_hash, self._alarm, self._unknown_alarm)
        if stats is None:
            return NOT_STUCK
        return self._verdict(stats, tool_name, args, args_hash)

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
        args_hash = hash_call(tool_name, args)
        check_call_id(tool_call_id)
        self._store.append(key, tool_name, args_hash, tool_call_id)

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
        return self._attach(
            tool_name, args, result, error, tool_call_id, scope_key(session, run_id)
        )


class GuardCalls(_Calls):
    """``ToolLoopGuard``'s two calls around a tool execution."""

    _armed: Mapping[ScopeKey, object]
    _allowed: Any

    def _bind_guard(self, armed: Mapping[ScopeKey, object], allowed: Any) -> None:
        self._armed = armed
        self._allowed = allowed

    def _verdict(self, stats: ScanStats, tool_name: str, args: Any, args_hash: int) -> Verdict:
        raise NotImplementedError  # the policy subclass decides

    def _decide(
        self,
        verdict: Verdict,
        tool_name: str,
        args_hash: int,
        key: ScopeKey,
        tool_call_id: str | None,
    ) -> Any:
        raise NotImplementedError  # the policy subclass decides

    def _observe(
        self, record: CallRecord | None, tool_name: str, args: Any, key: ScopeKey
    ) -> CallRecord | None:
        raise NotImplementedError  # the policy subclass decides

    def before_call(
        self,
        tool_name: str,
        args: Any,
        *,
        tool_call_id: str | None = None,
        session: Hashable = None,
        run_id: str | None = None,
    ) -> Any:
        """Check a call about to run; record it unless it is blocked."""
        key = scope_key(session, run_id)
        args_hash = hash_call(tool_name, args)
        check_call_id(tool_call_id)
        if not self._enabled:
            self._store.append(key, tool_name, args_hash, tool_call_id)
            return self._allowed
        stats = self._store.scan_append(
            key, tool_name, args_hash, tool_call_id, self._alarm, self._unknown_alarm
        )
        if stats is None:
            return self._allowed  # quiet: already appended
        verdict = self._verdict(stats, tool_name, args, args_hash)
        if not verdict.stuck:
            self._store.append(key, tool_name, args_hash, tool_call_id)
            return self._allowed
        return self._decide(verdict, tool_name, args_hash, key, tool_call_id)

    def after_call(
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
        """Record a call's outcome; raises CompactionLoopPersisted when the guard trips."""
        key = scope_key(session, run_id)
        record = self._attach(tool_name, args, result, error, tool_call_id, key)
        if not self._armed:
            return record
        return self._observe(record, tool_name, args, key)

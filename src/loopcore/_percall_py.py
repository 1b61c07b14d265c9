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
from contextvars import ContextVar
from typing import Any

from ._outcome_py import (
    UNSET,
    Normalizer,
    check_call_id,
    check_tool_name,
    hash_call,
    outcome_of,
)
from ._records import KIND_VALIDATION, KIND_VETO, NOT_STUCK, CallRecord, ScanStats, Verdict
from ._scopes import ScopeKey, scope_key, session_of

__all__ = ["IMPLEMENTATION", "UNSCOPED", "DetectorCalls", "GuardCalls"]

IMPLEMENTATION = "python"


class _Unscoped:
    """The default of a guard's ``session``/``run_id``: "use the active ``scope()``" (§9.2)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<active scope>"

    def __reduce__(self) -> str:
        return "UNSCOPED"


UNSCOPED: Any = _Unscoped()


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
        vetoes: bool = True,
        validation: bool = False,
    ) -> CallRecord | None:
        """Record an outcome; a loop veto only when ``vetoes`` (the guard has its own)."""
        args_hash = hash_call(tool_name, args)
        check_call_id(tool_call_id)
        result_hash, unknown, kind, identity, no_progress = outcome_of(
            tool_name,
            args,
            result=result,
            error=error,
            normalizers=self._normalizers,
            send_tools=self._send_tools,
        )
        if kind == KIND_VETO:
            if not vetoes:
                return None
        elif result_hash is None:
            return None
        elif validation:
            kind = KIND_VALIDATION
        record: CallRecord = self._store.attach(
            key,
            tool_name,
            args_hash,
            tool_call_id,
            result_hash,
            unknown,
            kind,
            identity,
            no_progress,
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
        validation_failure: bool = False,
    ) -> CallRecord | None:
        """Attach an outcome to the newest pending matching call, or append one."""
        return self._attach(
            tool_name,
            args,
            result,
            error,
            tool_call_id,
            scope_key(session, run_id),
            validation=validation_failure is True,
        )


class GuardCalls(_Calls):
    """``ToolLoopGuard``'s two calls around a tool execution."""

    _armed: dict[ScopeKey, Any]
    _churning: dict[ScopeKey, Any]
    _noted: dict[ScopeKey, Any]
    _allowed: Any
    _scope_var: ContextVar[ScopeKey]
    _scope_used: bool
    _calls: int

    def _bind_guard(
        self,
        armed: dict[ScopeKey, Any],
        churning: dict[ScopeKey, Any],
        noted: dict[ScopeKey, Any],
        allowed: Any,
        scope_var: ContextVar[ScopeKey],
    ) -> None:
        self._armed = armed
        self._churning = churning
        self._noted = noted
        self._allowed = allowed
        self._scope_var = scope_var
        self._scope_used = False
        self._calls = 0

    def _active_key(self, session: Hashable, run_id: Any) -> ScopeKey:
        """SPEC §9.2: a keyword left out is the active ``scope()``'s."""
        active = self._scope_var.get()
        return scope_key(
            session_of(active) if session is UNSCOPED else session,
            active[1] if run_id is UNSCOPED else run_id,
        )

    def _key(self, session: Hashable, run_id: Any) -> ScopeKey:
        """The scope a guard method works on: the keywords given, the active scope for the rest."""
        if session is UNSCOPED or run_id is UNSCOPED:
            return self._active_key(session, run_id)
        return scope_key(session, run_id)

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

    def _settle(self, key: ScopeKey) -> None:
        raise NotImplementedError  # the policy subclass ends a churn

    def _fail_closed(
        self, error: Exception, tool_name: str, args_hash: int, key: ScopeKey, call_id: Any
    ) -> Any:
        raise NotImplementedError  # the policy subclass blocks

    def _annotated(self, record: CallRecord | None, key: ScopeKey, result: Any) -> Any:
        raise NotImplementedError  # the policy subclass adds a warning's note

    def before_call(
        self,
        tool_name: str,
        args: Any,
        *,
        tool_call_id: str | None = None,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> Any:
        """Check a call about to run; record it (a blocked one as a loop veto)."""
        key = self._key(session, run_id)
        args_hash = hash_call(tool_name, args)
        check_call_id(tool_call_id)
        self._calls += 1
        if not self._enabled:
            self._store.append(key, tool_name, args_hash, tool_call_id)
            return self._allowed
        try:
            stats = self._store.scan_append(
                key, tool_name, args_hash, tool_call_id, self._alarm, self._unknown_alarm
            )
            # None: quiet, already appended.
            verdict = None if stats is None else self._verdict(stats, tool_name, args, args_hash)
        except Exception as exc:  # SPEC §8.2: a check that fails blocks
            return self._fail_closed(exc, tool_name, args_hash, key, tool_call_id)
        if verdict is None or not verdict.stuck:
            if verdict is not None:
                self._store.append(key, tool_name, args_hash, tool_call_id)
            if self._churning and key in self._churning:
                self._settle(key)
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
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> Any:
        """Record a call's outcome; the result the model should see (with a warning's note).

        Raises CompactionLoopPersisted when the post-compaction guard trips.
        """
        key = self._key(session, run_id)
        record = self._attach(tool_name, args, result, error, tool_call_id, key, vetoes=False)
        if self._armed:
            self._observe(record, tool_name, args, key)
        if self._noted and key in self._noted:
            return self._annotated(record, key, result)
        return None if result is UNSET else result

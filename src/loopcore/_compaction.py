"""What does the gateway hook do around a context compaction? (SPEC §6, §8.10)

``CompactionPolicy`` is the part of ``ToolLoopGuard`` that arms a scope's
post-compaction guard (its baseline: the scope's 16 newest completed calls)
and feeds it each outcome while armed; a window that fills with one identical
call aborts the run (``CompactionLoopPersisted``). Each step is split into
what changes the guard (under the hook's lock, or on a shared store's copy)
and what is logged, emitted and raised once that is done.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

from . import _outcome
from ._decisions import LoopEvent
from ._guard import (
    CompactionLoopPersisted,
    GuardVerdict,
    PostCompactionGuard,
    WindowSummary,
    arm_quietly,
    log_abort,
    log_armed,
    log_window_closed,
    observe_quietly,
)
from ._logs import escape, logger
from ._percall_py import UNSCOPED
from ._records import CallRecord
from ._rules import COMPACTION_LOOP_PERSISTED
from ._scopes import ScopeKey, session_of

if TYPE_CHECKING:
    from ._detector import LoopDetector

__all__ = ["CompactionPolicy", "arm_with_baseline", "observed"]


def arm_with_baseline(
    guard: PostCompactionGuard, history: Sequence[CallRecord]
) -> tuple[bool, WindowSummary | None]:
    """Arm ``guard``; an unarmed one first takes the baseline of ``history``'s completed calls."""
    if not guard.armed:
        for record in [r for r in history if r.result_hash is not None][-16:]:
            observe_quietly(guard, record.tool_name, record.args_hash, record.result_hash)
    return arm_quietly(guard)


class CompactionPolicy:
    """The post-compaction methods ``ToolLoopGuard`` gets from here (attributes its own)."""

    _lock: Any
    _store: Any
    _detector: LoopDetector
    _counters: Any
    _shadow: bool
    _armed_guards: dict[ScopeKey, Any]

    if TYPE_CHECKING:  # what the other bases of ToolLoopGuard give (never shadowed here)

        def _key(self, session: Hashable, run_id: Any) -> ScopeKey: ...

        def _state(self, key: ScopeKey) -> Any: ...

        def _scoped(self, event: str, key: ScopeKey, *args: Any, **kwargs: Any) -> Any: ...

        def _emit(self, event: LoopEvent) -> None: ...

    def arm_post_compaction(
        self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED
    ) -> None:
        """Arm the scope's post-compaction guard; call when retrying after a compaction."""
        key = self._key(session, run_id)
        if self._detector.config.enabled is False:
            return
        # The baseline: the scope's last completed calls (read before the lock).
        history = self._store.history(key)
        window = self._detector.config.post_compaction_guard.window_size
        with self._lock:
            state = self._state(key)
            armed, closed = arm_with_baseline(state.post_compaction(window), history)
            self._armed_guards[key] = state
        self._log_arming(key, window, armed, closed)

    def _log_arming(
        self, key: ScopeKey, window: int, armed: bool, closed: WindowSummary | None
    ) -> None:
        """An arming's log lines and event (with the lock released: handlers are host code)."""
        if closed is not None:
            log_window_closed(closed, *self._scoped("guard_window_closed", key))
        if armed:
            log_armed(window, *self._scoped("guard_armed", key, count=window))
        self._emit(
            LoopEvent(
                "guard_armed",
                session_of(key),
                key[1],
                "",
                None,
                None,
                window,
                f"post-compaction guard armed for {window} attempts",
            )
        )

    def _observe(
        self, record: CallRecord | None, tool_name: str, args: Any, key: ScopeKey
    ) -> CallRecord | None:
        """Feed an armed post-compaction guard; raises when it trips."""
        args_hash, result_hash = observed(record, tool_name, args)
        with self._lock:
            state = self._armed_guards.get(key)
            if state is None or state.guard is None:
                return record
            verdict, closed = observe_quietly(state.guard, tool_name, args_hash, result_hash)
            if not state.guard.armed:
                del self._armed_guards[key]
            self._count_abort(verdict)
        self._observed(verdict, closed, key, tool_name, state.guard.window_size)
        return record

    def _count_abort(self, verdict: GuardVerdict) -> None:
        if verdict.should_abort:
            if self._shadow:
                self._counters.shadow(COMPACTION_LOOP_PERSISTED, "critical", "abort")
            else:
                self._counters.aborted()

    def _observed(
        self,
        verdict: GuardVerdict,
        closed: WindowSummary | None,
        key: ScopeKey,
        tool_name: str,
        window_size: int,
    ) -> None:
        """An observation's log lines and event; raises the abort in enforce mode."""
        if closed is not None:
            log_window_closed(closed, *self._scoped("guard_window_closed", key))
        if not verdict.should_abort:
            return
        message = verdict.message
        suffix, fields = self._scoped(
            "compaction_abort", key, tool_name, COMPACTION_LOOP_PERSISTED, "critical",
            verdict.count,
        )  # fmt: skip
        if self._shadow:
            logger.warning(
                "would have aborted the run: %s%s", escape(message or "", None), suffix,
                extra=fields,
            )  # fmt: skip
        else:
            log_abort(verdict, window_size, suffix, fields)
        self._emit(
            LoopEvent(
                "compaction_abort",
                session_of(key),
                key[1],
                tool_name,
                COMPACTION_LOOP_PERSISTED,
                "critical",
                verdict.count,
                message,
                shadow=self._shadow,
            )
        )
        if not self._shadow:
            raise CompactionLoopPersisted(tool_name, verdict.count, message)


def observed(record: CallRecord | None, tool_name: str, args: Any) -> tuple[int, int | None]:
    """What the guard observes of an outcome: (args hash, result hash or None)."""
    if record is not None:
        return record.args_hash, record.result_hash
    return _outcome.hash_call(tool_name, args), None

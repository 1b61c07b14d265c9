"""What does the gateway hook do with a stuck verdict? (SPEC §5, §8.1-§8.3, §8.12, §9.3-§9.5)

``StuckPolicy`` is the part of ``ToolLoopGuard`` the per-call twin calls up to
when a scan is not quiet: a critical is recorded as a veto and blocks the call
(recover-once: the scope's first critical lets the run go on, a later one ends
it), a warning is recorded with its bucket, its note for the model and its
liveness observation; the block and warning lines (scoped, structured,
storm-controlled) and the events go out once the hook's lock is released.
Shadow mode decides the same and acts on nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from logging import DEBUG
from typing import Any

from . import _outcome
from ._decisions import (
    TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE,
    Decision,
    EventKind,
    LoopEvent,
    blocked_text,
    model_note,
)
from ._logs import escape, extra, logger, scope_suffix, storm_level
from ._records import KIND_VETO, CallRecord, ScanStats, Verdict
from ._rules import LOOP_ADMISSION_FAILURE, Verdicts
from ._scopes import ScopeKey, ScopeLock, ScopeTable, scope_key, session_of
from ._state import ScopeState
from ._stats import Counters

__all__ = ["StuckPolicy"]

_ADMISSION_MESSAGE = "Tool execution was blocked because loop safety checks failed."


def _annotate(result: Any, note: str) -> Any:
    """SPEC §8.12: the result with the note as its last text block (input not mutated)."""
    if type(result) is str:
        return result + "\n\n" + note
    if isinstance(result, Mapping) and isinstance(result.get("content"), list):
        block = {"type": "text", "text": note}
        content = result["content"]
        if content and content[-1] == block:
            return result
        copy = dict(result)
        copy["content"] = [*content, block]
        return copy
    return result


class StuckPolicy:
    """The policy methods ``ToolLoopGuard`` gets from here (attributes set by its ``__init__``)."""

    _store: Any
    _lock: ScopeLock
    _raw_lock: Any
    _states: ScopeTable[ScopeState]
    _counters: Counters
    _block_tally: dict[tuple[str, str, bool], int]
    _storm: tuple[Any, ...] | None
    _shadow: bool
    _churn: bool
    _verdicts: Verdicts
    _warning_threshold: int
    _on_event: Callable[[LoopEvent], object] | None
    _churning: dict[ScopeKey, Any]
    _noted: dict[ScopeKey, Any]
    _scope: ContextVar[ScopeKey]

    def _state(self, key: ScopeKey) -> ScopeState:
        raise NotImplementedError  # ToolLoopGuard keeps the table

    def _verdict(self, stats: ScanStats, tool_name: str, args: Any, args_hash: int) -> Verdict:
        """The verdict table for a scan the store did not call quiet."""
        return self._verdicts(stats, tool_name, args_hash, _outcome.is_known_poll(tool_name, args))

    def _decide(
        self,
        verdict: Verdict,
        tool_name: str,
        args_hash: int,
        key: ScopeKey,
        tool_call_id: str | None,
    ) -> Decision:
        """Block a critical call (recover once), or record the call and warn once per multiple."""
        if verdict.level == "critical":
            storm = self._storm
            if (
                storm is not None
                and storm[1] is verdict
                and storm[2] == args_hash
                and storm[0] == key
                and storm[3] == tool_call_id
                and type(tool_name) is str
                and storm[4] == tool_name
            ):
                # A loop storm: the same terminal block once more, written out inline
                # (thousands of retries); only its counts change.
                state = storm[5]
                call = (tool_name, args_hash)
                counted = storm[7]
                tally = self._block_tally
                blocks = 0
                # Existing keys only (or a dict growing its table): no container
                # is allocated, so no collection can run host code under the lock.
                with self._raw_lock:
                    if self._storm is storm:
                        blocks = state.blocks.get(call, 0) + 1
                        state.blocks[call] = blocks
                        tally[counted] = tally.get(counted, 0) + 1
                if blocks:
                    self._store.append(key, tool_name, args_hash, tool_call_id, KIND_VETO)
                    if blocks & (blocks - 1) == 0 or logger.isEnabledFor(DEBUG):
                        self._log_block(verdict, tool_name, key, blocks, True)
                    decision: Decision = storm[6]
                    if self._on_event is not None:
                        self._blocked_event(decision, key)
                    return decision
            return self._critical(verdict, tool_name, args_hash, key, tool_call_id)
        self._store.append(key, tool_name, args_hash, tool_call_id)
        decision, after = self._warned(verdict, tool_name, args_hash, key, tool_call_id)
        after()
        return decision

    def _critical(
        self,
        verdict: Verdict,
        tool_name: str,
        args_hash: int,
        key: ScopeKey,
        tool_call_id: str | None,
        veto: bool = True,
        sibling: bool = False,
        deferred: list[Callable[[], None]] | None = None,
        seen: bool | None = None,
    ) -> Decision:
        """A critical: recover-once state, the veto, the log line and the event.

        A loop storm retries one blocked call thousands of times, so this path
        is kept short: the decision of a repeat is the one built last time.
        With ``deferred``, the log line and event are left to the caller.
        ``seen`` is a shared store's answer for ``critical_seen`` (tested and
        set with the veto it wrote), in place of this process's own.
        """
        with self._lock:
            state = self._states.get(key) or self._state(key)
            terminal = state.critical_seen if seen is None else seen
            state.critical_seen = True
            if terminal:  # the run must end: its run-loop cutoffs stop counting (§12.13)
                state.stopped = True
            blocks = state.count_block(tool_name, args_hash)
            if self._shadow:
                self._counters.shadow(verdict.detector or "", "critical", "block")
            else:
                self._counters.blocked(verdict.detector or "", "critical", terminal)
            last = state.last_block
        if veto:
            if self._shadow:  # it runs: recorded as the executed call it is
                self._store.append(key, tool_name, args_hash, tool_call_id)
            else:
                self._store.append(key, tool_name, args_hash, tool_call_id, KIND_VETO)
        if (
            last is not None
            and last.verdict is verdict
            and last.terminal is terminal
            and last.tool_call_id == tool_call_id
            and last.args_hash == args_hash
            and last.tool_name == tool_name
            and not sibling
        ):
            decision = last
        else:
            message = verdict.message or ""
            enforce = not self._shadow
            decision = Decision(
                enforce,
                message,
                verdict,
                None,
                terminal,
                blocked_text(message, terminal, sibling) if enforce else None,
                None,
                None,
                True,
                tool_name,
                tool_call_id,
                args_hash,
            )
            if not sibling:
                state.last_block = decision
        if terminal and veto and not sibling and not self._shadow:
            counted = (verdict.detector or "", "critical", True)
            self._storm = (
                key, verdict, args_hash, tool_call_id, tool_name, state, decision, counted,
            )  # fmt: skip
        if deferred is not None:
            deferred.append(lambda: self._blocked(decision, key, blocks))
        else:
            self._blocked(decision, key, blocks)
        return decision

    def _blocked(self, decision: Decision, key: ScopeKey, blocks: int) -> None:
        """A block's log line (storm-controlled) and event, with the lock released."""
        self._log_block(decision.verdict, decision.tool_name or "", key, blocks, decision.terminal)
        if self._on_event is not None:
            self._blocked_event(decision, key)

    def _blocked_event(self, decision: Decision, key: ScopeKey) -> None:
        verdict = decision.verdict
        tool_name = decision.tool_name or ""
        self._emit(
            LoopEvent(
                "block",
                session_of(key),
                key[1],
                tool_name,
                verdict.detector,
                verdict.level,
                verdict.count,
                verdict.message,
                verdict.paired_tool_name,
                decision.terminal,
                decision.tool_call_id,
                self._shadow,
            )
        )

    def _log_block(
        self, verdict: Verdict, tool_name: str, key: ScopeKey, blocks: int, terminal: bool
    ) -> None:
        level = storm_level(blocks, logging.WARNING if self._shadow else logging.ERROR)
        if not logger.isEnabledFor(level):
            return
        event = "terminate" if terminal else "block"
        suffix, fields = self._scoped(
            event, key, tool_name, verdict.detector, verdict.level, verdict.count
        )
        head = "would have blocked" if self._shadow else "Blocking"
        end = " " + TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE if terminal else ""
        logger.log(
            level,
            "%s %s due to critical loop (blocked %d times): %s%s%s",
            head,
            escape(tool_name),
            blocks,
            escape(verdict.message or "", None),
            end,
            suffix,
            extra=fields,
        )

    def _warned(
        self,
        verdict: Verdict,
        tool_name: str,
        args_hash: int,
        key: ScopeKey,
        tool_call_id: str | None,
        noted: bool = True,
        shared: tuple[bool, int] | None = None,
    ) -> tuple[Decision, Callable[[], None]]:
        """A warning for a recorded call: buckets, note, liveness; logs for after the lock.

        ``shared`` is a shared store's answer (the bucket's first showing, the
        churn's change), which also holds the note: nothing is kept here then.
        """
        signal = verdict.liveness_signal
        note = None
        with self._lock:
            if shared is not None:
                emitted, moved = shared
                if emitted:
                    self._counters.warned(verdict.detector or "", "warning")
                    if noted and not self._shadow:
                        note = model_note(verdict.count)
                change = self._churn_event(key, tool_name, moved > 0) if moved else None
            else:
                state = self._state(key)
                emitted = state.first_warning(verdict, self._warning_threshold)
                if emitted:
                    self._counters.warned(verdict.detector or "", "warning")
                    if noted and not self._shadow:
                        note = model_note(verdict.count)
                        state.notes[(tool_name, args_hash)] = (tool_call_id, note)
                        self._noted[key] = state
                change = self._live(key, state, signal is not None, tool_name)
        decision = Decision(
            False,
            None,
            verdict,
            verdict if emitted else None,
            False,
            None,
            note,
            signal,
            False,
            tool_name,
            tool_call_id,
            args_hash,
        )

        def after() -> None:
            if emitted:
                self._log_warning(verdict, tool_name, key)
                self._emit(self._event("warning", key, tool_name, verdict, tool_call_id))
            if change is not None:
                self._emit(change)

        return decision, after

    def _log_warning(self, verdict: Verdict, tool_name: str, key: ScopeKey) -> None:
        if not logger.isEnabledFor(logging.WARNING):
            return
        suffix, fields = self._scoped(
            "warning", key, tool_name, verdict.detector, verdict.level, verdict.count
        )
        if verdict.detector == "argument_churn":
            logger.warning(
                "Argument churn warning: %s cycled through stable argument patterns%s",
                escape(tool_name),
                suffix,
                extra=fields,
            )
            return
        logger.warning(
            "Tool loop warning: %s %s %d times%s",
            escape(tool_name),
            verdict.detector,
            verdict.count,
            suffix,
            extra=fields,
        )

    def _live(
        self, key: ScopeKey, state: ScopeState, active: bool, tool_name: str = ""
    ) -> LoopEvent | None:
        """One liveness observation (caller holds the lock): a ``churn`` start or end event."""
        if not self._churn:
            return None
        now = time.monotonic()
        if active:
            self._churning[key] = state
            if state.churn_since is None:
                state.churn_since = now
                return self._churn_event(key, tool_name, True)
            state.churn_observed_at = now
            return None
        if state.churn_since is None:
            return None
        state.churn_since = state.churn_observed_at = None
        self._churning.pop(key, None)
        return self._churn_event(key, tool_name, False)

    @staticmethod
    def _churn_event(key: ScopeKey, tool_name: str, started: bool) -> LoopEvent:
        """A churn's start (count 1) or end (count 0)."""
        return LoopEvent(
            "churn", session_of(key), key[1], tool_name, "argument_churn", None, int(started), None
        )

    def _settle(self, key: ScopeKey) -> None:
        """A churning scope committed a call that is not churning: the churn ends."""
        with self._lock:
            state = self._states.get(key)
            change = self._live(key, state, False) if state is not None else None
        if change is not None:
            self._emit(change)

    def _fail_closed(
        self, error: Exception, tool_name: str, args_hash: int, key: ScopeKey, call_id: Any
    ) -> Decision:
        """SPEC §8.2: a check that raised blocks the call, as a critical without a veto."""
        logger.error(
            "tool-loop batch admission failed: %s%s",
            type(error).__name__,
            scope_suffix(session_of(key), key[1]),
            extra=extra("block", session_of(key), key[1], tool_name, LOOP_ADMISSION_FAILURE),
        )
        verdict = Verdict(True, "critical", LOOP_ADMISSION_FAILURE, 1, _ADMISSION_MESSAGE)
        return self._critical(verdict, tool_name, args_hash, key, call_id, veto=False)

    def _annotated(self, record: CallRecord | None, key: ScopeKey, result: Any) -> Any:
        """The result the model sees: with the note of the warning its call was admitted with."""
        given = result is not _outcome.UNSET
        if record is None:
            return result if given else None
        with self._lock:
            state: ScopeState | None = self._noted.get(key)
            if state is None:
                return result if given else None
            pending = state.notes.get((record.tool_name, record.args_hash))
            if pending is None or pending[0] not in (None, record.tool_call_id):
                return result if given else None
            del state.notes[(record.tool_name, record.args_hash)]
            if not state.notes:
                del self._noted[key]
        return _annotate(result, pending[1]) if given else None

    def _scoped(
        self,
        event: str,
        key: ScopeKey,
        tool: str | None = None,
        detector: str | None = None,
        level: str | None = None,
        count: int | None = None,
    ) -> tuple[str, dict[str, Any]]:
        """A line's scope suffix and ``extra`` fields."""
        session = session_of(key)
        return scope_suffix(session, key[1]), extra(
            event, session, key[1], tool, detector, level, count, self._shadow
        )

    def _event(
        self, kind: EventKind, key: ScopeKey, tool: str, verdict: Verdict, call_id: str | None
    ) -> LoopEvent:
        return LoopEvent(
            kind,
            session_of(key),
            key[1],
            tool,
            verdict.detector,
            verdict.level,
            verdict.count,
            verdict.message,
            verdict.paired_tool_name,
            False,
            call_id,
            self._shadow,
        )

    def _emit(self, event: LoopEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception as exc:
            key = scope_key(event.session, event.run_id)
            with self._lock:
                state = self._state(key)
                first = not state.event_error_logged
                state.event_error_logged = True
            if first:
                logger.error(
                    "on_event callback raised %s while handling a %s event%s",
                    type(exc).__name__,
                    event.kind,
                    scope_suffix(event.session, event.run_id),
                    extra=extra(event.kind, event.session, event.run_id, event.tool_name),
                )

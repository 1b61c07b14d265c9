"""What does a gateway call around every tool execution? (SPEC §5, §8.2-§8.12, §9.1-§9.6)

``ToolLoopGuard``'s ``before_call``/``after_call`` come from the per-call twin
(``_percall``); this class is the policy they call up to when a scan is not
quiet — recover-once, warnings and their notes, vetoes, liveness, shadow mode,
logs, events and counters — and the per-scope methods around them. Per-scope
state lives in ``_state`` (``_ScopeState``); nothing of the host runs under
the hook's lock: logs and events are written once it is released.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from logging import DEBUG
from typing import Any, TypeVar, overload

from . import _outcome, _percall, _ring
from ._config import LoopDetectionConfig, coerce_config
from ._decisions import (
    ALLOWED,
    TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE,
    BatchDecision,
    Decision,
    EventKind,
    Liveness,
    LoopEvent,
    Reconciliation,
    ToolLoopBlocked,
    ToolLoopRunTerminated,
    blocked_text,
    model_note,
)
from ._detector import LoopDetector
from ._guard import (
    CompactionLoopPersisted,
    arm_quietly,
    close_quietly,
    log_abort,
    log_armed,
    log_window_closed,
    observe_quietly,
)
from ._logs import escape, extra, logger, scope_suffix, storm_level
from ._outcome import Normalizer, check_normalizers, check_send_tools, check_tool_name
from ._percall_py import UNSCOPED, GuardCalls
from ._records import KIND_VETO, CallRecord, ScanStats, Verdict
from ._rules import (
    COMPACTION_LOOP_PERSISTED,
    LOOP_ADMISSION_FAILURE,
    Verdicts,
    alarm_thresholds,
    churn_on,
)
from ._runloop import RunStop, digest_turn
from ._scopes import ScopeKey, ScopeLock, ScopeTable, scope_key, session_of
from ._state import ScopeState
from ._stats import Counters, GuardStats
from ._wrap import check_callable, guard_function

__all__ = [
    "BatchDecision",
    "Decision",
    "LoopEvent",
    "ToolLoopBlocked",
    "ToolLoopGuard",
    "ToolLoopRunTerminated",
]

F = TypeVar("F", bound=Callable[..., Any])

_ADMISSION_MESSAGE = "Tool execution was blocked because loop safety checks failed."


def _check_on_event(on_event: object) -> Callable[[LoopEvent], object] | None:
    import inspect

    if on_event is None:
        return None
    if not callable(on_event):
        raise TypeError(f"on_event: expected a callable or None, got {type(on_event).__name__}")
    if inspect.iscoroutinefunction(on_event) or inspect.iscoroutinefunction(
        getattr(type(on_event), "__call__", None)  # noqa: B004
    ):
        raise TypeError(
            "on_event: expected a plain callable, got a coroutine function; schedule the "
            "coroutine from a plain callback"
        )
    return on_event


def _check_mode(mode: object) -> str | None:
    if mode is None or mode in ("enforce", "observe"):
        return mode
    raise ValueError(f"mode: expected 'enforce' or 'observe', got {mode!r}")


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


class ToolLoopGuard(GuardCalls):
    """The gateway hook: check, warn or block, record, and guard after compaction.

    ``mode="observe"`` (or the config's ``mode``) decides everything as
    enforce mode does but never acts: nothing is blocked, raised or noted.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> ToolLoopGuard:
        return _percall.new(cls, ToolLoopGuard, "GuardCalls")

    def __init__(
        self,
        config: LoopDetectionConfig | Mapping[str, Any] | None = None,
        *,
        normalizers: Mapping[str, Normalizer] | None = None,
        send_tools: Collection[str] = (),
        on_event: Callable[[LoopEvent], object] | None = None,
        max_scopes: int = 100_000,
        store: Any = None,
        mode: str | None = None,
    ) -> None:
        self._on_event = _check_on_event(on_event)
        config = coerce_config(config)
        self._shadow = (_check_mode(mode) or config.mode) == "observe"
        if store is None:
            store = _ring.RingStore(config.history_size, max_scopes)
        # One store, shared: the detector answers history() and check() on it.
        self._detector = LoopDetector(
            config,
            normalizers=normalizers,
            send_tools=send_tools,
            max_scopes=max_scopes,
            store=store,
        )
        self._verdicts = Verdicts(config)
        self._warning_threshold = config.warning_threshold
        self._churn = churn_on(config)
        self._run_guards = config.run_loop_guards()
        self._states: ScopeTable[ScopeState] = ScopeTable(max_scopes)
        # Scopes with an armed guard, a churn going on or a note pending: the
        # per-call twin skips all of that work while these are empty.
        self._armed_guards: dict[ScopeKey, ScopeState] = {}
        churning: dict[ScopeKey, ScopeState] = {}
        noted: dict[ScopeKey, ScopeState] = {}
        self._counters = Counters()
        self._block_tally = self._counters.block_tally()
        # The scope whose terminal block repeated last, and its state (a loop storm).
        # (key, verdict, args hash, call id, tool, state, decision, counter key)
        self._storm: tuple[Any, ...] | None = None
        self._lock = ScopeLock()
        self._raw_lock = self._lock.raw
        self._scope: ContextVar[ScopeKey] = ContextVar(
            f"loopcore.scope.{id(self):x}", default=(None, None)
        )
        alarm, unknown_alarm = alarm_thresholds(config)
        self._bind_calls(
            store,
            self._detector.enabled,
            alarm,
            unknown_alarm,
            check_normalizers(normalizers),
            check_send_tools(send_tools),
        )
        # The per-call base holds them (read-only attributes of the compiled twin).
        self._bind_guard(self._armed_guards, churning, noted, ALLOWED, self._scope)

    @property
    def detector(self) -> LoopDetector:
        return self._detector

    @property
    def config(self) -> LoopDetectionConfig:
        return self._detector.config

    @property
    def mode(self) -> str:
        return "observe" if self._shadow else "enforce"

    def __repr__(self) -> str:
        return f"ToolLoopGuard({self._detector!r}, mode={self.mode!r})"

    # -- scopes ----------------------------------------------------------------------------

    @contextmanager
    def scope(self, *, session: Hashable = None, run_id: str | None = None) -> Iterator[None]:
        """Set the scope of calls in this context (safe across asyncio tasks)."""
        key = scope_key(session, run_id)
        self._scope_used = True  # from now on, calls that leave their scope out look it up
        token = self._scope.set(key)
        try:
            yield
        finally:
            self._scope.reset(token)

    def _key(self, session: Hashable, run_id: Any) -> ScopeKey:
        if session is UNSCOPED or run_id is UNSCOPED:
            return self._active_key(session, run_id)
        return scope_key(session, run_id)

    def end_run(self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED) -> None:
        """Forget one scope: its history, warnings, recovery allowance and guard."""
        key = self._key(session, run_id)
        self._detector.end_run(session=session_of(key), run_id=key[1])
        with self._lock:
            state = self._states.pop(key, self._lock)
            self._forget(key)
            closed = close_quietly(state.guard) if state and state.guard else None
            if state is not None:
                self._counters.ended()
        if closed is not None:
            log_window_closed(closed, *self._scoped("guard_window_closed", key))

    def end_session(self, session: Hashable) -> None:
        """Forget every run of ``session``."""
        self._detector.end_session(session)
        held = scope_key(session, None)[0]  # as the tables hold it
        with self._lock:
            keys = self._states.pop_session(held)
            self._lock.bury(*keys)
            for key in keys:
                self._forget(key)
            self._counters.ended(len(keys))

    def _forget(self, key: ScopeKey) -> None:
        if self._storm is not None and self._storm[0] == key:
            self._storm = None
        self._armed_guards.pop(key, None)
        self._churning.pop(key, None)
        self._noted.pop(key, None)

    def _state(self, key: ScopeKey) -> ScopeState:
        """The scope's hook state, created on first use (caller holds the lock)."""
        state = self._states.get(key)
        if state is None:
            state = ScopeState()
            evicted = self._states.put(key, state)
            self._lock.bury(*evicted)
            for old in evicted:
                self._forget(old)
            if evicted:
                self._counters.evicted(len(evicted))
        return state

    # -- the post-compaction guard ---------------------------------------------------------

    def arm_post_compaction(
        self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED
    ) -> None:
        """Arm the scope's post-compaction guard; call when retrying after a compaction."""
        key = self._key(session, run_id)
        config = self._detector.config
        if config.enabled is False:
            return
        window = config.post_compaction_guard.window_size
        # The baseline: the scope's last completed calls (read before the lock).
        recent = [r for r in self._store.history(key) if r.result_hash is not None][-16:]
        with self._lock:
            state = self._state(key)
            guard = state.post_compaction(window)
            if not guard.armed:
                for record in recent:
                    observe_quietly(guard, record.tool_name, record.args_hash, record.result_hash)
            armed, closed = arm_quietly(guard)
            self._armed_guards[key] = state
        # Logged and emitted with the lock released: handlers are host code.
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
        if record is not None:
            args_hash, result_hash = record.args_hash, record.result_hash
        else:
            args_hash, result_hash = _outcome.hash_call(tool_name, args), None
        with self._lock:
            state = self._armed_guards.get(key)
            if state is None or state.guard is None:
                return record
            verdict, closed = observe_quietly(state.guard, tool_name, args_hash, result_hash)
            if not state.guard.armed:
                del self._armed_guards[key]
            if verdict.should_abort:
                if self._shadow:
                    self._counters.shadow(COMPACTION_LOOP_PERSISTED, "critical", "abort")
                else:
                    self._counters.aborted()
        if closed is not None:
            log_window_closed(closed, *self._scoped("guard_window_closed", key))
        if not verdict.should_abort:
            return record
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
            log_abort(verdict, state.guard.window_size, suffix, fields)
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
        return record

    # -- what a stuck verdict does ---------------------------------------------------------

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
    ) -> Decision:
        """A critical: recover-once state, the veto, the log line and the event.

        A loop storm retries one blocked call thousands of times, so this path
        is kept short: the decision of a repeat is the one built last time.
        With ``deferred``, the log line and event are left to the caller.
        """
        with self._lock:
            state = self._states.get(key) or self._state(key)
            terminal = state.critical_seen
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
    ) -> tuple[Decision, Callable[[], None]]:
        """A warning for a recorded call: buckets, note, liveness; logs for after the lock."""
        signal = verdict.liveness_signal
        note = None
        with self._lock:
            state = self._state(key)
            emitted = state.first_warning(verdict, self._warning_threshold)
            if emitted:
                self._counters.warned(verdict.detector or "", "warning")
                if noted and not self._shadow:
                    note = model_note(verdict.count)
                    state.notes[(tool_name, args_hash)] = (tool_call_id, note)
                    self._noted[key] = state
            change = self._live(key, state, signal is not None)
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

    def _live(self, key: ScopeKey, state: ScopeState, active: bool) -> LoopEvent | None:
        """One liveness observation (caller holds the lock): a ``churn`` start or end event."""
        if not self._churn:
            return None
        now = time.monotonic()
        if active:
            self._churning[key] = state
            if state.churn_since is None:
                state.churn_since = now
                return LoopEvent(
                    "churn", session_of(key), key[1], "", "argument_churn", None, 1, None
                )
            state.churn_observed_at = now
            return None
        if state.churn_since is None:
            return None
        state.churn_since = state.churn_observed_at = None
        self._churning.pop(key, None)
        return LoopEvent("churn", session_of(key), key[1], "", "argument_churn", None, 0, None)

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

    # -- batches, releases, reconciliation and liveness (SPEC §8.2, §8.3, §8.7) -----------

    def before_batch(
        self,
        calls: Sequence[Sequence[Any]],
        *,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> BatchDecision:
        """Admit one assistant turn's tool calls together: one critical blocks them all."""
        from ._batch_admission import admit

        return admit(self, calls, self._key(session, run_id))

    def release(
        self,
        tool_call_ids: Collection[str],
        *,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> int:
        """Forget admitted calls the host then skipped: they must not count as repeats."""
        if isinstance(tool_call_ids, str) or not isinstance(tool_call_ids, Collection):
            raise TypeError(
                f"tool_call_ids: expected a collection of str, got {type(tool_call_ids).__name__}"
            )
        key = self._key(session, run_id)
        ids = [i for i in tool_call_ids if type(i) is str]
        removed: int = self._store.release(key, ids)
        with self._lock:
            state = self._noted.get(key)
            if state is not None:
                for note_key, (call_id, _) in list(state.notes.items()):
                    if call_id in ids:
                        del state.notes[note_key]
        return removed

    def reconcile(
        self,
        tool_name: str,
        args: Any,
        *,
        tool_call_id: str | None = None,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
        warning_threshold: int | None = None,
    ) -> Reconciliation:
        """SPEC §8.7: re-hash the pending call a pre-call hook rewrote; a liveness observation."""
        key = self._key(session, run_id)
        answer = self._detector._reconcile(tool_name, args, tool_call_id, key, warning_threshold)
        if answer.matched_pending_call:
            with self._lock:
                change = self._live(key, self._state(key), answer.active)
            if change is not None:
                self._emit(change)
        return answer

    reconcile_call = reconcile

    def liveness(self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED) -> Liveness:
        """Is the scope churning through argument variants, and since when?"""
        key = self._key(session, run_id)
        with self._lock:
            state = self._states.get(key)
            if state is None or state.churn_since is None:
                return Liveness()
            return Liveness(True, state.churn_since, state.churn_observed_at)

    # -- run-loop cutoffs (SPEC §8.11) ----------------------------------------------------

    def before_turn(
        self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED
    ) -> RunStop | None:
        """Before each model request: a ``RunStop`` when ``turnLimit`` is reached."""
        if not any(limit is not None for limit in self._run_guards):
            return None
        key = self._key(session, run_id)
        with self._lock:
            state = self._state(key)
            stop = None if state.stopped else state.run_loop(self._run_guards).before_turn()
        return self._run_stop(stop, key)

    def end_turn(
        self,
        calls: Sequence[Any],
        *,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> RunStop | None:
        """After each assistant turn and its results: a ``RunStop`` when a cutoff is reached."""
        if not any(limit is not None for limit in self._run_guards):
            return None
        key = self._key(session, run_id)
        # Hashing args may run host code: before the lock.
        digest = digest_turn(calls, signatures=self._run_guards[2] is not None)
        with self._lock:
            state = self._state(key)
            stop = None if state.stopped else state.run_loop(self._run_guards).count_turn(digest)
        return self._run_stop(stop, key)

    def _run_stop(self, stop: RunStop | None, key: ScopeKey) -> RunStop | None:
        if stop is None:
            return None
        with self._lock:
            if self._shadow:
                self._counters.shadow(stop.guard, "critical", "run_stop")
            else:
                self._counters.run_stopped(stop.guard)
        suffix, fields = self._scoped("run_stop", key, None, stop.guard, "critical", stop.limit)
        head = "would have stopped the run: " if self._shadow else ""
        logger.warning("%s%s%s", head, stop.message, suffix, extra=fields)
        self._emit(
            LoopEvent(
                "run_stop", session_of(key), key[1], "", stop.guard, "critical", stop.limit,
                stop.message, shadow=self._shadow,
            )
        )  # fmt: skip
        return None if self._shadow else stop

    # -- counters --------------------------------------------------------------------------

    def stats(self) -> GuardStats:
        """What the guard has done so far: a frozen snapshot (SPEC §9.6)."""
        with self._lock:
            return self._counters.snapshot(
                calls=self._calls,
                live_scopes=len(self._store),
                evicted_scopes=getattr(self._store, "evicted", None),
            )

    # -- wrapping tool functions -----------------------------------------------------------

    @overload
    def wrap(self, fn: F, *, name: str | None = None) -> F: ...

    @overload
    def wrap(self, fn: None = None, *, name: str | None = None) -> Callable[[F], F]: ...

    def wrap(self, fn: F | None = None, *, name: str | None = None) -> F | Callable[[F], F]:
        """Guard a sync or async tool function; blocked calls raise ToolLoopBlocked.

        A second critical in the run raises ``ToolLoopRunTerminated`` (a
        ``ToolLoopBlocked``): end the run. A warned call returns its result
        with the model's note; a warned call's error carries the note
        (``add_note``, ``loop_note``). ``fn`` is async when it is a coroutine
        function, an object whose ``__call__`` is one, or a
        ``functools.partial`` of either; a sync ``fn`` that returns an
        awaitable gets an awaitable back, which records the awaited outcome.
        """
        if fn is None:
            return lambda f: self.wrap(f, name=name)
        check_callable(fn)
        tool_name = check_tool_name(name if name is not None else getattr(fn, "__name__", None))
        return guard_function(self, fn, tool_name)  # type: ignore[no-any-return]

    # -- logs and events -------------------------------------------------------------------

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


ToolLoopGuard.__signature__ = _percall.init_signature(ToolLoopGuard)  # type: ignore[attr-defined]

"""What does a gateway call around every tool execution? (SPEC §5, §8.2-§8.12, §9.1-§9.6)

``ToolLoopGuard``'s ``before_call``/``after_call`` come from the per-call twin
(``_percall``); what a stuck verdict does (recover-once, warnings and their
notes, vetoes, liveness, logs and events) from ``_stuck``. This module holds
the rest: scopes and their ends, the post-compaction guard, batches, releases,
reconciliation, run-loop cutoffs, shadow mode's switch, counters and
``wrap()``. Per-scope state lives in ``_state``; nothing of the host runs
under the hook's lock: logs and events are written once it is released.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, overload

from . import _percall, _ring
from ._compaction import CompactionPolicy
from ._config import LoopDetectionConfig, coerce_config
from ._decisions import (
    ALLOWED,
    BatchDecision,
    Decision,
    Liveness,
    LoopEvent,
    Reconciliation,
    ToolLoopBlocked,
    ToolLoopRunTerminated,
)
from ._detector import LoopDetector
from ._guard import (
    close_quietly,
    log_window_closed,
)
from ._logs import logger
from ._outcome import Normalizer, check_normalizers, check_send_tools, check_tool_name
from ._percall_py import UNSCOPED, GuardCalls
from ._rules import (
    alarm_thresholds,
    churn_on,
)
from ._runloop import RunStop, TurnDigest, digest_turn
from ._scopes import ScopeKey, ScopeLock, ScopeTable, scope_key, session_of
from ._state import ScopeState
from ._stats import Counters, GuardStats
from ._stuck import StuckPolicy
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


class ToolLoopGuard(StuckPolicy, CompactionPolicy, GuardCalls):
    """The gateway hook: check, warn or block, record, and guard after compaction.

    What a stuck verdict does comes from ``StuckPolicy`` (``_stuck``); the
    per-call methods from the per-call twin.

    ``mode="observe"`` (or the config's ``mode``) decides everything as
    enforce mode does but never acts: nothing is blocked, raised or noted.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> ToolLoopGuard:
        store = kwargs.get("store")
        if cls is ToolLoopGuard and getattr(store, "asynchronous", False):
            raise TypeError("store: an AsyncRedisStore needs loopcore.AsyncToolLoopGuard")
        if cls is ToolLoopGuard and getattr(store, "shared", False):
            # A store shared by a fleet: the same guard, deciding through its steps.
            from ._fleet import FleetGuard

            cls = FleetGuard
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
        elif hasattr(store, "for_history"):  # a shared store, told the history it keeps
            store = store.for_history(config.history_size)
        # One store, shared: the detector answers history() and check() on it.
        self._detector = LoopDetector(
            config,
            normalizers=normalizers,
            send_tools=send_tools,
            max_scopes=max_scopes,
            store=store,
        )
        self._verdicts = self._detector.verdicts  # one cache of answers for both
        self._warning_threshold = config.warning_threshold
        self._churn = churn_on(config)
        self._run_guards = config.run_loop_guards()
        self._cutoffs = any(limit is not None for limit in self._run_guards)
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

    def end_run(self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED) -> None:
        """Forget one scope: its history, warnings, recovery allowance and guard."""
        key = self._key(session, run_id)
        self._detector.end_run(session=session_of(key), run_id=key[1])
        self._end_local(key)

    def _end_local(self, key: ScopeKey) -> None:
        """What ``end_run`` forgets in this process."""
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
        self._end_session_local(session)

    def _end_session_local(self, session: Hashable) -> None:
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
        self._release_notes(key, ids)
        return removed

    def _release_notes(self, key: ScopeKey, ids: Collection[str]) -> None:
        with self._lock:
            state = self._noted.get(key)
            if state is not None:
                for note_key, (call_id, _) in list(state.notes.items()):
                    if call_id in ids:
                        del state.notes[note_key]

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
                change = self._live(key, self._state(key), answer.active, tool_name)
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
        if not self._cutoffs:
            return None
        return self._turned(self._key(session, run_id), None)

    def end_turn(
        self,
        calls: Sequence[Any],
        *,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> RunStop | None:
        """After each assistant turn and its results: a ``RunStop`` when a cutoff is reached."""
        if not self._cutoffs:
            return None
        # Hashing args may run host code: before the lock.
        return self._turned(self._key(session, run_id), self._digest(calls))

    def _digest(self, calls: Sequence[Any]) -> TurnDigest:
        return digest_turn(calls, signatures=self._run_guards[2] is not None)

    def _turned(self, key: ScopeKey, digest: TurnDigest | None) -> RunStop | None:
        """``before_turn`` (no digest) or ``end_turn`` on the scope's counters."""
        with self._lock:
            state = self._state(key)
            runs = state.run_loop(self._run_guards)
            if state.stopped:
                stop = None
            else:
                stop = runs.before_turn() if digest is None else runs.count_turn(digest)
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


ToolLoopGuard.__signature__ = _percall.init_signature(ToolLoopGuard)  # type: ignore[attr-defined]

"""What does a gateway call around every tool execution? (SPEC §5)"""

from __future__ import annotations

import functools
import inspect
import logging
import types
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Hashable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

from . import _outcome, _percall, _ring
from ._config import LoopDetectionConfig, coerce_config
from ._detector import NOT_STUCK, CallRecord, LoopDetector, Verdict
from ._guard import (
    CompactionLoopPersisted,
    PostCompactionGuard,
    arm_quietly,
    log_abort,
    log_armed,
    observe_quietly,
)
from ._outcome import (
    Normalizer,
    check_normalizers,
    check_send_tools,
    check_tool_name,
    is_known_poll,
)
from ._percall_py import GuardCalls
from ._records import ScanStats
from ._rules import COMPACTION_LOOP_PERSISTED, Verdicts, alarm_thresholds
from ._scopes import ScopeKey, ScopeLock, ScopeTable, scope_key, session_of

__all__ = ["Decision", "LoopEvent", "ToolLoopBlocked", "ToolLoopGuard"]

logger = logging.getLogger("loopcore")

#: Warning keys remembered per scope for de-duplication (SPEC §5).
MAX_WARNING_KEYS = 256

F = TypeVar("F", bound=Callable[..., Any])
EventKind = Literal["warning", "block", "guard_armed", "compaction_abort"]


@dataclass(frozen=True, slots=True)
class Decision:
    """What ``before_call`` decided: run the call (maybe with a warning) or block it."""

    blocked: bool
    reason: str | None
    verdict: Verdict
    warning: Verdict | None = None


_ALLOWED = Decision(False, None, NOT_STUCK, None)


@dataclass(frozen=True, slots=True)
class LoopEvent:
    """What ``on_event`` receives. Never carries arguments or results."""

    kind: EventKind
    session: Hashable
    run_id: str | None
    tool_name: str
    detector: str | None
    level: str | None
    count: int
    message: str | None
    paired_tool_name: str | None = None


class ToolLoopBlocked(Exception):
    """Raised by a wrapped tool instead of running a call the detector blocked."""

    def __init__(self, verdict: Verdict, reason: str | None = None) -> None:
        self.verdict = verdict
        self.reason = reason if reason is not None else verdict.message
        super().__init__(self.reason)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.verdict, self.reason))


def _is_async_callable(fn: object) -> bool:
    """Is ``fn`` async, even in disguise (SPEC §11)?

    A coroutine function, an object whose ``__call__`` is one, or a
    ``functools.partial`` (nested or not) of either.
    """
    while issubclass(type(fn), functools.partial):
        fn = fn.func  # type: ignore[attr-defined]
    if inspect.iscoroutinefunction(fn):
        return True
    try:
        # What calling ``fn`` runs: its type's ``__call__`` (a metaclass's, for a class).
        call = getattr(type(fn), "__call__", None)  # noqa: B004
    except Exception:
        return False
    return inspect.iscoroutinefunction(call)


def _is_awaitable(value: object) -> bool:
    """Can ``value`` be awaited? Decided by its real type: a result's ``__class__`` may lie."""
    cls = type(value)
    if cls is types.GeneratorType:  # a @types.coroutine generator
        return bool(value.gi_code.co_flags & inspect.CO_ITERABLE_COROUTINE)  # type: ignore[attr-defined]
    try:
        return issubclass(cls, Awaitable)
    except Exception:
        return False


class _ScopeState:
    """Per-scope hook state: warnings already shown, and the post-compaction guard."""

    __slots__ = ("guard", "warned")

    def __init__(self) -> None:
        self.warned: OrderedDict[str, int] = OrderedDict()
        self.guard: PostCompactionGuard | None = None


class ToolLoopGuard(GuardCalls):
    """The gateway hook: check, warn or block, record, and guard after compaction.

    ``before_call`` and ``after_call`` come from the per-call twin
    (``_percall``); this class holds the policy they call up to.
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
    ) -> None:
        if on_event is not None and not callable(on_event):
            raise TypeError(f"on_event: expected a callable or None, got {type(on_event).__name__}")
        config = coerce_config(config)
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
        self._on_event = on_event
        self._verdicts = Verdicts(config)
        self._warning_threshold = config.warning_threshold
        self._states: ScopeTable[_ScopeState] = ScopeTable(max_scopes)
        # Scopes whose guard is armed: after_call skips all guard work while empty.
        self._armed_guards: dict[ScopeKey, PostCompactionGuard] = {}
        self._lock = ScopeLock()
        self._scope: ContextVar[ScopeKey] = ContextVar(
            f"loopcore.scope.{id(self):x}", default=(None, None)
        )
        detector = self._detector
        alarm, unknown_alarm = alarm_thresholds(config)
        self._bind_calls(
            store,
            detector.enabled,
            alarm,
            unknown_alarm,
            check_normalizers(normalizers),
            check_send_tools(send_tools),
        )
        self._bind_guard(self._armed_guards, _ALLOWED)

    @property
    def detector(self) -> LoopDetector:
        return self._detector

    @property
    def config(self) -> LoopDetectionConfig:
        return self._detector.config

    def __repr__(self) -> str:
        return f"ToolLoopGuard({self._detector!r})"

    def arm_post_compaction(self, *, session: Hashable = None, run_id: str | None = None) -> None:
        """Arm the scope's post-compaction guard; call when retrying after a compaction."""
        key = scope_key(session, run_id)
        config = self._detector.config
        if config.enabled is False:
            return
        window = config.post_compaction_guard.window_size
        with self._lock:
            state = self._state(key)
            if state.guard is None:
                state.guard = PostCompactionGuard(window)
            armed = arm_quietly(state.guard)
            self._armed_guards[key] = state.guard
        # Logged and emitted with the lock released: handlers are host code.
        if armed:
            log_armed(window)
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

    def end_run(self, *, session: Hashable = None, run_id: str | None = None) -> None:
        """Forget one scope: its history, shown warnings and guard."""
        key = scope_key(session, run_id)
        self._detector.end_run(session=key[0], run_id=key[1])
        with self._lock:
            self._states.pop(key, self._lock)
            self._armed_guards.pop(key, None)

    def end_session(self, session: Hashable) -> None:
        """Forget every run of ``session``."""
        self._detector.end_session(session)
        held = scope_key(session, None)[0]  # as the tables hold it
        with self._lock:
            self._lock.bury(*self._states.pop_session(held))
            for key in [key for key in self._armed_guards if key[0] == held]:
                del self._armed_guards[key]

    # -- wrapping tool functions -----------------------------------------------------------

    @contextmanager
    def scope(self, *, session: Hashable = None, run_id: str | None = None) -> Iterator[None]:
        """Set the scope of wrapped tool calls in this context (safe across asyncio tasks)."""
        token = self._scope.set(scope_key(session, run_id))
        try:
            yield
        finally:
            self._scope.reset(token)

    @overload
    def wrap(self, fn: F, *, name: str | None = None) -> F: ...

    @overload
    def wrap(self, fn: None = None, *, name: str | None = None) -> Callable[[F], F]: ...

    def wrap(self, fn: F | None = None, *, name: str | None = None) -> F | Callable[[F], F]:
        """Guard a sync or async tool function; blocked calls raise ToolLoopBlocked.

        ``fn`` is async when it is a coroutine function, an object whose
        ``__call__`` is one, or a ``functools.partial`` of either: the wrapper is
        then a coroutine function. A sync ``fn`` that returns an awaitable gets
        an awaitable back, which records the awaited outcome.
        """
        if fn is None:
            return lambda f: self.wrap(f, name=name)
        if not callable(fn):
            raise TypeError(f"fn: expected a callable, got {type(fn).__name__}")
        tool_name = check_tool_name(name if name is not None else getattr(fn, "__name__", None))
        signature = inspect.signature(fn)

        def bound(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            arguments = signature.bind(*args, **kwargs)
            arguments.apply_defaults()
            return dict(arguments.arguments)

        def start(call_args: dict[str, Any]) -> ScopeKey:
            key = self._scope.get()
            decision = self.before_call(tool_name, call_args, session=key[0], run_id=key[1])
            if decision.blocked:
                raise ToolLoopBlocked(decision.verdict, decision.reason)
            return key

        def failed(key: ScopeKey, call_args: dict[str, Any], exc: Exception) -> None:
            self.after_call(tool_name, call_args, error=exc, session=key[0], run_id=key[1])

        def returned(key: ScopeKey, call_args: dict[str, Any], result: Any) -> None:
            self.after_call(tool_name, call_args, result=result, session=key[0], run_id=key[1])

        async def settle(key: ScopeKey, call_args: dict[str, Any], pending: Any) -> Any:
            """Await what a sync ``fn`` returned and record that outcome, not the awaitable."""
            try:
                result = await pending
            except Exception as exc:
                failed(key, call_args, exc)
                raise
            returned(key, call_args, result)
            return result

        if _is_async_callable(fn):

            @functools.wraps(fn)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                call_args = bound(args, kwargs)
                key = start(call_args)
                try:
                    result = await fn(*args, **kwargs)
                except Exception as exc:
                    failed(key, call_args, exc)
                    raise
                returned(key, call_args, result)
                return result

            return guarded_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            call_args = bound(args, kwargs)
            key = start(call_args)
            try:
                result = fn(*args, **kwargs)
            except Exception as exc:
                failed(key, call_args, exc)
                raise
            if _is_awaitable(result):
                return settle(key, call_args, result)
            returned(key, call_args, result)
            return result

        return guarded  # type: ignore[return-value,unused-ignore]

    # -- internals -------------------------------------------------------------------------

    def _verdict(self, stats: ScanStats, tool_name: str, args: Any, args_hash: int) -> Verdict:
        """The verdict table for a scan the store did not call quiet."""
        return self._verdicts(stats, tool_name, args_hash, is_known_poll(tool_name, args))

    def _decide(
        self,
        verdict: Verdict,
        tool_name: str,
        args_hash: int,
        key: ScopeKey,
        tool_call_id: str | None,
    ) -> Decision:
        """What a stuck verdict does: block, or record the call and warn once per multiple."""
        if verdict.level == "critical":
            self._report("block", key, tool_name, verdict)
            return Decision(True, verdict.message, verdict, None)
        self._store.append(key, tool_name, args_hash, tool_call_id)
        warning = verdict if self._first_warning(key, verdict) else None
        if warning is not None:
            self._report("warning", key, tool_name, verdict)
        return Decision(False, None, verdict, warning)

    def _observe(
        self, record: CallRecord | None, tool_name: str, args: Any, key: ScopeKey
    ) -> CallRecord | None:
        """Feed an armed post-compaction guard; raises when it trips."""
        if record is not None:
            args_hash, result_hash = record.args_hash, record.result_hash
        else:
            args_hash, result_hash = _outcome.hash_call(tool_name, args), None
        with self._lock:
            guard = self._armed_guards.get(key)
            if guard is None:
                return record
            verdict = observe_quietly(guard, tool_name, args_hash, result_hash)
            if not guard.armed:
                del self._armed_guards[key]
        if verdict.should_abort:
            log_abort(verdict, guard.window_size)
            message = verdict.message
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
                )
            )
            raise CompactionLoopPersisted(tool_name, verdict.count, message)
        return record

    def _state(self, key: ScopeKey) -> _ScopeState:
        """The scope's hook state, created on first use (caller holds the lock)."""
        state = self._states.get(key)
        if state is None:
            state = _ScopeState()
            evicted = self._states.put(key, state)
            self._lock.bury(*evicted)
            for old in evicted:
                self._armed_guards.pop(old, None)
        return state

    def _first_warning(self, key: ScopeKey, verdict: Verdict) -> bool:
        """Is this the first time the warning's key reaches a new multiple of the threshold?"""
        multiple = verdict.count // self._warning_threshold
        warning_key = verdict.warning_key or ""
        with self._lock:
            warned = self._state(key).warned
            shown = warned.get(warning_key, 0)
            if warning_key in warned:
                warned.move_to_end(warning_key)
            if multiple <= shown:
                return False
            warned[warning_key] = multiple
            if len(warned) > MAX_WARNING_KEYS:
                warned.popitem(last=False)
        return True

    def _report(self, kind: EventKind, key: ScopeKey, tool_name: str, verdict: Verdict) -> None:
        # Only names and numbers are logged: arguments and results may hold secrets.
        log = logger.error if kind == "block" else logger.warning
        log(
            "tool loop %s: tool=%s detector=%s count=%d session=%s run_id=%s",
            "blocked" if kind == "block" else "warning",
            tool_name,
            verdict.detector,
            verdict.count,
            session_of(key),
            key[1],
        )
        self._emit(
            LoopEvent(
                kind,
                session_of(key),
                key[1],
                tool_name,
                verdict.detector,
                verdict.level,
                verdict.count,
                verdict.message,
                verdict.paired_tool_name,
            )
        )

    def _emit(self, event: LoopEvent) -> None:
        if self._on_event is None:
            return
        try:
            self._on_event(event)
        except Exception:
            logger.exception("on_event callback raised while handling a %s event", event.kind)


ToolLoopGuard.__signature__ = _percall.init_signature(ToolLoopGuard)  # type: ignore[attr-defined]

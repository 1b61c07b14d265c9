"""How is a tool function guarded without its host writing the two calls? (SPEC §5, §8.12)

``guard_function(guard, fn, name)`` is what ``ToolLoopGuard.wrap`` returns: a
sync or async wrapper that runs ``before_call``, raises ``ToolLoopBlocked`` /
``ToolLoopRunTerminated`` instead of running a blocked call, runs the tool, and
hands its outcome to ``after_call`` — returning the result the model should see
(a warning's note added), or re-raising the tool's error with the note on it.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import types
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ._decisions import Decision, ToolLoopBlocked, ToolLoopRunTerminated
from ._scopes import ScopeKey

if TYPE_CHECKING:
    from ._hook import ToolLoopGuard

__all__ = ["guard_function", "is_async_callable", "is_awaitable"]


def is_async_callable(fn: object) -> bool:
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


def is_awaitable(value: object) -> bool:
    """Can ``value`` be awaited? Decided by its real type: a result's ``__class__`` may lie."""
    cls = type(value)
    if cls is types.GeneratorType:  # a @types.coroutine generator
        return bool(value.gi_code.co_flags & inspect.CO_ITERABLE_COROUTINE)  # type: ignore[attr-defined]
    try:
        return issubclass(cls, Awaitable)
    except Exception:
        return False


def _noted(exc: BaseException, decision: Decision) -> None:
    """SPEC §8.12: a warned call's error carries the model's note."""
    note = decision.model_note
    if note is None:
        return
    with contextlib.suppress(AttributeError):  # Python 3.10 has no add_note
        exc.add_note(note)  # type: ignore[attr-defined,unused-ignore]
    with contextlib.suppress(Exception):  # an exception type with __slots__
        exc.loop_note = note  # type: ignore[attr-defined]


def guard_function(guard: ToolLoopGuard, fn: Any, tool_name: str) -> Any:
    """The guarded version of ``fn`` (see ``ToolLoopGuard.wrap``)."""
    signature = inspect.signature(fn)

    def bound(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        arguments = signature.bind(*args, **kwargs)
        arguments.apply_defaults()
        return dict(arguments.arguments)

    def start(call_args: dict[str, Any]) -> tuple[ScopeKey, Decision]:
        key = guard._scope.get()
        decision = guard.before_call(tool_name, call_args, session=key[0], run_id=key[1])
        if decision.blocked:
            kind = ToolLoopRunTerminated if decision.terminal else ToolLoopBlocked
            raise kind(decision.verdict, decision.reason, decision.result_text)
        return key, decision

    def failed(
        key: ScopeKey, decision: Decision, call_args: dict[str, Any], exc: Exception
    ) -> None:
        guard.after_call(tool_name, call_args, error=exc, session=key[0], run_id=key[1])
        _noted(exc, decision)

    def returned(key: ScopeKey, call_args: dict[str, Any], result: Any) -> Any:
        return guard.after_call(tool_name, call_args, result=result, session=key[0], run_id=key[1])

    async def settle(
        key: ScopeKey, decision: Decision, call_args: dict[str, Any], pending: Any
    ) -> Any:
        """Await what a sync ``fn`` returned and record that outcome, not the awaitable."""
        try:
            result = await pending
        except Exception as exc:
            failed(key, decision, call_args, exc)
            raise
        return returned(key, call_args, result)

    if is_async_callable(fn):

        @functools.wraps(fn)
        async def guarded_async(*args: Any, **kwargs: Any) -> Any:
            call_args = bound(args, kwargs)
            key, decision = start(call_args)
            try:
                result = await fn(*args, **kwargs)
            except Exception as exc:
                failed(key, decision, call_args, exc)
                raise
            return returned(key, call_args, result)

        return guarded_async

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        call_args = bound(args, kwargs)
        key, decision = start(call_args)
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            failed(key, decision, call_args, exc)
            raise
        if is_awaitable(result):
            return settle(key, decision, call_args, result)
        return returned(key, call_args, result)

    return guarded


def check_callable(fn: Any) -> Callable[..., Any]:
    if not callable(fn):
        raise TypeError(f"fn: expected a callable, got {type(fn).__name__}")
    return fn  # type: ignore[no-any-return]

"""SPEC §5 and §11: ``ToolLoopGuard.wrap`` on callables that are async in disguise.

A wrapped tool is async when it is a coroutine function, an object whose
``__call__`` is one, or a ``functools.partial`` (however nested) of either: the
wrapper is then an ``async def`` that records the awaited result or error. A
sync callable that returns an awaitable gets an awaitable back that records the
awaited outcome, never the coroutine object itself.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any

import pytest

from loopcore import ToolLoopBlocked, ToolLoopGuard, hash_call, hash_outcome

# Runs on both twins (see conftest).
pytestmark = pytest.mark.usefixtures("twin")

#: The defaults with the detectors on: 20 identical outcomes block the 21st call.
ENABLED = {"enabled": True}
SMALL = {
    "enabled": True,
    "historySize": 50,
    "warningThreshold": 3,
    "criticalThreshold": 5,
    "unknownToolThreshold": 3,
    "globalCircuitBreakerThreshold": 8,
}


class Sequence:
    """What the tools return: a different result on every call, or an error."""

    def __init__(self, fail: BaseException | None = None, *, constant: bool = False) -> None:
        self.calls = 0
        self.fail = fail
        self.constant = constant

    def next(self, job: str) -> dict[str, Any]:
        self.calls += 1
        if self.fail is not None:
            raise self.fail
        return {"job": job, "progress": 0 if self.constant else self.calls}


class AsyncCallable:
    """An object whose ``__call__`` is a coroutine function."""

    def __init__(self, seq: Sequence) -> None:
        self.seq = seq

    async def __call__(self, job: str, verbose: bool = False) -> dict[str, Any]:
        await asyncio.sleep(0)
        return self.seq.next(job)


class Pending:
    """A hand-made awaitable (not a coroutine): ``__await__`` yields once."""

    def __init__(self, produce: Callable[[], Any]) -> None:
        self.produce = produce

    def __await__(self) -> Generator[None, None, Any]:
        yield None
        return self.produce()


def _coroutine_function(seq: Sequence) -> Callable[..., Any]:
    async def poll(job: str, verbose: bool = False) -> dict[str, Any]:
        await asyncio.sleep(0)
        return seq.next(job)

    return poll


def _async_object(seq: Sequence) -> Callable[..., Any]:
    return AsyncCallable(seq)


def _partial_of_coroutine_function(seq: Sequence) -> Callable[..., Any]:
    async def poll(prefix: str, job: str, verbose: bool = False) -> dict[str, Any]:
        await asyncio.sleep(0)
        return seq.next(job)

    return functools.partial(poll, "pre")


def _partial_of_async_object(seq: Sequence) -> Callable[..., Any]:
    class Prefixed:
        async def __call__(self, prefix: str, job: str, verbose: bool = False) -> Any:
            await asyncio.sleep(0)
            return seq.next(job)

    return functools.partial(Prefixed(), "pre")


def _nested_partial_of_async_object(seq: Sequence) -> Callable[..., Any]:
    class Prefixed:
        async def __call__(self, prefix: str, job: str, verbose: bool = False) -> Any:
            await asyncio.sleep(0)
            return seq.next(job)

    return functools.partial(functools.partial(Prefixed(), "pre"), verbose=False)


def _sync_returning_coroutine(seq: Sequence) -> Callable[..., Any]:
    async def later(job: str) -> dict[str, Any]:
        await asyncio.sleep(0)
        return seq.next(job)

    def poll(job: str, verbose: bool = False) -> Awaitable[dict[str, Any]]:
        return later(job)

    return poll


def _sync_returning_awaitable(seq: Sequence) -> Callable[..., Any]:
    def poll(job: str, verbose: bool = False) -> Awaitable[dict[str, Any]]:
        return Pending(lambda: seq.next(job))

    return poll


def _generator_coroutine(seq: Sequence) -> Callable[..., Any]:
    @types.coroutine
    def poll(job: str, verbose: bool = False) -> Generator[None, None, dict[str, Any]]:
        yield None
        return seq.next(job)

    return poll


ASYNC_SHAPES = {
    "coroutine-function": _coroutine_function,
    "async-__call__": _async_object,
    "partial-of-coroutine-function": _partial_of_coroutine_function,
    "partial-of-async-__call__": _partial_of_async_object,
    "nested-partial-of-async-__call__": _nested_partial_of_async_object,
}
SYNC_AWAITABLE_SHAPES = {
    "sync-returning-coroutine": _sync_returning_coroutine,
    "sync-returning-awaitable": _sync_returning_awaitable,
    "types.coroutine-generator": _generator_coroutine,
}
SHAPES = {**ASYNC_SHAPES, **SYNC_AWAITABLE_SHAPES}


def _bound(job: str = "j1") -> dict[str, Any]:
    """The args every shape records: the callable's own (remaining) parameters, defaults in."""
    return {"job": job, "verbose": False}


@pytest.mark.parametrize("shape", list(ASYNC_SHAPES))
def test_async_in_disguise_gets_an_async_wrapper(shape: str) -> None:
    guard = ToolLoopGuard(ENABLED)
    wrapped = guard.wrap(ASYNC_SHAPES[shape](Sequence()), name="poll")
    assert inspect.iscoroutinefunction(wrapped)


@pytest.mark.parametrize("shape", list(SYNC_AWAITABLE_SHAPES))
def test_sync_callable_keeps_a_sync_wrapper(shape: str) -> None:
    guard = ToolLoopGuard(ENABLED)
    wrapped = guard.wrap(SYNC_AWAITABLE_SHAPES[shape](Sequence()), name="poll")
    assert not inspect.iscoroutinefunction(wrapped)


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_different_awaited_results_are_never_blocked(shape: str) -> None:
    guard = ToolLoopGuard(ENABLED)
    seq = Sequence()
    poll = guard.wrap(SHAPES[shape](seq), name="poll")
    results = []
    for _ in range(25):
        results.append(await poll("j1"))
    assert [r["progress"] for r in results] == list(range(1, 26))
    history = guard.detector.history()
    assert len(history) == 25
    assert all(r.args_hash == hash_call("poll", _bound()) for r in history)
    expected = [hash_outcome("poll", _bound(), result=r)[0] for r in results]
    assert [r.result_hash for r in history] == expected


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", list(SHAPES))
async def test_errors_raised_while_awaiting_are_recorded(shape: str) -> None:
    guard = ToolLoopGuard(SMALL)
    error = LookupError("unknown tool: zorblax")
    seq = Sequence(fail=error)
    dispatch = guard.wrap(SHAPES[shape](seq), name="dispatch")
    for _ in range(3):
        with pytest.raises(LookupError) as info:
            await dispatch("j1")
        assert info.value is error
    history = guard.detector.history()
    expected = hash_outcome("dispatch", _bound(), error=error)[0]
    assert [r.result_hash for r in history] == [expected] * 3
    assert [r.unknown_tool_name for r in history] == ["zorblax"] * 3
    # The third unknown-tool failure blocks the next call before it runs.
    with pytest.raises(ToolLoopBlocked) as blocked:
        await dispatch("j1")
    assert blocked.value.verdict.detector == "unknown_tool_repeat"
    assert seq.calls == 3


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", list(ASYNC_SHAPES))
async def test_async_blocked_call_raises_when_awaited_and_does_not_run(shape: str) -> None:
    guard = ToolLoopGuard(SMALL)
    seq = Sequence(constant=True)  # the same result every time: no progress
    status = guard.wrap(ASYNC_SHAPES[shape](seq), name="status")
    for _ in range(5):
        await status("j1")
    pending = status("j1")  # nothing is checked until the coroutine runs
    assert inspect.iscoroutine(pending)
    with pytest.raises(ToolLoopBlocked) as info:
        await pending
    assert info.value.verdict.detector == "generic_repeat"
    assert seq.calls == 5
    # The blocked call is recorded as a loop veto (SPEC §8.1), never as a run.
    history = guard.detector.history()
    assert len(history) == 6
    assert history[-1].outcome_kind == "tool-loop-veto"
    assert history[-1].result_hash is None


@pytest.mark.asyncio
@pytest.mark.parametrize("shape", list(SYNC_AWAITABLE_SHAPES))
async def test_sync_returning_awaitable_blocked_call_raises_before_it_runs(shape: str) -> None:
    guard = ToolLoopGuard(SMALL)
    seq = Sequence(constant=True)
    status = guard.wrap(SYNC_AWAITABLE_SHAPES[shape](seq), name="status")
    for _ in range(5):
        await status("j1")
    with pytest.raises(ToolLoopBlocked) as info:
        status("j1")  # a sync callable is checked at call time, before anything is awaited
    assert info.value.verdict.detector == "generic_repeat"
    assert seq.calls == 5
    # The blocked call is recorded as a loop veto (SPEC §8.1), never as a run.
    history = guard.detector.history()
    assert len(history) == 6
    assert history[-1].outcome_kind == "tool-loop-veto"
    assert history[-1].result_hash is None


@pytest.mark.asyncio
async def test_sync_returning_awaitable_records_nothing_until_awaited() -> None:
    guard = ToolLoopGuard(ENABLED)
    seq = Sequence()
    poll = guard.wrap(_sync_returning_coroutine(seq), name="poll")
    pending = poll("j1")
    assert inspect.isawaitable(pending)
    [record] = guard.detector.history()
    assert record.result_hash is None  # the call is recorded, its outcome not yet
    assert await pending == {"job": "j1", "progress": 1}
    [record] = guard.detector.history()
    expected = hash_outcome("poll", _bound(), result={"job": "j1", "progress": 1})[0]
    assert record.result_hash == expected


def test_sync_callable_returning_a_plain_value_is_unchanged() -> None:
    guard = ToolLoopGuard(ENABLED)

    def read(path: str) -> str:
        return path.upper()

    wrapped = guard.wrap(read)
    assert wrapped("a") == "A"
    [record] = guard.detector.history()
    assert record.result_hash == hash_outcome("read", {"path": "a"}, result="A")[0]


@pytest.mark.asyncio
async def test_callable_object_and_partial_args_are_the_bound_arguments() -> None:
    guard = ToolLoopGuard(ENABLED)
    seq = Sequence()

    async def fetch(host: str, path: str, timeout: int = 5, *, retries: int = 1) -> Any:
        return seq.next(path)

    partial = guard.wrap(functools.partial(fetch, "example.test", retries=3), name="fetch")
    await partial("/a")
    await partial(path="/b", timeout=9)
    obj = guard.wrap(AsyncCallable(seq), name="obj")
    await obj("j", True)
    await obj(job="k")
    args = [r.args_hash for r in guard.detector.history()]
    assert args == [
        hash_call("fetch", {"path": "/a", "timeout": 5, "retries": 3}),
        hash_call("fetch", {"path": "/b", "timeout": 9, "retries": 3}),
        hash_call("obj", {"job": "j", "verbose": True}),
        hash_call("obj", {"job": "k", "verbose": False}),
    ]


@pytest.mark.asyncio
async def test_bad_arguments_to_an_async_wrapper_raise_when_awaited() -> None:
    guard = ToolLoopGuard(ENABLED)
    wrapped = guard.wrap(AsyncCallable(Sequence()), name="obj")
    pending = wrapped(nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        await pending
    assert guard.detector.history() == []


def test_sync_callable_object_keeps_a_sync_wrapper() -> None:
    guard = ToolLoopGuard(ENABLED)

    class Reader:
        def __call__(self, path: str) -> str:
            return path * 2

    wrapped = guard.wrap(Reader(), name="read")
    assert not inspect.iscoroutinefunction(wrapped)
    assert wrapped("ab") == "abab"
    [record] = guard.detector.history()
    assert record.args_hash == hash_call("read", {"path": "ab"})
    assert record.result_hash == hash_outcome("read", {"path": "ab"}, result="abab")[0]


def test_a_result_whose_class_claims_to_be_a_coroutine_is_returned_as_is() -> None:
    guard = ToolLoopGuard(ENABLED)

    class Liar:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return types.CoroutineType

    liar = Liar()
    assert inspect.isawaitable(liar)  # isinstance believes __class__

    def odd() -> Any:
        return liar

    wrapped = guard.wrap(odd)
    assert wrapped() is liar  # the wrapper goes by the real type
    [record] = guard.detector.history()
    assert record.result_hash == hash_outcome("odd", {}, result=liar)[0]

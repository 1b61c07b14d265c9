"""What does an asyncio gateway call around every tool execution? (SPEC §10)

``AsyncToolLoopGuard`` is ``ToolLoopGuard`` for a history kept in an
``AsyncRedisStore``: every method that touches the store is a coroutine, and
each runs the same flow as the sync guard on a shared store (``_fleet``),
awaiting its store steps. Decisions, events, logs and counters are the sync
guard's, step for step.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ._config import LoopDetectionConfig
from ._decisions import (
    BatchDecision,
    Decision,
    Liveness,
    LoopEvent,
    Reconciliation,
    StoreUnavailable,
)
from ._fleet import FleetGuard, Flow
from ._outcome import UNSET, Normalizer
from ._percall_py import UNSCOPED
from ._records import CallRecord
from ._runloop import RunStop
from ._scopes import scope_key
from ._stats import GuardStats

__all__ = ["AsyncToolLoopGuard"]


async def _drive(store: Any, flow: Flow) -> Any:
    """Runs a flow, awaiting each store step; a failed step is answered with its error."""
    try:
        step = next(flow)
        while True:
            try:
                answer = await store.run(*step)
            except StoreUnavailable as exc:
                answer = exc
            step = flow.send(answer)
    except StopIteration as done:
        return done.value


class AsyncToolLoopGuard:
    """The gateway hook for asyncio gateways sharing an ``AsyncRedisStore``.

    Takes ``ToolLoopGuard``'s arguments; ``store`` is required. ``scope()``
    and ``stats()`` (this worker's counters) are plain methods.
    """

    def __init__(
        self,
        config: LoopDetectionConfig | Mapping[str, Any] | None = None,
        *,
        store: Any,
        normalizers: Mapping[str, Normalizer] | None = None,
        send_tools: Collection[str] = (),
        on_event: Callable[[LoopEvent], object] | None = None,
        max_scopes: int = 100_000,
        mode: str | None = None,
    ) -> None:
        if not getattr(store, "asynchronous", False):
            raise TypeError(
                f"store: expected a loopcore.redis.AsyncRedisStore, got {type(store).__name__}"
            )
        self._core = FleetGuard(
            config,
            normalizers=normalizers,
            send_tools=send_tools,
            on_event=on_event,
            max_scopes=max_scopes,
            store=store,
            mode=mode,
        )
        self._store = self._core._store

    def __repr__(self) -> str:
        return f"AsyncToolLoopGuard({self._store!r}, mode={self.mode!r})"

    @property
    def config(self) -> LoopDetectionConfig:
        return self._core.config

    @property
    def mode(self) -> str:
        return self._core.mode

    @property
    def store(self) -> Any:
        return self._store

    @contextmanager
    def scope(self, *, session: Hashable = None, run_id: str | None = None) -> Iterator[None]:
        """Set the scope of calls in this context (each asyncio task has its own)."""
        with self._core.scope(session=session, run_id=run_id):
            yield

    def stats(self) -> GuardStats:
        return self._core.stats()

    async def before_call(
        self,
        tool_name: str,
        args: Any,
        *,
        tool_call_id: str | None = None,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> Decision:
        """``ToolLoopGuard.before_call``: one store step, two when the call is stuck."""
        core = self._core
        key = core._key(session, run_id)
        decision: Decision = await _drive(
            self._store, core._before_flow(tool_name, args, tool_call_id, key)
        )
        return decision

    async def after_call(
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
        """``ToolLoopGuard.after_call``: one store step; may raise ``CompactionLoopPersisted``."""
        core = self._core
        key = core._key(session, run_id)
        flow = core._after_flow(tool_name, args, result, error, tool_call_id, key)
        return await _drive(self._store, flow)

    async def before_batch(
        self,
        calls: Sequence[Sequence[Any]],
        *,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> BatchDecision:
        """``ToolLoopGuard.before_batch``: one turn's calls admitted together."""
        from ._batch_admission import admit_flow, check_calls

        flow = admit_flow(self._core, check_calls(calls), self._core._key(session, run_id))
        decision: BatchDecision = await _drive(self._store, flow)
        return decision

    async def arm_post_compaction(
        self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED
    ) -> None:
        await _drive(self._store, self._core._arm_flow(self._core._key(session, run_id)))

    async def end_run(self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED) -> None:
        await _drive(self._store, self._core._end_flow(self._core._key(session, run_id)))

    async def end_session(self, session: Hashable) -> None:
        await _drive(self._store, self._core._end_session_flow(session))

    async def release(
        self,
        tool_call_ids: Collection[str],
        *,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> int:
        key = self._core._key(session, run_id)
        removed: int = await _drive(self._store, self._core._release_flow(tool_call_ids, key))
        return removed

    async def reconcile(
        self,
        tool_name: str,
        args: Any,
        *,
        tool_call_id: str | None = None,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
        warning_threshold: int | None = None,
    ) -> Reconciliation:
        key = self._core._key(session, run_id)
        flow = self._core._reconcile_flow(tool_name, args, tool_call_id, key, warning_threshold)
        answer: Reconciliation = await _drive(self._store, flow)
        return answer

    reconcile_call = reconcile

    async def liveness(
        self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED
    ) -> Liveness:
        key = self._core._key(session, run_id)
        answer: Liveness = await _drive(self._store, self._core._liveness_flow(key))
        return answer

    async def history(
        self, *, session: Hashable = None, run_id: str | None = None
    ) -> list[CallRecord]:
        """The scope's records, oldest first (raises ``StoreUnavailable`` if the store fails)."""
        records: list[CallRecord] = await self._store.history(scope_key(session, run_id))
        return records

    async def before_turn(
        self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED
    ) -> RunStop | None:
        """``ToolLoopGuard.before_turn``, on the run-loop counters the fleet shares."""
        return await self._turn(session, run_id, None)

    async def end_turn(
        self, calls: Sequence[Any], *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED
    ) -> RunStop | None:
        """``ToolLoopGuard.end_turn``, on the run-loop counters the fleet shares."""
        return await self._turn(session, run_id, calls)

    async def _turn(self, session: Hashable, run_id: Any, calls: Any) -> RunStop | None:
        core = self._core
        if not core._cutoffs:
            return None
        digest = None if calls is None else core._digest(calls)
        flow = core._turn_flow(core._key(session, run_id), digest)
        stop: RunStop | None = await _drive(self._store, flow)
        return stop

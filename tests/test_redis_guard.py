"""Does a guard on Redis decide exactly as a guard in-process? (SPEC §10)

The same generated call sequences go through ``ToolLoopGuard`` on the
in-process store and on a ``RedisStore`` (and through ``AsyncToolLoopGuard``):
decisions, what the model sees, events, liveness and histories must be equal,
timestamps aside. The sequences mix repeats, polls, ping-pong, argument churn,
unknown tools, errors, releases and reconciliations.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from .conftest import require

redis = require("redis", "redis")

import hypothesis.strategies as st  # noqa: E402
from hypothesis import example, given, settings  # noqa: E402

from loopcore import (  # noqa: E402
    AsyncToolLoopGuard,
    CompactionLoopPersisted,
    Liveness,
    LoopEvent,
    ToolLoopGuard,
)
from loopcore.redis import AsyncRedisStore, RedisStore  # noqa: E402

from .test_twins import comparable  # noqa: E402

CONFIG = {"enabled": True, "warningThreshold": 3, "criticalThreshold": 5,
          "globalCircuitBreakerThreshold": 7, "historySize": 12, "turnLimit": 30,
          "maxConsecutiveErrorBatches": 3, "maxIdleRepeatCalls": 4}  # fmt: skip
RUNNING = {"details": {"status": "running"}}
CALLS = [
    ("read", {"path": "a"}, "A"),
    ("read", {"path": "b"}, "B"),
    ("process", {"action": "poll", "sessionId": "p"}, RUNNING),
    ("write", {"path": "w", "content": "1"}, {"details": {"changed": False}}),
    ("write", {"path": "w", "content": "2"}, {"details": {"changed": False}}),
    ("write", {"path": "w", "content": "3"}, {"details": {"changed": False}}),
    ("frobnicate", {}, "error: Tool frobnicate not found"),
]
STEP = st.tuples(
    st.integers(0, len(CALLS) - 1),
    st.sampled_from(
        [
            "call",
            "call",
            "call",
            "call",
            "error",
            "release",
            "reconcile",
            "skip",
            "arm",
            "turn",
            "batch",
        ]
    ),
    st.sampled_from([None, "s2"]),
)


def _decision(d: Any) -> tuple[Any, ...]:
    return (d.blocked, d.terminal, d.result_text, d.warning, d.model_note, d.liveness_signal,
            d.verdict, d.would_block)  # fmt: skip


def _batch(b: Any) -> tuple[Any, ...]:
    return (b.blocked, b.terminal, b.trigger, b.verdict, b.would_block,
            tuple(_decision(d) for d in b.decisions))  # fmt: skip


def _event(e: LoopEvent) -> tuple[Any, ...]:
    return (e.kind, e.session, e.run_id, e.tool_name, e.detector, e.level, e.count, e.message,
            e.terminal, e.tool_call_id)  # fmt: skip


def run_sync(guards: list[Any], steps: list[tuple[int, str, Any]]) -> list[Any]:
    """The steps, each call's before on one guard and what follows on the next (workers)."""
    seen: list[Any] = []
    for n, (which, action, session) in enumerate(steps):
        tool, args, result = CALLS[which]
        first, then = guards[n % len(guards)], guards[(n + 1) % len(guards)]
        scope = {"session": session, "run_id": "r", "tool_call_id": f"c{n}"}
        d = first.before_call(tool, args, **scope)
        seen.append(_decision(d))
        if d.blocked:
            continue
        try:
            if action == "error":
                seen.append(then.after_call(tool, args, error=RuntimeError("boom"), **scope))
            elif action == "release":
                seen.append(then.release([f"c{n}"], session=session, run_id="r"))
            elif action == "reconcile":
                seen.append(then.reconcile(tool, {"rewritten": n % 2}, **scope))
            elif action == "arm":
                seen.append(then.arm_post_compaction(session=session, run_id="r"))
            elif action == "turn":
                turn = [(tool, args, f"c{n}", which == 6)]
                seen.append(then.end_turn(turn, session=session, run_id="r"))
                seen.append(first.before_turn(session=session, run_id="r"))
            elif action == "batch":  # one turn: this call's outcome, then two more admitted
                then.after_call(tool, args, result=result, **scope)
                calls = [(tool, args, f"b{n}a"), (CALLS[0][0], CALLS[0][1], f"b{n}b")]
                batch = then.before_batch(calls, session=session, run_id="r")
                seen.append(_batch(batch))
                for (name, batch_args, call_id), d in zip(calls, batch.decisions, strict=True):
                    if not d.blocked:
                        seen.append(
                            first.after_call(
                                name, batch_args, result=result, tool_call_id=call_id,
                                session=session, run_id="r",
                            )
                        )  # fmt: skip
            elif action == "call":
                seen.append(then.after_call(tool, args, result=result, **scope))
        except CompactionLoopPersisted as exc:
            seen.append(("aborted", exc.tool_name, exc.count))
        seen.append(then.liveness(session=session, run_id="r"))
    return seen


async def run_async(guard: AsyncToolLoopGuard, steps: list[tuple[int, str, Any]]) -> list[Any]:
    seen: list[Any] = []
    for n, (which, action, session) in enumerate(steps):
        tool, args, result = CALLS[which]
        scope = {"session": session, "run_id": "r", "tool_call_id": f"c{n}"}
        d = await guard.before_call(tool, args, **scope)
        seen.append(_decision(d))
        if d.blocked:
            continue
        try:
            if action == "error":
                seen.append(await guard.after_call(tool, args, error=RuntimeError("boom"), **scope))
            elif action == "release":
                seen.append(await guard.release([f"c{n}"], session=session, run_id="r"))
            elif action == "reconcile":
                seen.append(await guard.reconcile(tool, {"rewritten": n % 2}, **scope))
            elif action == "arm":
                seen.append(await guard.arm_post_compaction(session=session, run_id="r"))
            elif action == "turn":
                turn = [(tool, args, f"c{n}", which == 6)]
                seen.append(await guard.end_turn(turn, session=session, run_id="r"))
                seen.append(await guard.before_turn(session=session, run_id="r"))
            elif action == "batch":
                await guard.after_call(tool, args, result=result, **scope)
                calls = [(tool, args, f"b{n}a"), (CALLS[0][0], CALLS[0][1], f"b{n}b")]
                batch = await guard.before_batch(calls, session=session, run_id="r")
                seen.append(_batch(batch))
                for (name, batch_args, call_id), d in zip(calls, batch.decisions, strict=True):
                    if not d.blocked:
                        seen.append(
                            await guard.after_call(
                                name, batch_args, result=result, tool_call_id=call_id,
                                session=session, run_id="r",
                            )
                        )  # fmt: skip
            elif action == "call":
                seen.append(await guard.after_call(tool, args, result=result, **scope))
        except CompactionLoopPersisted as exc:
            seen.append(("aborted", exc.tool_name, exc.count))
        seen.append(await guard.liveness(session=session, run_id="r"))
    return seen


def _comparable_liveness(seen: list[Any]) -> list[Any]:
    # Churn clocks differ (monotonic in-process, wall clock in Redis): only whether.
    return [
        (s.churning, s.churn_since is None, s.churn_observed_at is None)
        if isinstance(s, Liveness)
        else s
        for s in seen
    ]


@pytest.fixture
def client(redis_url: str) -> Any:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


# Worked cases first (a repeat warned then blocked, a poll, ping-pong, churn through
# three write variants, an unknown tool), then generated ones.
WORKED = [
    [(0, "call", None)] * 8,
    [(0, "call", None), (0, "arm", None)] + [(0, "call", None)] * 3,  # aborts
    [(6, "turn", None)] * 5 + [(0, "turn", "s2")] * 6,
    [(2, "call", None)] * 9 + [(2, "call", "s2")] * 3,
    [(0, "call", None), (1, "call", None)] * 6,
    [(3, "call", None), (4, "call", None), (5, "call", None)] * 4 + [(3, "reconcile", None)],
    [(6, "error", None)] * 6 + [(6, "release", None)],
    [(0, "batch", None)] * 6 + [(2, "batch", None)] * 6,  # batches warned, then blocked
]


@settings(max_examples=40, deadline=None)
@given(steps=st.lists(STEP, min_size=8, max_size=40), mode=st.sampled_from(["enforce", "observe"]))
@example(steps=WORKED[0], mode="enforce")
@example(steps=WORKED[1], mode="enforce")
@example(steps=WORKED[2], mode="observe")
@example(steps=WORKED[3], mode="enforce")
@example(steps=WORKED[4], mode="enforce")
@example(steps=WORKED[5], mode="enforce")
@example(steps=WORKED[6], mode="observe")
@example(steps=WORKED[7], mode="enforce")
@example(steps=WORKED[7], mode="observe")
def test_a_guard_on_redis_decides_as_in_process(
    client: Any, redis_prefix: str, steps: list[Any], mode: str
) -> None:
    client.delete(*client.keys(redis_prefix + "*") or ["-"])
    local_events: list[LoopEvent] = []
    local = ToolLoopGuard(CONFIG, on_event=local_events.append, mode=mode)
    # Two workers on one Redis: each call's before on one, what follows on the other.
    shared_events: list[LoopEvent] = []
    workers = [
        ToolLoopGuard(
            CONFIG,
            store=RedisStore(client, prefix=redis_prefix, timeout_seconds=5),
            on_event=shared_events.append,
            mode=mode,
        )
        for _ in range(2)
    ]
    want = _comparable_liveness(run_sync([local], steps))
    got = _comparable_liveness(run_sync(workers, steps))
    assert got == want
    assert [_event(e) for e in shared_events] == [_event(e) for e in local_events]
    for session in (None, "s2"):
        mine = comparable(local.detector.history(session=session, run_id="r"))
        assert comparable(workers[0].detector.history(session=session, run_id="r")) == mine
    totals = [w.stats() for w in workers]
    assert sum(t.calls for t in totals) == local.stats().calls
    assert sum(t.blocks for t in totals) == local.stats().blocks
    assert sum(t.aborts for t in totals) == local.stats().aborts
    assert sum(t.store_errors for t in totals) == 0


@settings(max_examples=10, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=30))
def test_the_async_guard_decides_as_the_sync_one(
    redis_url: str, redis_prefix: str, steps: list[Any]
) -> None:
    want = _comparable_liveness(run_sync([ToolLoopGuard(CONFIG)], steps))

    async def main() -> list[Any]:
        client = redis.asyncio.Redis.from_url(redis_url)
        await client.flushdb()
        store = AsyncRedisStore(client, prefix=redis_prefix, timeout_seconds=5)
        seen = await run_async(AsyncToolLoopGuard(CONFIG, store=store), steps)
        await client.aclose()
        return seen

    assert _comparable_liveness(asyncio.run(main())) == want

"""What does sharing a run through Redis cost? (SPEC §10: the README's "Running a fleet")

Two comparisons on one machine, Redis on loopback (``LOOPCORE_REDIS_URL``, else
a redis-server started here):

- the gateway cycle (``before_call`` + ``after_call`` of the typical call) on
  the in-process store and on a ``RedisStore``, beside one Redis round trip
  (a PING), in the same run;
- calls per second of 1 and of 4 worker processes, each its own guard on one
  Redis, serving runs of their own (two script calls a cycle each).

Not part of the ratio gate (no ``leg``): the figures depend on the loopback
and the Redis server more than on loopcore.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture
from tests.conftest import require

from workloads import ARGS, CONFIG, RESULT, TOOL, gateway_cycle

redis = require("redis", "redis")

from loopcore import ToolLoopGuard  # noqa: E402
from loopcore.redis import RedisStore  # noqa: E402

CYCLES_PER_WORKER = 400


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("LOOPCORE_REDIS_URL")
    if url:
        yield url
        return
    from tests.redis_server import RedisServer

    with RedisServer(tmp_path_factory.mktemp("bench-redis")) as server:
        yield server.url


@pytest.mark.benchmark(group="fleet: gateway cycle")
def test_one_redis_round_trip(benchmark: BenchmarkFixture, redis_url: str) -> None:
    """A PING on the same client settings: the yardstick for a cycle's two script calls."""
    client = redis.Redis.from_url(redis_url)
    benchmark.extra_info["per"] = "PING"
    benchmark.pedantic(client.ping, rounds=20, iterations=50, warmup_rounds=1)


@pytest.mark.benchmark(group="fleet: gateway cycle")
@pytest.mark.parametrize("store", ["in-process", "redis"])
def test_gateway_cycle_on_redis(benchmark: BenchmarkFixture, store: str, redis_url: str) -> None:
    shared = RedisStore(redis.Redis.from_url(redis_url), prefix="bench-fleet:", timeout_seconds=1)
    guard = ToolLoopGuard(CONFIG, store=shared if store == "redis" else None)
    benchmark.extra_info["per"] = "cycle"
    benchmark.pedantic(gateway_cycle(guard), rounds=20, iterations=50, warmup_rounds=1)
    assert guard.stats().store_errors == 0
    assert not guard.before_call(TOOL, {"path": "/elsewhere"}, run_id="r").blocked


def _worker(url: str, worker: int, cycles: int, ready: Any, start: Any) -> None:
    guard = ToolLoopGuard(
        CONFIG,
        store=RedisStore(redis.Redis.from_url(url), prefix="bench-fleet:", timeout_seconds=5),
    )
    run = f"w{worker}-{os.getpid()}"
    guard.before_call(TOOL, ARGS[0], run_id=run)  # connected, scripts loaded
    ready.release()
    start.wait()
    for n in range(cycles):
        args = ARGS[n % len(ARGS)]
        guard.before_call(TOOL, args, run_id=run)
        guard.after_call(TOOL, args, result=RESULT, run_id=run)
    assert guard.stats().store_errors == 0


def _fleet(url: str, workers: int) -> float:
    """Wall seconds for ``workers`` processes to serve their cycles, started together."""
    ctx = multiprocessing.get_context("spawn")
    ready, start = ctx.Semaphore(0), ctx.Event()
    procs = [
        ctx.Process(target=_worker, args=(url, w, CYCLES_PER_WORKER, ready, start))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.acquire(timeout=60)
    began = time.perf_counter()
    start.set()
    for p in procs:
        p.join(timeout=300)
    elapsed = time.perf_counter() - began
    assert all(p.exitcode == 0 for p in procs)
    return elapsed


@pytest.mark.benchmark(group="fleet: worker processes on one Redis")
@pytest.mark.parametrize("workers", [1, 4])
def test_workers_on_one_redis(benchmark: BenchmarkFixture, workers: int, redis_url: str) -> None:
    benchmark.extra_info["per"] = f"{workers} workers x {CYCLES_PER_WORKER} cycles"
    elapsed = benchmark.pedantic(_fleet, args=(redis_url, workers), rounds=3, iterations=1)
    calls = workers * CYCLES_PER_WORKER
    benchmark.extra_info["cycles_per_second"] = round(calls / elapsed)
    print(f"\nfleet: {workers} worker(s) on one Redis: {calls / elapsed:,.0f} cycles/s")

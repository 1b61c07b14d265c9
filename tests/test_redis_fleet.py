"""Does a fleet sharing one Redis decide as one process does? (SPEC §10, issue tests b-f)

Real worker processes (``tests/fleet_worker.py``) on a real redis-server serve
one run's calls round-robin, a worker is killed mid-run, threads and asyncio
tasks hammer shared scopes, the server restarts with AOF on, and the server
goes away under both failure policies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import require

redis = require("redis", "redis")

import redis.asyncio as aredis  # noqa: E402

from loopcore import AsyncToolLoopGuard, ToolLoopGuard  # noqa: E402
from loopcore.redis import AsyncRedisStore, RedisStore  # noqa: E402

from .fleet_worker import CONFIG, Worker  # noqa: E402
from .redis_server import RedisServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def workload() -> list[dict[str, Any]]:
    """One run's calls: fresh reads, a poll that loops past a block, ping-pong, the stop."""
    calls: list[tuple[str, Any, Any]] = [("read", {"path": f"f{i}"}, f"text {i}") for i in range(3)]
    poll = ("process", {"action": "poll", "sessionId": "b1"}, {"details": {"status": "running"}})
    calls += [poll] * 10  # warned at 4, blocked at 8 (recovers), blocked again: the run ends
    calls += [("read", {"path": "a"}, "A"), ("read", {"path": "b"}, "B")] * 8
    calls += [("write", {"path": "x", "content": str(i)}, "ok") for i in range(4)]
    return [
        {"tool": tool, "args": args, "result": result, "id": f"call-{n}", "session": "chat",
         "run": "run-1"}
        for n, (tool, args, result) in enumerate(calls)
    ]  # fmt: skip


class Fleet:
    """Worker processes on one Redis, answering JSON requests."""

    def __init__(self, url: str, prefix: str, n: int) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "tests.fleet_worker", url, prefix],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                cwd=ROOT,
                env=env,
            )
            for _ in range(n)
        ]
        for proc in self.procs:
            assert json.loads(self._line(proc)) == {"ready": True}

    @staticmethod
    def _line(proc: subprocess.Popen[str]) -> str:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"worker {proc.pid} exited with {proc.poll()}"
        return line

    def ask(self, worker: int, request: dict[str, Any]) -> dict[str, Any]:
        proc = self.procs[worker]
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        answer: dict[str, Any] = json.loads(self._line(proc))
        return answer

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                assert proc.stdin is not None
                proc.stdin.close()
                proc.wait(timeout=20)


def run_calls(ask: Any, calls: list[dict[str, Any]], workers: list[int]) -> list[Any]:
    """Every call's before (on one worker) and after (on the next): what the host saw."""
    seen = []
    for n, call in enumerate(calls):
        before = ask(workers[n % len(workers)], {**call, "op": "before"})
        seen.append(before)
        if not before["blocked"]:
            seen.append(ask(workers[(n + 1) % len(workers)], {**call, "op": "after"}))
    return seen


def reference(calls: list[dict[str, Any]]) -> tuple[list[Any], dict[str, Any]]:
    worker = Worker()
    seen = run_calls(lambda _, request: worker.answer(request), calls, [0])
    history = worker.answer({**calls[0], "op": "history"})
    return seen, history


def test_four_workers_round_robin_decide_as_one_process(redis_url: str, redis_prefix: str) -> None:
    calls = workload()
    want, want_history = reference(calls)
    fleet = Fleet(redis_url, redis_prefix, 4)
    try:
        got = run_calls(fleet.ask, calls, [0, 1, 2, 3])
        got_history = fleet.ask(2, {**calls[0], "op": "history"})
    finally:
        fleet.close()
    assert [a.get("blocked") for a in got].count(True) >= 2  # blocked, then the run ended
    assert any(a.get("terminal") for a in got)
    assert any(a.get("note") for a in got)  # a warning's note, added by another worker
    assert got == want
    assert got_history == want_history


def test_a_worker_killed_mid_run_loses_nothing(redis_url: str, redis_prefix: str) -> None:
    calls = workload()
    want, want_history = reference(calls)
    fleet = Fleet(redis_url, redis_prefix, 3)
    try:
        half = len(calls) // 2
        got = run_calls(fleet.ask, calls[:half], [0, 1, 2])
        # Worker 1 admits the next call, then dies before its outcome arrives.
        got.append(fleet.ask(1, {**calls[half], "op": "before"}))
        fleet.procs[1].send_signal(signal.SIGKILL)
        fleet.procs[1].wait(timeout=20)
        if not got[-1]["blocked"]:
            got.append(fleet.ask(0, {**calls[half], "op": "after"}))
        got += run_calls(fleet.ask, calls[half + 1 :], [2, 0])
        got_history = fleet.ask(0, {**calls[0], "op": "history"})
    finally:
        fleet.close()
    assert got == want
    assert got_history == want_history  # no record lost, none twice


def test_threads_and_tasks_on_shared_scopes_add_up(redis_url: str, redis_prefix: str) -> None:
    config = {"enabled": True, "historySize": 4096}
    guard = ToolLoopGuard(
        config, store=RedisStore(redis.Redis.from_url(redis_url), prefix=redis_prefix)
    )
    scopes = [("chat", "shared-1"), ("chat", "shared-2")]

    def thread(t: int) -> None:
        for n in range(25):
            session, run = scopes[n % 2]
            call_id = f"t{t}-{n}"
            args = {"n": n, "t": t}
            guard.before_call("read", args, tool_call_id=call_id, session=session, run_id=run)
            guard.after_call(
                "read", args, result=n, tool_call_id=call_id, session=session, run_id=run
            )

    threads = [threading.Thread(target=thread, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    async def tasks() -> None:
        client = aredis.Redis.from_url(redis_url)
        aguard = AsyncToolLoopGuard(
            config, store=AsyncRedisStore(client, prefix=redis_prefix, timeout_seconds=5)
        )

        async def task(k: int) -> None:
            for n in range(4):
                session, run = scopes[(k + n) % 2]
                call_id = f"a{k}-{n}"
                args = {"n": n, "k": k}
                await aguard.before_call(
                    "read", args, tool_call_id=call_id, session=session, run_id=run
                )
                await aguard.after_call(
                    "read", args, result=n, tool_call_id=call_id, session=session, run_id=run
                )

        await asyncio.gather(*(task(k) for k in range(100)))
        await client.aclose()

    asyncio.run(tasks())
    records = [r for s, run in scopes for r in guard.detector.history(session=s, run_id=run)]
    ids = [r.tool_call_id for r in records]
    assert len(records) == 8 * 25 + 100 * 4
    assert len(set(ids)) == len(ids)
    assert all(r.result_hash is not None for r in records)
    assert guard.stats().store_errors == 0


def test_a_restart_with_aof_keeps_everything_acknowledged(tmp_path: Path) -> None:
    with RedisServer(tmp_path / "aof", appendonly=True) as server:
        client = redis.Redis.from_url(server.url)
        guard = ToolLoopGuard(CONFIG, store=RedisStore(client, timeout_seconds=5))
        calls = workload()
        for n, call in enumerate(calls):
            if n in (5, 17):
                server.restart()
            tool, args, call_id = call["tool"], call["args"], call["id"]
            scope = {"session": "chat", "run_id": "run-1", "tool_call_id": call_id}
            if not guard.before_call(tool, args, **scope).blocked:
                guard.after_call(tool, args, result=call["result"], **scope)
        server.restart()
        got = guard.detector.history(session="chat", run_id="run-1")
        assert guard.stats().store_errors == 0
    _, want = reference(calls)
    assert [[r.tool_name, r.args_hash, r.tool_call_id, r.result_hash, r.outcome_kind, r.no_progress]
            for r in got] == want["history"]  # fmt: skip


@pytest.mark.parametrize("how", ["stopped", "hung"])
def test_without_redis_allow_lets_calls_through(tmp_path: Path, how: str, caplog: Any) -> None:
    with RedisServer(tmp_path / how) as server:
        # The client's own settings would wait forever; the store's bound still holds.
        client = redis.Redis.from_url(server.url, socket_timeout=None)
        guard = ToolLoopGuard({"enabled": True}, store=RedisStore(client, timeout_seconds=0.2))
        assert not guard.before_call("read", {}, session="s").blocked
        server.stop() if how == "stopped" else server.pause()
        started = time.monotonic()
        with caplog.at_level(logging.ERROR, logger="loopcore"):
            decisions = [guard.before_call("read", {"n": n}, session="s") for n in range(3)]
            seen = guard.after_call("read", {}, result="r", session="s")
            guard.end_run(session="s")
        elapsed = time.monotonic() - started
        assert not any(d.blocked for d in decisions)
        assert seen == "r"
        assert guard.stats().store_errors == 5
        lines = [r.getMessage() for r in caplog.records if "store unavailable" in r.getMessage()]
        assert lines
        assert "proceeds unguarded" in lines[0]
        assert len(lines) == 3  # storm control: the 1st, 2nd and 4th failures
        assert elapsed < 20  # bounded by timeout_seconds, not by the client's None


def test_without_redis_block_blocks_without_spending_recovery(tmp_path: Path) -> None:
    with RedisServer(tmp_path / "block") as server:
        client = redis.Redis.from_url(server.url)
        store = RedisStore(client, timeout_seconds=0.2, on_store_error="block")
        guard = ToolLoopGuard({"enabled": True}, store=store)
        server.stop()
        decision = guard.before_call("read", {}, session="s")
        assert decision.blocked
        assert not decision.terminal
        assert decision.verdict.detector == "loop_store_unavailable"
        assert guard.stats().store_errors == 1
        server.start()
        # The outage spent no recover-once allowance: the first real critical recovers.
        poll = ({"action": "poll", "sessionId": "x"}, {"details": {"status": "running"}})
        for _ in range(21):  # blocked on the 21st poll (20 before it)
            d = guard.before_call("process", poll[0], session="s")
            if not d.blocked:
                guard.after_call("process", poll[0], result=poll[1], session="s")
        assert d.blocked
        assert not d.terminal


def test_the_async_guard_is_bounded_when_redis_hangs(tmp_path: Path) -> None:
    async def main(server: RedisServer) -> tuple[Any, float]:
        client = aredis.Redis.from_url(server.url)
        guard = AsyncToolLoopGuard(
            {"enabled": True},
            store=AsyncRedisStore(client, timeout_seconds=0.2, on_store_error="block"),
        )
        assert not (await guard.before_call("read", {}, session="s")).blocked
        server.pause()
        started = time.monotonic()
        decision = await guard.before_call("read", {"n": 1}, session="s")
        elapsed = time.monotonic() - started
        server.resume()
        await client.aclose()
        return decision, elapsed

    with RedisServer(tmp_path / "hang") as server:
        decision, elapsed = asyncio.run(main(server))
    assert decision.blocked
    assert decision.verdict.detector == "loop_store_unavailable"
    assert elapsed < 20


def test_store_errors_reach_the_prometheus_collector(tmp_path: Path) -> None:
    prometheus = require("prometheus_client", "prometheus")
    from loopcore.metrics import PrometheusCollector

    with RedisServer(tmp_path / "metrics") as server:
        client = redis.Redis.from_url(server.url)
        guard = ToolLoopGuard({"enabled": True}, store=RedisStore(client, timeout_seconds=0.2))
        guard.before_call("read", {}, session="s")
        server.stop()
        for n in range(3):
            guard.before_call("read", {"n": n}, session="s")
    registry = prometheus.CollectorRegistry()
    registry.register(PrometheusCollector(guard))
    text = prometheus.generate_latest(registry).decode()
    assert "loopcore_store_errors_total 3.0" in text
    assert "loopcore_tool_calls_total 4.0" in text

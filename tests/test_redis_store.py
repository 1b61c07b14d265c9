"""Does the Redis store keep what the in-process ring keeps, under its keys? (SPEC §10, §12.3)

Against a real redis-server (``redis_url``): a hypothesis state machine gives
the Redis store and the reference ring the same operations and compares every
answer; the key layout (distinct scopes, one cluster slot a scope, TTLs, what
``end_run``/``end_session`` delete), the number of script calls a call costs,
and no ``KEYS``/``SCAN`` on the per-call path are read off the server itself.
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import require

redis = require("redis", "redis")

import hypothesis.strategies as st  # noqa: E402
from hypothesis import settings  # noqa: E402
from hypothesis.stateful import (  # noqa: E402
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)
from redis.crc import key_slot  # noqa: E402

from loopcore import ConfigError, LoopDetector, ToolLoopGuard  # noqa: E402
from loopcore._fleet_codec import scope_keys  # noqa: E402
from loopcore._ring_py import RingStore  # noqa: E402
from loopcore.redis import RedisStore  # noqa: E402

from .test_twins import (  # noqa: E402
    RING_HASHES,
    RING_IDS,
    RING_KEYS,
    RING_OUTCOMES,
    RING_RESULTS,
    RING_TOOLS,
    comparable,
)

POLL = ("process", {"action": "poll", "sessionId": "build-1"})
RUNNING = {"content": [{"type": "text", "text": "still running"}], "details": {"status": "running"}}


@pytest.fixture
def client(redis_url: str) -> Any:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def _store(client: Any, prefix: str, history_size: int = 30, **options: Any) -> RedisStore:
    return RedisStore(client, prefix=prefix, timeout_seconds=2, **options).for_history(history_size)


class RedisRingMachine(RuleBasedStateMachine):
    """The Redis store and the reference ring get the same operations and give the same answers."""

    client: Any = None
    prefix = ""

    @initialize(
        history_size=st.integers(1, 10),
        tools=st.integers(1, 3),
        hashes=st.lists(st.sampled_from(RING_HASHES), min_size=2, max_size=4, unique=True),
        results=st.integers(1, len(RING_RESULTS)),
        scopes=st.integers(1, len(RING_KEYS)),
    )
    def setup(
        self, history_size: int, tools: int, hashes: list[int], results: int, scopes: int
    ) -> None:
        self.client.flushdb()
        self.redis = _store(self.client, self.prefix, history_size)
        self.ring = RingStore(history_size, 100)
        self.tools, self.hashes = RING_TOOLS[:tools], hashes
        self.results, self.keys = RING_RESULTS[:results], RING_KEYS[:scopes]
        self.touched: set[Any] = set(self.keys)

    def both(self, method: str, *args: Any) -> Any:
        want, got = getattr(self.ring, method)(*args), getattr(self.redis, method)(*args)
        assert got == want, (method, args)
        return got

    def call(self, data: st.DataObject) -> tuple[Any, str, int, str | None]:
        key = data.draw(st.sampled_from(self.keys))
        self.touched.add(key)
        return (
            key,
            data.draw(st.sampled_from(self.tools)),
            data.draw(st.sampled_from(self.hashes)),
            data.draw(st.sampled_from(RING_IDS)),
        )

    @rule(data=st.data(), veto=st.booleans())
    def append(self, data: st.DataObject, veto: bool) -> None:
        self.both("append", *self.call(data), 1 if veto else 0)

    @rule(data=st.data(), blocked=st.booleans())
    def admit(self, data: st.DataObject, blocked: bool) -> None:
        # The guard's steps: admitted (the window before it comes back), then made a
        # veto when blocked; in-process the same call is one append of that kind.
        key, tool, h, call_id = self.call(data)
        before = [r[:2] + r[4:] for r in self.ring.window(key)]
        window, _ = self.redis.run("admit", key, tool, h, call_id, 0, True)
        # Call ids are hashes in a decoded window, and clocks differ: the rest is equal.
        assert [r[:2] + r[4:] for r in window] == before
        if blocked:
            self.redis.run("critical", key, tool, h, call_id, True)
        self.ring.append(key, tool, h, call_id, 1 if blocked else 0)

    @rule(
        data=st.data(),
        outcome=st.sampled_from(RING_OUTCOMES),
        unknown=st.sampled_from([None, None, "zap", "frob"]),
        no_progress=st.booleans(),
        identity=st.sampled_from([5, 6]),
    )
    def attach(
        self, data: st.DataObject, outcome: tuple[int, bool, bool], unknown: Any, no_progress: bool,
        identity: int,
    ) -> None:  # fmt: skip
        kind, with_result, with_identity = outcome
        result = data.draw(st.sampled_from(self.results)) if with_result else None
        args = (*self.call(data), result, unknown, kind, identity if with_identity else None)
        want = self.ring.attach(*args, no_progress=no_progress)
        got = self.redis.attach(*args, no_progress=no_progress)
        assert comparable([got]) == comparable([want])

    @rule(data=st.data(), ids=st.lists(st.sampled_from([*RING_IDS[1:], "c9"])))
    def release(self, data: st.DataObject, ids: list[str]) -> None:
        key = data.draw(st.sampled_from(self.keys))
        self.touched.add(key)
        self.both("release", key, ids)

    @rule(data=st.data())
    def reconcile(self, data: st.DataObject) -> None:
        self.both("reconcile", *self.call(data))

    @rule(key=st.sampled_from(RING_KEYS))
    def drop(self, key: Any) -> None:
        self.touched.add(key)
        self.both("drop", key)

    @rule(key=st.sampled_from(RING_KEYS))
    def drop_session(self, key: Any) -> None:
        self.touched.update(k for k in RING_KEYS if k[0] == key[0])
        self.both("drop_session", key[0])

    @invariant()
    def same_answers(self) -> None:
        # Every scope a step touched (each answer is a round trip: the rest are unchanged).
        if not hasattr(self, "redis"):
            return
        touched, self.touched = self.touched, set()
        for key in touched:
            assert comparable(self.redis.history(key)) == comparable(self.ring.history(key)), key
            for tool in self.tools:
                for args_hash in self.hashes[:2]:
                    assert self.redis.scan(key, tool, args_hash) == self.ring.scan(
                        key, tool, args_hash
                    )


def test_the_redis_store_agrees_with_the_reference_ring(client: Any, redis_prefix: str) -> None:
    RedisRingMachine.client, RedisRingMachine.prefix = client, redis_prefix
    run_state_machine_as_test(
        RedisRingMachine, settings=settings(max_examples=40, stateful_step_count=30, deadline=None)
    )


def test_distinct_scopes_have_distinct_keys_and_a_scope_one_slot() -> None:
    scopes = [
        (None, None), ("None", None), (None, "None"), ("a:b", "c"), ("a", "b:c"), ("{x}", "y"),
        ("x", "{y}"), (b"s", None), (1, None), ("1", None), (("a", 1), None), (("a", "1"), None),
        ("", None), ("s", "r}"), ("s}", "r"),
    ]  # fmt: skip
    keys = [scope_keys("lc:", scope) for scope in scopes]
    assert len({k[0] for k in keys}) == len(scopes)
    for ring, meta, runs, _ in keys:
        assert key_slot(ring.encode()) == key_slot(meta.encode()) == key_slot(runs.encode())
    # Sessions that are equal in Python are one scope, as in-process.
    assert scope_keys("lc:", (1, None)) == scope_keys("lc:", (True, None))
    assert scope_keys("lc:", (1, None)) == scope_keys("lc:", (1.0, None))


def test_a_scope_keys_expire_and_each_call_renews_them(client: Any, redis_prefix: str) -> None:
    guard = ToolLoopGuard(
        {"enabled": True}, store=RedisStore(client, prefix=redis_prefix, ttl_seconds=60)
    )
    guard.before_call("read", {"p": 1}, session="s", run_id="r")
    keys = scope_keys(redis_prefix, ("s", "r"))[:3]
    for key in keys:
        assert 0 < client.pttl(key) <= 60_000
        client.pexpire(key, 5_000)
    guard.after_call("read", {"p": 1}, result="x", session="s", run_id="r")
    assert all(client.pttl(key) > 5_000 for key in keys)


def test_end_run_and_end_session_delete_exactly_their_keys(client: Any, redis_prefix: str) -> None:
    guard = ToolLoopGuard({"enabled": True}, store=RedisStore(client, prefix=redis_prefix))
    for session, run in [("s", "r1"), ("s", "r2"), ("t", "r1")]:
        guard.before_call("read", {"p": 1}, session=session, run_id=run)
    held = lambda: sorted(k.decode() for k in client.scan_iter(redis_prefix + "*"))  # noqa: E731
    everything = held()
    guard.end_run(session="s", run_id="r1")
    gone = set(everything) - set(held())
    assert gone == set(scope_keys(redis_prefix, ("s", "r1"))[:2])
    assert guard.detector.history(session="s", run_id="r2")
    guard.end_session("s")
    assert held() == sorted(k for k in scope_keys(redis_prefix, ("t", "r1"))[:3])
    assert len(guard.detector.history(session="t", run_id="r1")) == 1


def _commands(client: Any) -> dict[str, int]:
    return {k.removeprefix("cmdstat_"): v["calls"] for k, v in client.info("commandstats").items()}


def test_a_call_costs_one_script_call_a_step_and_never_keys_or_scan(
    client: Any, redis_prefix: str
) -> None:
    guard = ToolLoopGuard({"enabled": True}, store=RedisStore(client, prefix=redis_prefix))
    guard.before_call("warm", {}, session="s", run_id="r")  # loads the scripts
    client.config_resetstat()
    for n in range(5):  # allowed calls: one script each way
        guard.before_call("read", {"n": n}, session="s", run_id="r")
        guard.after_call("read", {"n": n}, result="x", session="s", run_id="r")
    allowed = _commands(client)
    assert allowed.get("evalsha") == 10
    assert not {"keys", "scan", "eval"} & set(allowed)
    for _ in range(25):
        decision = guard.before_call(*POLL, session="s", run_id="r")
        if not decision.blocked:
            guard.after_call(*POLL, result=RUNNING, session="s", run_id="r")
    client.config_resetstat()
    blocked = guard.before_call(*POLL, session="s", run_id="r")
    assert blocked.blocked
    assert _commands(client).get("evalsha") == 2  # admitted, then the veto and critical_seen


def test_history_size_over_4096_is_a_config_error(client: Any, redis_prefix: str) -> None:
    store = RedisStore(client, prefix=redis_prefix)
    with pytest.raises(ConfigError, match="historySize"):
        ToolLoopGuard({"enabled": True, "historySize": 4097}, store=store)
    assert LoopDetector({"historySize": 4096}, store=store).store.history_size == 4096


def test_store_options_are_checked(client: Any) -> None:
    with pytest.raises(ValueError, match="on_store_error"):
        RedisStore(client, on_store_error="retry")
    with pytest.raises(ValueError, match="timeout_seconds"):
        RedisStore(client, timeout_seconds=0)
    with pytest.raises(ValueError, match="prefix"):
        RedisStore(client, prefix="a{b}")
    from loopcore.redis import AsyncRedisStore

    asynchronous = AsyncRedisStore(redis.asyncio.Redis())
    with pytest.raises(TypeError, match="AsyncToolLoopGuard"):
        ToolLoopGuard(store=asynchronous)


def test_a_host_object_session_is_refused_by_name(client: Any, redis_prefix: str) -> None:
    guard = ToolLoopGuard({"enabled": True}, store=RedisStore(client, prefix=redis_prefix))
    with pytest.raises(TypeError, match="session: a shared store needs"):
        guard.before_call("read", {}, session=object())


@pytest.mark.parametrize(
    "pending",
    [
        # (call id of each pending call, oldest first), then the outcome's id
        (["a", None, "b"], "a"),  # (a) its own id, though newer calls wait too
        ([None, "b"], "c"),  # (b) the call whose id was not known when it started
        (["b", None], "c"),
        (["b", "d"], "c"),  # (c) the newest, no other call holds the id
        (["b", "d"], None),
        ([None, None], "c"),
    ],
)
def test_an_outcome_finds_its_call_as_in_process(
    client: Any, redis_prefix: str, pending: tuple[list[str | None], str | None]
) -> None:
    # SPEC §9.1 (a)-(d), in the Lua matcher and the reference alike.
    ids, outcome_id = pending
    stores = [_store(client, redis_prefix, 10), RingStore(10, 10)]
    key = ("s", "r")
    for store in stores:
        store.append(key, "read", 9, "x", 0)  # another tool's call with an id
        for call_id in ids:
            store.append(key, "read", 1, call_id, 0)
        store.attach(key, "read", 1, outcome_id, 77, None)
        store.attach(key, "read", 1, "x", 78, None)  # x is also running: not this one's
    got, want = (comparable(store.history(key)) for store in stores)
    assert got == want
    assert sum(r[5] == 77 for r in got) == 1

"""Where do a fleet's workers keep one run's history? In Redis (SPEC §10).

``RedisStore`` (a ``redis.Redis`` client) and ``AsyncRedisStore`` (a
``redis.asyncio`` one) keep each scope's ring, and the hook state every worker
must agree on, in Redis or a Redis-protocol server such as Valkey: pass one
as ``ToolLoopGuard(config, store=...)`` (or ``LoopDetector``), or an
``AsyncRedisStore`` to ``loopcore.AsyncToolLoopGuard``. Each step is one atomic
script call (``_fleet_lua``); the counts and verdicts are computed here, by
the same code as in-process.

Every step completes or fails within ``timeout_seconds``; a failure raises
``StoreUnavailable``, which the guard turns into ``on_store_error``'s policy.
Needs the ``redis`` extra: ``pip install 'loopcore[redis]'``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Any

import redis as _redis
import redis.asyncio as _aredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from . import _fleet_lua as lua
from ._config import ConfigError
from ._counts import churn_count, quiet, scan_records
from ._decisions import StoreUnavailable
from ._fleet_codec import (
    attached_record,
    decode_window,
    id_hash,
    note_field,
    note_value,
    pack_hash,
    pack_time,
    record_of,
    scope_keys,
    session_keys,
)
from ._records import CallRecord, ScanStats
from ._scopes import ScopeKey, scope_key

__all__ = ["MAX_HISTORY", "AsyncRedisStore", "RedisStore", "StoreUnavailable"]

#: The largest ``historySize`` a Redis store keeps (a ring is read whole on every call).
MAX_HISTORY = 4096
_POLICIES = ("allow", "block")
# Connection settings carried over when a store makes its own bounded connection pool.
_CARRIED = frozenset(
    {
        "host",
        "port",
        "path",
        "db",
        "username",
        "password",
        "credential_provider",
        "client_name",
        "protocol",
        "socket_keepalive",
        "socket_keepalive_options",
        "health_check_interval",
    }
)
_SCRIPTS = {
    "admit": lua.ADMIT,
    "critical": lua.CRITICAL,
    "warn": lua.WARN,
    "attach": lua.ATTACH,
    "reconcile": lua.RECONCILE,
    "release": lua.RELEASE,
    "read": lua.READ,
    "drop": lua.DROP,
    "drop_session": lua.DROP_SESSION,
    "state": lua.STATE,
    "put_state": lua.PUT_STATE,
}


def _check_options(
    prefix: object, ttl_seconds: object, timeout_seconds: object, on_store_error: object
) -> None:
    if not isinstance(prefix, str):
        raise TypeError(f"prefix: expected a str, got {type(prefix).__name__}")
    if "{" in prefix or "}" in prefix:
        raise ValueError(f"prefix: must not contain '{{' or '}}' (the hash tag), got {prefix!r}")
    for name, value in (("ttl_seconds", ttl_seconds), ("timeout_seconds", timeout_seconds)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{name}: expected a positive number of seconds, got {value!r}")
    if on_store_error not in _POLICIES:
        raise ValueError(f"on_store_error: expected 'allow' or 'block', got {on_store_error!r}")


def _bounded(
    client: Any,
    timeout: float,
    pool_types: tuple[type, ...],
    make: Callable[..., Any],
    retry_type: Callable[..., Any],
) -> Any:
    """A client on the same server whose every step fails within ``timeout``.

    For a plain connection pool the store makes its own (same server and
    credentials; its timeouts, no retries, raw bytes); any other client
    (cluster, sentinel) is used as given, bounded by its own settings.
    """
    pool: Any = getattr(client, "connection_pool", None)
    if type(pool) not in pool_types:
        return client
    kwargs = {
        k: v for k, v in pool.connection_kwargs.items() if k in _CARRIED or k.startswith("ssl")
    }
    # One retry, for a connection the server dropped (a restart, an idle timeout):
    # the step is sent again on a fresh one. A timeout is never retried.
    retry = retry_type(NoBackoff(), 1, supported_errors=(_redis.ConnectionError,))
    kwargs.update(
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=retry,
        decode_responses=False,
    )
    fresh = type(pool)(
        connection_class=pool.connection_class, max_connections=pool.max_connections, **kwargs
    )
    return make(connection_pool=fresh)


class _Steps:
    """What both stores share: options, keys, and each step's script arguments and reply.

    A store class names its client's library: the pools it bounds, the client
    and retry types it makes, and the other library's client it refuses.
    """

    shared = True
    _pools: tuple[type, ...]
    _client_type: Callable[..., Any]
    _retry_type: Callable[..., Any]
    _refused: tuple[type, str]

    def __init__(
        self,
        client: Any,
        *,
        prefix: str = "loopcore:",
        ttl_seconds: float = 86400,
        timeout_seconds: float = 0.05,
        on_store_error: str = "allow",
    ) -> None:
        other, owner = self._refused
        if isinstance(client, other):
            raise TypeError(f"client: a {other.__module__}.{other.__name__} belongs to {owner}")
        _check_options(prefix, ttl_seconds, timeout_seconds, on_store_error)
        self.client = client
        self.prefix = prefix
        self.ttl_seconds = ttl_seconds
        self.timeout_seconds = float(timeout_seconds)
        self.on_store_error = on_store_error
        self.history_size = 30
        self._ttl = str(max(1, int(ttl_seconds * 1000)))
        #: scopes evicted to make room: never, in Redis (keys expire instead)
        self.evicted = 0
        self._client = _bounded(
            client, self.timeout_seconds, self._pools, self._client_type, self._retry_type
        )
        self._scripts = {
            name: self._client.register_script(text) for name, text in _SCRIPTS.items()
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}(prefix={self.prefix!r}, history_size={self.history_size})"

    def __len__(self) -> int:
        return 0  # the fleet's scopes are not counted per worker (no KEYS/SCAN)

    def _head(self, key: ScopeKey) -> tuple[list[str], list[Any]]:
        ring, meta, runs, member = scope_keys(self.prefix, key)
        return [ring, meta, runs], [self.history_size, self._ttl, member]

    def _call(self, tool: str, args_hash: int, call_id: str | None) -> list[Any]:
        has = call_id is not None
        return [
            tool,
            pack_hash(args_hash),
            "1" if has else "0",
            id_hash(call_id) if has else b"",  # type: ignore[arg-type]
            call_id if has else "",
        ]

    def _window(self, reply: Sequence[Any]) -> list[list[Any]]:
        ring, head, fill, names = reply[:4]
        return decode_window(ring, int(head), int(fill), names, self.history_size)

    # Each step: (script, keys, args, reading of the reply).

    def step_admit(
        self, key: ScopeKey, tool: str, args_hash: int, call_id: str | None, kind: int, want: bool
    ) -> tuple[str, list[str], list[Any], Callable[[Any], Any]]:
        keys, head = self._head(key)
        args = [*head, *self._call(tool, args_hash, call_id)]
        args += [pack_time(time.time()), kind, "1" if want else "0"]
        return "admit", keys, args, lambda r: (self._window(r), bool(r[4]))

    def step_critical(
        self, key: ScopeKey, tool: str, args_hash: int, call_id: str | None, veto: bool
    ) -> tuple[str, list[str], list[Any], Callable[[Any], Any]]:
        keys, head = self._head(key)
        args = [*head, *self._call(tool, args_hash, call_id)]
        args += [pack_time(time.time()), "1" if veto else "0"]
        return "critical", keys, args, lambda r: bool(int(r))

    def step_warn(
        self,
        key: ScopeKey,
        warning_key: str,
        multiple: int,
        tool: str,
        args_hash: int,
        call_id: str | None,
        note: str | None,
        live: int,
    ) -> tuple[str, list[str], list[Any], Callable[[Any], Any]]:
        keys, head = self._head(key)
        value = b"" if note is None else note_value(call_id, note)
        args = [*head, warning_key, multiple, note_field(tool, args_hash), value, live]
        args.append(repr(time.time()))
        return "warn", keys, args, lambda r: (bool(int(r[0])), int(r[1]))

    def step_attach(
        self,
        key: ScopeKey,
        tool: str,
        args_hash: int,
        call_id: str | None,
        result_hash: int | None,
        unknown: str | None,
        kind: int,
        identity: int | None,
        no_progress: bool,
        pop_note: bool,
    ) -> tuple[str, list[str], list[Any], Callable[[Any], Any]]:
        keys, head = self._head(key)
        args = [*head, *self._call(tool, args_hash, call_id), pack_time(time.time())]
        args += [
            b"" if result_hash is None else pack_hash(result_hash),
            "" if unknown is None else unknown,
            "0" if unknown is None else "1",
            kind,
            b"" if identity is None else pack_hash(identity),
            "1" if no_progress else "0",
            "1" if pop_note else "0",
            note_field(tool, args_hash),
        ]

        def read(reply: Sequence[Any]) -> tuple[CallRecord, str | None, Any]:
            note = reply[8]
            text = note.decode("utf-8", "surrogatepass") if note else None
            return attached_record(key, reply), text, (reply[9], reply[10])

        return "attach", keys, args, read

    def step_read(
        self, key: ScopeKey, ids: bool = False, live: bool = False
    ) -> tuple[str, list[str], list[Any], Callable[[Any], Any]]:
        keys, head = self._head(key)
        args = [*head, "1" if ids else "0", "1" if live else "0"]

        def read(reply: Sequence[Any]) -> tuple[list[list[Any]], list[Any], Any]:
            ids_of = reply[4] if ids else []
            return self._window(reply), ids_of, reply[5] if live else None

        return "read", keys, args, read

    def step_reconcile(
        self, key: ScopeKey, tool: str, args_hash: int, call_id: str | None
    ) -> tuple[str, list[str], list[Any], Callable[[Any], Any]]:
        keys, head = self._head(key)
        args = [*head, *self._call(tool, args_hash, call_id)]

        def read(reply: Sequence[Any]) -> tuple[bool, bool, int, int]:
            if not int(reply[0]):
                return False, False, 0, 0
            records = self._window(reply[3])
            older = records[: int(reply[2])]
            churn, variants = churn_count(older[::-1], tool, args_hash)
            return True, bool(int(reply[1])), churn, variants

        return "reconcile", keys, args, read

    def step_release(
        self, key: ScopeKey, tool_call_ids: Collection[str]
    ) -> tuple[str, list[str], list[Any], Callable[[Any], Any]]:
        keys, head = self._head(key)
        ids = sorted({i for i in tool_call_ids if type(i) is str})
        return "release", keys, [*head, *ids], int

    def step_drop(self, key: ScopeKey) -> tuple[str, list[str], list[Any], Callable[[Any], Any]]:
        keys, head = self._head(key)
        return "drop", keys, head, lambda r: (bool(int(r[0])), r[1])

    def step_state(
        self, key: ScopeKey, field: str
    ) -> tuple[str, list[str], list[Any], Callable[[Any], Any]]:
        keys, head = self._head(key)
        return "state", keys, [*head, field], lambda r: (r[0], r[1], r[2] == b"1")

    def step_put_state(
        self, key: ScopeKey, field: str, version: bytes, document: bytes
    ) -> tuple[str, list[str], list[Any], Callable[[Any], Any]]:
        keys, head = self._head(key)

        def read(reply: Sequence[Any]) -> tuple[bool, Any, Any]:
            if int(reply[0]):
                return True, None, None
            return False, reply[1], reply[2]

        return "put_state", keys, [*head, field, version, document], read

    def step_drop_session(
        self, session: Hashable
    ) -> tuple[str, list[str], list[Any], Callable[[Any], Any]]:
        runs, base = session_keys(self.prefix, scope_key(session, None)[0])
        return "drop_session", [runs], [base], int

    def _bound_copy(self, history_size: int) -> Any:
        if isinstance(history_size, bool) or not isinstance(history_size, int):
            raise TypeError(f"history_size: expected an int, got {type(history_size).__name__}")
        if history_size > MAX_HISTORY:
            raise ConfigError(
                f"tools.loopDetection.historySize: a Redis store keeps at most {MAX_HISTORY} "
                f"records a scope, got {history_size}"
            )
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        copy.history_size = history_size
        return copy


class RedisStore(_Steps):
    """Scope histories in Redis through a ``redis.Redis`` client (SPEC §10)."""

    _pools = (_redis.ConnectionPool, _redis.BlockingConnectionPool)
    _client_type = _redis.Redis
    _retry_type = Retry
    _refused = (_aredis.Redis, "AsyncRedisStore")

    def for_history(self, history_size: int) -> RedisStore:
        """This store for a guard keeping ``history_size`` records a scope."""
        return self._bound_copy(history_size)  # type: ignore[no-any-return]

    def run(self, step: str, *args: Any) -> Any:
        """One step (``step_<name>``'s script), or ``StoreUnavailable``."""
        script, keys, argv, read = getattr(self, "step_" + step)(*args)
        try:
            reply = self._scripts[script](keys=keys, args=argv)
            return read(reply)
        except (_redis.RedisError, OSError) as exc:
            raise StoreUnavailable(step, exc) from None

    # -- the ring store's interface, for LoopDetector and the guard's other methods -------

    def scan(
        self, key: ScopeKey, tool_name: str, args_hash: int, alarm: int = 0, unknown_alarm: int = 0
    ) -> ScanStats | None:
        records = self.run("read", key)[0]
        stats = scan_records(records, tool_name, args_hash)
        return None if quiet(stats, alarm, unknown_alarm) else stats

    def append(
        self, key: ScopeKey, tool_name: str, args_hash: int, tool_call_id: str | None, kind: int = 0
    ) -> None:
        self.run("admit", key, tool_name, args_hash, tool_call_id, kind, False)

    def attach(
        self,
        key: ScopeKey,
        tool_name: str,
        args_hash: int,
        tool_call_id: str | None,
        result_hash: int | None,
        unknown: str | None,
        kind: int = 0,
        identity: int | None = None,
        no_progress: bool = False,
    ) -> CallRecord:
        found = self.run(
            "attach", key, tool_name, args_hash, tool_call_id, result_hash, unknown, kind,
            identity, no_progress, False,
        )  # fmt: skip
        record: CallRecord = found[0]
        return record

    def release(self, key: ScopeKey, tool_call_ids: Collection[str]) -> int:
        removed: int = self.run("release", key, tool_call_ids)
        return removed

    def reconcile(
        self, key: ScopeKey, tool_name: str, args_hash: int, tool_call_id: str | None
    ) -> tuple[bool, bool, int, int]:
        answer: tuple[bool, bool, int, int] = self.run(
            "reconcile", key, tool_name, args_hash, tool_call_id
        )
        return answer

    def window(self, key: ScopeKey) -> list[list[Any]]:
        records: list[list[Any]] = self.run("read", key)[0]
        return records

    def history(self, key: ScopeKey) -> list[CallRecord]:
        records, ids, _ = self.run("read", key, True)
        return [record_of(key, r, _id(i)) for r, i in zip(records, ids, strict=False)]

    def drop(self, key: ScopeKey) -> bool:
        dropped: bool = self.run("drop", key)[0]
        return dropped

    def drop_session(self, session: Hashable) -> int:
        dropped: int = self.run("drop_session", session)
        return dropped


def _id(value: Any) -> str | None:
    return value.decode("utf-8", "surrogatepass") if value else None


class AsyncRedisStore(_Steps):
    """Scope histories in Redis through a ``redis.asyncio`` client, for ``AsyncToolLoopGuard``."""

    asynchronous = True
    _pools = (_aredis.ConnectionPool, _aredis.BlockingConnectionPool)
    _client_type = _aredis.Redis
    _retry_type = AsyncRetry
    _refused = (_redis.Redis, "RedisStore")

    def for_history(self, history_size: int) -> AsyncRedisStore:
        """This store for a guard keeping ``history_size`` records a scope."""
        return self._bound_copy(history_size)  # type: ignore[no-any-return]

    async def run(self, step: str, *args: Any) -> Any:
        """One step, bounded by ``timeout_seconds`` whatever the client's own settings."""
        script, keys, argv, read = getattr(self, "step_" + step)(*args)
        try:
            reply = await asyncio.wait_for(
                self._scripts[script](keys=keys, args=argv), self.timeout_seconds
            )
            return read(reply)
        except (_redis.RedisError, OSError, asyncio.TimeoutError) as exc:
            raise StoreUnavailable(step, exc) from None

    async def history(self, key: ScopeKey) -> list[CallRecord]:
        records, ids, _ = await self.run("read", key, True)
        return [record_of(key, r, _id(i)) for r, i in zip(records, ids, strict=False)]

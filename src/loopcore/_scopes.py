"""What is a scope, and how are per-scope tables kept bounded? (SPEC §3, §5)"""

from __future__ import annotations

import gc
import threading
import weakref
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["ScopeKey", "ScopeLock", "ScopeTable", "SessionRef", "scope_key", "session_of"]

ScopeKey = tuple[Hashable, "str | None"]
V = TypeVar("V")


# Sessions of these exact types are compared and hashed without running host code.
_PLAIN = frozenset({type(None), str, int, float, bool, bytes})
# Tuples are looked into this deep; a deeper one is treated as a host object.
_PLAIN_DEPTH = 8


def _plain(value: object, depth: int = 0) -> bool:
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind is tuple and depth < _PLAIN_DEPTH:
        return all(_plain(item, depth + 1) for item in value)  # type: ignore[attr-defined]
    return False


class SessionRef:
    """A host's session object as the per-scope tables hold it.

    Compared by identity and hashed by the hash its session had when it was
    made, so a table (under its lock) never runs the host's ``__eq__`` or
    ``__hash__``. Equal sessions share one reference: ``scope_key`` looks it up
    (host code may run then, before any lock is taken), and it lives as long
    as some scope key holds it.
    """

    __slots__ = ("__weakref__", "_hash", "value")

    def __init__(self, value: Hashable, hashed: int) -> None:
        self.value = value
        self._hash = hashed

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"SessionRef({type(self.value).__qualname__})"


# One reference per equal session, process-wide; an entry goes with its reference.
_REFS: weakref.WeakValueDictionary[Hashable, SessionRef] = weakref.WeakValueDictionary()


def _session_ref(session: Hashable, hashed: int) -> SessionRef:
    ref = _REFS.get(session)
    if ref is None:
        ref = _REFS.setdefault(session, SessionRef(session, hashed))
    return ref


def scope_key(session: Hashable, run_id: str | None) -> ScopeKey:
    """The ``(session, run_id)`` key; the run id is stripped and "" becomes None.

    A session of a plain type (None, str, int, float, bool, bytes, tuples of
    them) is kept as it is; any other becomes its ``SessionRef``.
    """
    if run_id is not None:
        if not isinstance(run_id, str):
            raise TypeError(f"run_id: expected a str or None, got {type(run_id).__name__}")
        run_id = run_id.strip() or None
    try:
        hashed = hash(session)
    except TypeError:
        raise TypeError(
            f"session: expected a hashable value, got {type(session).__name__}"
        ) from None
    if type(session) is SessionRef or _plain(session):
        return (session, run_id)
    return (_session_ref(session, hashed), run_id)


def session_of(key: ScopeKey) -> Hashable:
    """The session a scope key stands for, as the host gave it."""
    session = key[0]
    return session.value if type(session) is SessionRef else session


class ScopeTable(Generic[V]):
    """A mapping from scope key to per-scope state, least recently used first, capped.

    Keeps an index from session to its keys so that ending a session does not
    walk every live scope.
    """

    __slots__ = ("_by_session", "_entries", "max_scopes")

    def __init__(self, max_scopes: int) -> None:
        if isinstance(max_scopes, bool) or not isinstance(max_scopes, int) or max_scopes < 1:
            raise ValueError(f"max_scopes: expected a positive integer, got {max_scopes!r}")
        self.max_scopes = max_scopes
        self._entries: OrderedDict[ScopeKey, V] = OrderedDict()
        self._by_session: dict[Hashable, set[ScopeKey]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[ScopeKey]:
        return iter(self._entries)

    def get(self, key: ScopeKey) -> V | None:
        """The entry for ``key`` (marked as most recently used), or None."""
        entry = self._entries.get(key)
        if entry is not None:
            self._entries.move_to_end(key)
        return entry

    def put(self, key: ScopeKey, entry: V) -> list[ScopeKey]:
        """Insert a new entry; returns the keys evicted to stay within ``max_scopes``."""
        evicted: list[ScopeKey] = []
        while len(self._entries) >= self.max_scopes:
            old, _ = self._entries.popitem(last=False)
            self._unindex(old)
            evicted.append(old)
        self._entries[key] = entry
        self._by_session.setdefault(key[0], set()).add(key)
        return evicted

    def pop(self, key: ScopeKey, lock: ScopeLock | None = None) -> V | None:
        """Remove ``key``'s entry; ``lock`` keeps the stored key until it is released."""
        if lock is not None:
            stored = next((k for k in self._by_session.get(key[0], ()) if k == key), None)
            lock.bury(stored)
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._unindex(key)
        return entry

    def pop_session(self, session: Hashable) -> list[ScopeKey]:
        """Drop every scope of ``session``; returns the keys dropped."""
        keys = list(self._by_session.pop(session, ()))
        for key in keys:
            del self._entries[key]
        return keys

    def _unindex(self, key: ScopeKey) -> None:
        keys = self._by_session.get(key[0])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_session[key[0]]


class ScopeLock:
    """A lock under which no host code runs, for the per-scope tables.

    A collection can run on any allocation, and the finalisers it runs are host
    code that may call back into the guard: the cyclic collector is off while
    the lock is held. Objects the tables let go of under the lock (scope keys,
    whose sessions may have finalisers) are ``bury``-ed and dropped only once
    it is released. Not re-entrant: nothing that runs under it calls out.
    """

    __slots__ = ("_dead", "_lock", "_was_enabled")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._was_enabled = False
        self._dead: list[Any] = []

    def __enter__(self) -> None:
        self._lock.acquire()
        self._was_enabled = gc.isenabled()
        if self._was_enabled:
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        dead = self._dead
        if dead:
            self._dead = []
        if self._was_enabled:
            gc.enable()
        self._lock.release()
        del dead  # with the lock released: finalisers may call back in

    @property
    def raw(self) -> threading.Lock:
        """The lock itself, without the collector switched off: only for a section
        that allocates no container (so no collection, and no finaliser, can run)."""
        return self._lock

    def bury(self, *objects: object) -> None:
        """Keep ``objects`` alive until the lock is released (caller holds it)."""
        self._dead.extend(objects)

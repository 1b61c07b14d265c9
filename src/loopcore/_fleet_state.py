"""How do a scope's post-compaction guard and run-loop counters travel through a shared store?

As small JSON documents in the scope's hash, written back with a version check
(``STATE`` / ``PUT_STATE`` in ``_fleet_lua``): a worker loads the state, runs
the same step as in-process on it, and writes it back only if no other worker
wrote it meanwhile (else it loads the new state and runs the step again).
"""

from __future__ import annotations

import json
from typing import Any

from ._guard import PostCompactionGuard
from ._runloop import RunLoop

__all__ = ["dump_guard", "dump_runloop", "load_guard", "load_runloop"]


def dump_guard(guard: PostCompactionGuard) -> bytes:
    """An armed guard's state; b"" for an unarmed one (its baseline is re-read on arming)."""
    if not guard.armed:
        return b""
    state = {
        "remaining": guard._remaining,
        "window": [list(t) for t in guard._window],
        "baseline": [list(s) for s in guard._baseline],
        "snapshot": sorted([list(s) for s in guard._snapshot]),
        "calls": guard._calls,
        "repeats": guard._repeats,
        "tools": sorted(guard._tools),
    }
    return json.dumps(state, separators=(",", ":")).encode("ascii")


def load_guard(blob: bytes | None, window_size: int) -> PostCompactionGuard:
    """The guard a state holds (a new, unarmed one for none)."""
    guard = PostCompactionGuard(window_size)
    if not blob:
        return guard
    state: dict[str, Any] = json.loads(blob)
    guard._remaining = int(state["remaining"])
    guard._window.extend(
        (str(t), int(a), None if r is None else int(r)) for t, a, r in state["window"]
    )
    guard._baseline.extend((str(t), int(a)) for t, a in state["baseline"])
    guard._snapshot = frozenset((str(t), int(a)) for t, a in state["snapshot"])
    guard._calls = int(state["calls"])
    guard._repeats = int(state["repeats"])
    guard._tools = {str(t) for t in state["tools"]}
    return guard


def dump_runloop(runs: RunLoop) -> bytes:
    state = {"turns": runs._turns, "errors": runs._error_streak, "idle": list(runs._idle.items())}
    return json.dumps(state, separators=(",", ":")).encode("ascii")


def load_runloop(blob: bytes | None, limits: tuple[int | None, int | None, int | None]) -> RunLoop:
    runs = RunLoop(*limits)
    if blob:
        state: dict[str, Any] = json.loads(blob)
        runs._turns = int(state["turns"])
        runs._error_streak = int(state["errors"])
        runs._idle = {int(sig): int(n) for sig, n in state["idle"]}
    return runs

"""What trace do the batch-scan benchmarks scan? A generated, pre-fingerprinted ``CallTable``.

Runs (scopes) are interleaved call by call, each a sequence of 40-call phases:
ordinary work (fresh args and results), a poll that never progresses
(``command_status``, same args and result), a ping-pong between two calls with
unchanging results, retries of a tool that does not exist, and a repeated read
whose results keep changing. So every detector fires somewhere, as in a busy
gateway's traffic, and most calls are ordinary.

``feed`` replays the same table through a sequential detector, one
``check``/``record_call``/``record_outcome`` per row: each hash stands in for
the args or result it came from, as an int of 63 bits (the compiled encoder
takes 64-bit ints on its fast path; dropping one bit of random hashes merges
none in practice, and the benchmark checks that every verdict agrees), so the
detector sees the same equalities as the scan.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from loopcore.batch import CallTable
from loopcore.batch._table import name_hash

__all__ = ["TOOLS", "feed", "make_table"]

TOOLS = ("read", "exec", "grep", "write", "command_status", "browser")
_READ, _EXEC, _GREP, _WRITE, _POLL, _MISSING = range(len(TOOLS))
_PHASE = 40
_SLICE = 65_536
_ONE = np.uint64(1)
#: ordinary, no-progress poll, ping-pong, unknown tool, changing repeat
_PHASE_WEIGHTS = (0.8, 0.05, 0.05, 0.04, 0.06)


def _mix(values: np.ndarray) -> np.ndarray:
    """Spread small distinct integers over 64 bits, as real xxh3 hashes are (splitmix64)."""
    z = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def make_table(calls: int, scopes: int, seed: int = 7) -> CallTable:
    """A trace of ``calls`` calls over ``scopes`` interleaved runs."""
    rng = np.random.default_rng(seed)
    scope = rng.integers(0, scopes, calls)
    order = np.argsort(scope, kind="stable")
    first = np.cumsum(np.bincount(scope, minlength=scopes))
    first = first - np.bincount(scope, minlength=scopes)
    pos = np.empty(calls, np.int64)
    pos[order] = np.arange(calls) - first[scope[order]]

    phase_id = scope * 1_000_003 + pos // _PHASE  # one id per (run, phase)
    # Every call of a phase must draw the same kind: hash the phase id into [0, 1).
    mixed = (phase_id.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)
    phase_kind = np.searchsorted(np.cumsum(_PHASE_WEIGHTS), mixed / float(1 << 24))
    phase_kind = np.minimum(phase_kind, len(_PHASE_WEIGHTS) - 1)

    fresh = rng.integers(1, 2**63, calls, dtype=np.int64).astype(np.uint64)
    stable = phase_id.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F) + np.uint64(1)
    side = (pos % 2).astype(np.uint64)
    tool = rng.choice(np.array([_READ, _EXEC, _GREP, _WRITE]), calls)
    args = fresh.copy()
    result = fresh ^ np.uint64(0x5555)
    has_result = rng.random(calls) > 0.02  # a few calls end with no outcome
    unknown = np.zeros(calls, np.uint64)
    has_unknown = np.zeros(calls, np.bool_)

    poll = phase_kind == 1
    tool[poll] = _POLL
    args[poll] = stable[poll]
    result[poll] = stable[poll] + np.uint64(1)

    pingpong = phase_kind == 2
    tool[pingpong] = np.where(side[pingpong] == 0, _READ, _EXEC)
    args[pingpong] = stable[pingpong] + side[pingpong]
    result[pingpong] = stable[pingpong] + side[pingpong] + np.uint64(7)

    missing = phase_kind == 3
    tool[missing] = _MISSING
    args[missing] = stable[missing] + (pos[missing] % 3).astype(np.uint64)
    # The detector hashes the one error text alike everywhere; so does the table.
    result[missing] = np.uint64(0xBAD5EED)
    has_result[missing] = True
    has_unknown[missing] = True
    unknown[missing] = np.uint64(name_hash("browser"))

    changing = phase_kind == 4
    tool[changing] = _READ
    args[changing] = stable[changing]

    tool_hashes = np.array([name_hash(name) for name in TOOLS], np.uint64)
    return CallTable.from_columns(
        scope=scope,
        tool_hash=tool_hashes[tool],
        args_hash=_mix(args),
        result_hash=np.where(has_result, _mix(result), 0),
        has_result=has_result,
        unknown_hash=unknown,
        has_unknown=has_unknown,
        known_poll=tool == _POLL,
        names={int(h): name for h, name in zip(tool_hashes.tolist(), TOOLS, strict=True)},
    )


def feed(table: CallTable, detector: Any) -> Callable[[], list[tuple[str | None, str | None, int]]]:
    """A function that replays ``table`` through ``detector`` and returns its verdicts.

    The columns are turned into Python values a slice at a time, inside the
    replay: that is part of feeding a table to a per-call API, and it keeps
    memory flat on millions of calls.
    """
    names: Mapping[int, str] = table.names
    runs = [key[1] for key in table.scopes]
    errors = {h: f"unknown tool: {name}" for h, name in names.items()}

    def run() -> list[tuple[str | None, str | None, int]]:
        check = detector.check
        record_call = detector.record_call
        record_outcome = detector.record_outcome
        verdicts = []
        for start in range(0, len(table), _SLICE):
            part = slice(start, start + _SLICE)
            rows = zip(
                [names[h] for h in table.tool_hash[part].tolist()],
                (table.args_hash[part] >> _ONE).tolist(),
                [runs[s] for s in table.scope[part].tolist()],
                table.has_result[part].tolist(),
                (table.result_hash[part] >> _ONE).tolist(),
                table.has_unknown[part].tolist(),
                table.unknown_hash[part].tolist(),
                strict=True,
            )
            for tool, arg, run_id, done, result, failed, unknown in rows:
                verdict = check(tool, arg, run_id=run_id)
                verdicts.append((verdict.level, verdict.detector, verdict.count))
                record_call(tool, arg, run_id=run_id)
                if failed:
                    record_outcome(tool, arg, error=errors[unknown], run_id=run_id)
                elif done:
                    record_outcome(tool, arg, result=result, run_id=run_id)
        return verdicts

    return run

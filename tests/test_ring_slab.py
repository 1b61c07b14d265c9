"""Do rows' blocks from the process-wide slab keep every record intact, and does its thread behave?

The compiled store takes its rows' blocks from one slab shared by every store
(``_ring_slab.h``): a freed block is handed to the next row that needs its
size, stale bytes and all, and a background thread faults in, ahead of use,
chunks that callers map for it. Stores sharing the slab are driven against the
Python twin through growth, drops, evictions and deallocation; the thread is
checked in fresh processes (it starts once the slab is large, its chunks are a
mapping of their own, it restarts in a fork child, and ``LOOPCORE_PREFAULT=0``
keeps it off).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loopcore
from loopcore import _ring_py
from loopcore._records import KIND_TERMINAL_EXEC

from .conftest import TWINS

pytestmark = pytest.mark.skipif(
    "cython" not in TWINS, reason="the compiled twin is not built in this install"
)

if "cython" in TWINS:
    from loopcore import _ring_c
else:  # pragma: no cover
    _ring_c = _ring_py

#: Where this run's loopcore comes from: the probes in fresh processes import the same one.
SRC = Path(loopcore.__file__).resolve().parents[1]

#: Call ids: inline ASCII, inline non-ASCII, too long to be inline, none.
CALL_IDS = ["call_{:024d}", "é-{}", "x" * 40 + "{}", None]


def raw(window: list[list[Any]]) -> list[list[Any]]:
    return [record[:3] + record[4:] for record in window]  # without the timestamp


class Pair:
    """A Python and a compiled store fed the same calls."""

    def __init__(self, history_size: int, max_scopes: int) -> None:
        self.python = _ring_py.RingStore(history_size, max_scopes)
        self.compiled = _ring_c.RingStore(history_size, max_scopes)

    def both(self, method: str, *args: Any) -> Any:
        want = getattr(self.python, method)(*args)
        got = getattr(self.compiled, method)(*args)
        return want, got


@settings(max_examples=40, deadline=None)
@given(
    history_size=st.sampled_from([1, 5, 16, 30, 130]),
    max_scopes=st.sampled_from([3, 20, 1000]),
    steps=st.integers(50, 900),
    seed=st.integers(0, 2**32 - 1),
)
def test_stores_sharing_the_slab_keep_their_records(
    history_size: int, max_scopes: int, steps: int, seed: int
) -> None:
    # Two stores take blocks from the same free lists while rows grow, are dropped,
    # evicted, and a whole store is let go and replaced: every window stays the
    # Python twin's.
    rng = random.Random(seed)
    pairs = [Pair(history_size, max_scopes), Pair(history_size, max_scopes)]
    sessions = [None, "s1", "s2"]
    runs = [f"run-{n}" for n in range(40)]
    for step in range(steps):
        pair = rng.choice(pairs)
        key = (rng.choice(sessions), rng.choice(runs))
        pattern = rng.choice(CALL_IDS)
        call_id = None if pattern is None else pattern.format(step)
        args_hash = rng.randrange(2**64)
        move = rng.random()
        if move < 0.45:
            want, got = pair.both("append", key, "read", args_hash, call_id)
        elif move < 0.8:
            terminal = rng.random() < 0.4
            kind = KIND_TERMINAL_EXEC if terminal else 0
            identity = rng.randrange(2**64) if terminal else None
            want, got = pair.both(
                "attach", key, "write", args_hash, call_id, rng.randrange(2**64),
                None, kind, identity,
            )  # fmt: skip
            assert (got.args_hash, got.tool_call_id, got.result_hash) == (
                want.args_hash, want.tool_call_id, want.result_hash,
            )  # fmt: skip
        elif move < 0.9:
            want, got = pair.both("drop", key)
            assert got == want
        elif move < 0.95:
            want, got = pair.both("drop_session", key[0])
            assert got == want
        else:
            # The store's blocks go back to the slab, for the other store to reuse.
            pairs[pairs.index(pair)] = Pair(history_size, max_scopes)
            continue
        assert (len(pair.compiled), pair.compiled.evicted) == (
            len(pair.python), pair.python.evicted,
        )  # fmt: skip
    for pair in pairs:
        for session in sessions:
            for run_id in runs:
                key = (session, run_id)
                # A window's records carry every field, identity hashes too.
                assert raw(pair.compiled.window(key)) == raw(pair.python.window(key)), key


def test_freed_blocks_are_reused_by_the_next_rows() -> None:
    # A store's rows given back (the store let go) are the memory new rows get:
    # pages wholly freed go to the pool, the rest keep their freed blocks, and
    # the slab maps no new chunk for the same rows again.
    first = _ring_c.RingStore(30, 10_000)
    keys = [(None, f"run-{n}") for n in range(500)]
    for key in keys:
        for j in range(20):
            first.append(key, "read", j, f"call_{j:024d}")
    before = _ring_c._slab_stats()
    del first
    freed = _ring_c._slab_stats()
    assert freed["blocks"] == before["blocks"] - 500 * 2
    assert freed["pooled"] > before["pooled"]
    second = _ring_c.RingStore(30, 10_000)
    for key in keys:
        for j in range(20):
            second.append(key, "read", j + 1, f"call_{j:024d}")
    after = _ring_c._slab_stats()
    assert after["chunks"] == freed["chunks"]
    assert after["recycled"] > freed["recycled"]
    assert [record[1] for record in second.window(keys[7])] == list(range(1, 21))


def test_large_history_rows_keep_their_records() -> None:
    # Blocks past the slab's largest class come from the raw allocator.
    pair = Pair(1000, 10)
    for j in range(1000):
        pair.both("append", (None, "run"), "read", j, f"id{j}")
    pair.both("append", (None, "run"), "read", 5, "last")
    assert raw(pair.compiled.window((None, "run"))) == raw(pair.python.window((None, "run")))
    assert pair.both("drop", (None, "run")) == (True, True)


# Fills 12,000 scopes of 30 calls with ids (about 26 MiB of blocks: past the
# threshold of the thread), then prints the slab's counters; in "fork" mode a
# child fills as much again and prints its counters.
PROBE = """
import json, os, sys, time
from loopcore import _ring_c
def fill(tag, scopes=12_000):
    store = _ring_c.RingStore(30, 1_000_000)
    for n in range(scopes):
        key = (None, f"{tag}-{n}")
        for j in range(30):
            store.append(key, "read", j, f"call_{j:024d}")
    return store
def settled():
    # The thread runs at idle priority: on a busy machine it may wait for a core,
    # for as long as other processes keep both busy (up to a minute here).
    for _ in range(6000):
        stats = _ring_c._slab_stats()
        if not stats["thread"] or stats["ready"] > 0:
            return stats
        time.sleep(0.01)
    return _ring_c._slab_stats()
def mappings():
    maps = []
    for line in open("/proc/self/maps"):
        span, perms = line.split()[:2]
        low, high = (int(part, 16) for part in span.split("-"))
        maps.append((low, high, perms))
    return maps
def isolated(chunk):
    # The chunk lies in a read-write mapping with an inaccessible page right
    # before and right after it: nothing else was merged into it.
    maps = mappings()
    for k, (low, high, perms) in enumerate(maps):
        if low <= chunk < high:
            before, after = maps[k - 1], maps[k + 1]
            return (
                perms.startswith("rw") and before[1] == low and before[2].startswith("---")
                and after[0] == high and after[2].startswith("---")
            )
    return False
kept = fill("parent")
parent = settled()
if sys.platform.startswith("linux"):
    # The scheduling policy of each thread but the interpreter's own.
    parent["policies"] = [
        os.sched_getscheduler(int(tid)) for tid in os.listdir("/proc/self/task")
        if int(tid) != os.getpid()
    ]
    reserve = _ring_c._slab_reserve()
    parent["reserve"] = len(reserve)
    parent["isolated"] = all(isolated(chunk) for chunk in reserve)
out = {"parent": parent}
if sys.argv[1] == "fork":
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        before = _ring_c._slab_stats()
        store = fill("child")
        ok = [record[1] for record in store.window((None, "child-9"))] == list(range(30))
        ok = ok and [record[1] for record in kept.window((None, "parent-9"))] == list(range(30))
        child = {"before": before, "after": settled(), "intact": ok}
        os.write(write, json.dumps(child).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while True:
        chunk = os.read(read, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.waitpid(pid, 0)
    out["child"] = json.loads(b"".join(chunks))
print(json.dumps(out))
"""


def probe(mode: str, **env: str) -> dict[str, Any]:
    environ = {k: v for k, v in os.environ.items() if k != "LOOPCORE_PREFAULT"}
    environ.update(PYTHONPATH=str(SRC), **env)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        capture_output=True, text=True, timeout=300, env=environ, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the thread is Linux's")
def test_a_large_slab_gets_chunks_faulted_in_by_the_thread() -> None:
    parent = probe("once")["parent"]
    assert not parent["refused"]
    assert parent["thread"]
    # It runs at idle priority: only on a core nothing else wants.
    assert parent["policies"] == [os.SCHED_IDLE]
    assert parent["taken"] > 0
    assert parent["prefaulted"] >= parent["taken"]
    # The reserve is bounded: at most 8 chunks of 2 MiB wait, one per 128 in use.
    assert 0 <= parent["ready"] + parent["queued"] <= max(1, parent["chunks"] // 128)
    # Callers map the thread's chunks (it never changes the memory map itself),
    # each mapping with a guard page on either side, so that no later mapping
    # is merged into one the thread is faulting in.
    assert 0 < parent["regions"] <= parent["prefaulted"] + parent["queued"]
    held = parent["ready"] + parent["queued"]  # the one in the thread's hands is not listed
    assert max(1, held - 1) <= parent["reserve"] <= held
    assert parent["isolated"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_fork_child_keeps_working_and_gets_its_own_thread() -> None:
    report = probe("fork")
    child = report["child"]
    assert child["intact"]
    if not sys.platform.startswith("linux"):  # no thread to restart elsewhere
        return
    # The parent's reserve is dropped in the child; its own thread fills again.
    assert child["before"]["ready"] == child["before"]["queued"] == 0
    assert child["after"]["thread"]
    assert child["after"]["taken"] > child["before"]["taken"]


def test_the_thread_can_be_switched_off() -> None:
    parent = probe("once", LOOPCORE_PREFAULT="0")["parent"]
    assert not parent["thread"]
    assert parent["refused"]
    assert parent["taken"] == 0
    assert parent["prefaulted"] == 0
    assert parent["chunks"] == parent["mapped"] > 8


def test_rows_growing_side_by_side_reuse_the_pages_they_leave() -> None:
    # Scopes growing in turn (a gateway's round robin) free their 4- and 8-record
    # blocks a page at a time: the 16-record blocks fill those pages, so the slab
    # maps little more than the live blocks take.
    before = _ring_c._slab_stats()
    store = _ring_c.RingStore(30, 100_000)
    scopes = 6000
    for j in range(10):
        for k in range(scopes):
            store.append((None, f"run-{k}"), "read", j, f"call_{j:024d}")
    after = _ring_c._slab_stats()
    live = scopes * (16 * 41 + 16 * 33)  # every row: 16 records and their ids
    assert after["recycled"] > before["recycled"]
    assert (after["chunks"] - before["chunks"]) * (2 << 20) <= live * 1.25 + (2 << 20)
    assert [record[1] for record in store.window((None, "run-5999"))] == list(range(10))

"""Does the compiled ring find every scope's row, cold or warm, as its table and rows grow?

The compiled store remembers the key it found last, keeps a row's bookkeeping in
one cache line and its block's address in the table entry (a prefetch hint); none
of that may change an answer. Each test drives both ring stores (or detectors)
with the same calls and compares every answer, and checks that a caller's key
is not kept alive.
"""

from __future__ import annotations

import random
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopcore import LoopDetector, ToolLoopGuard, _ring_py

from .conftest import TWINS, use_twin

pytestmark = pytest.mark.skipif(
    "cython" not in TWINS, reason="the compiled twin is not built in this install"
)

if "cython" in TWINS:
    from loopcore import _ring_c
else:  # pragma: no cover
    _ring_c = _ring_py


def stores(history_size: int, max_scopes: int) -> list[Any]:
    return [
        _ring_py.RingStore(history_size, max_scopes),
        _ring_c.RingStore(history_size, max_scopes),
    ]


def raw(window: list[list[Any]]) -> list[list[Any]]:
    return [record[:3] + record[4:] for record in window]  # without the timestamp


def fresh(text: str) -> str:
    """An equal copy of ``text`` that is not the same object."""
    copy = "".join(list(text))
    assert copy == text
    assert copy is not text
    return copy


@settings(max_examples=25, deadline=None)
@given(
    scopes=st.integers(1, 700),
    history_size=st.sampled_from([1, 3, 30, 70]),
    max_scopes=st.sampled_from([50, 400, 100_000]),
    seed=st.integers(0, 2**32 - 1),
)
def test_round_robin_over_many_scopes_agrees(
    scopes: int, history_size: int, max_scopes: int, seed: int
) -> None:
    # Rows grow (4, 8, 16, ... records) while the table is moved to a larger one,
    # scopes are evicted and dropped, keys come as the stored objects and as equal
    # copies: every scan and window is the Python twin's.
    rng = random.Random(seed)
    python, compiled = stores(history_size, max_scopes)
    run_ids = [f"run-{n}" for n in range(scopes)]
    hashes = [rng.randrange(2**64) for _ in range(6)]
    for step in range(6 * scopes + 50):
        run_id = run_ids[rng.randrange(scopes)]
        key = (None, run_id if rng.random() < 0.7 else fresh(run_id))
        args_hash = rng.choice(hashes)
        call_id = f"c{step}" if rng.random() < 0.5 else None
        move = rng.random()
        if move < 0.6:
            want = python.scan_append(key, "read", args_hash, call_id, 4, 4)
            got = compiled.scan_append(key, "read", args_hash, call_id, 4, 4)
            assert got == want, step
        elif move < 0.9:
            result = rng.choice([1, 2])
            want = python.attach(key, "read", args_hash, call_id, result, None)
            got = compiled.attach(key, "read", args_hash, call_id, result, None)
            assert (got.args_hash, got.tool_call_id, got.result_hash) == (
                want.args_hash, want.tool_call_id, want.result_hash,
            )  # fmt: skip
        elif move < 0.97:
            assert compiled.drop(key) == python.drop(key)
        else:
            assert compiled.scan(key, "read", args_hash) == python.scan(key, "read", args_hash)
        assert (len(compiled), compiled.evicted) == (len(python), python.evicted)
    for run_id in run_ids:
        key = (None, run_id)
        assert raw(compiled.window(key)) == raw(python.window(key)), run_id


def test_a_callers_equal_key_is_not_kept() -> None:
    # The store remembers the key it found last only when its parts are the stored
    # key's own objects; a caller's equal run id is let go with the call.
    store = _ring_c.RingStore(4, 10)
    store.append((None, "run-1"), "read", 1, None)
    run_id = fresh("run-1")
    before = sys.getrefcount(run_id)
    for _ in range(3):
        store.scan_append((None, run_id), "read", 2, None, 9, 9)
        store.attach((None, run_id), "read", 2, None, 5, None)
    # The record the last outcome returned (dropped here) is the ring's spare until the
    # next outcome refills it (tests/test_record_reuse.py): one outcome elsewhere.
    store.scan_append((None, "run-other"), "read", 3, None, 9, 9)
    store.attach((None, "run-other"), "read", 3, None, 5, None)
    assert sys.getrefcount(run_id) == before
    assert [record[1] for record in store.window((None, "run-1"))] == [1, 2, 2, 2]


def test_a_callers_identical_key_is_remembered_and_let_go_with_its_row() -> None:
    # A caller's new tuple of the stored parts is remembered (so the next step of
    # the call skips the lookup); dropping the scope lets it go.
    store = _ring_c.RingStore(4, 10)
    run_id = fresh("run-2")
    store.append((None, run_id), "read", 1, None)
    key = (None, run_id)
    before = sys.getrefcount(key)
    store.scan_append(key, "read", 2, None, 9, 9)
    assert sys.getrefcount(key) == before + 1  # the found key
    assert store.drop((None, fresh("run-2")))
    assert sys.getrefcount(key) == before
    assert store.window(key) == []


@pytest.mark.parametrize("leg", ["check", "guard"])
def test_detectors_agree_over_a_shuffled_round_robin(leg: str) -> None:
    # The benchmark's workload in small: every scope filled, then visited in a
    # shuffled order (the compiled twin warms each cold row before its scan).
    config = {
        "enabled": True,
        "historySize": 12,
        "warningThreshold": 3,
        "criticalThreshold": 5,
        "globalCircuitBreakerThreshold": 7,
    }
    twins = []
    for twin in ("python", "cython"):
        with use_twin(twin):
            twins.append(
                LoopDetector(config, max_scopes=300)
                if leg == "check"
                else ToolLoopGuard(config, max_scopes=300)
            )
    run_ids = [f"run-{n}" for n in range(300)]
    order = run_ids * 8
    random.Random(14).shuffle(order)
    answers: list[list[Any]] = [[], []]
    for step, run_id in enumerate(order):
        # Half the scopes repeat one call (verdicts fire), half vary theirs.
        args = {"n": 0 if run_id[-1] in "02468" else step % 5}
        for det, seen in zip(twins, answers, strict=True):
            if leg == "check":
                verdict = det.check("read", args, run_id=run_id)  # type: ignore[union-attr]
                det.record_call("read", args, f"id{step}", run_id=run_id)  # type: ignore[union-attr]
                det.record_outcome(  # type: ignore[union-attr]
                    "read", args, result=0, tool_call_id=f"id{step}", run_id=run_id
                )
                seen.append((verdict.stuck, verdict.detector, verdict.count))
            else:
                decision = det.before_call(  # type: ignore[union-attr]
                    "read", args, tool_call_id=f"id{step}", run_id=run_id
                )
                if not decision.blocked:
                    det.after_call(  # type: ignore[union-attr]
                        "read", args, result=0, tool_call_id=f"id{step}", run_id=run_id
                    )
                seen.append((decision.blocked, decision.reason))
    assert answers[0] == answers[1]
    assert any(answer[0] for answer in answers[1])  # verdicts fired, too
    for run_id in run_ids:
        python, compiled = (
            [
                (r.args_hash, r.tool_call_id, r.result_hash, r.outcome_kind)
                for r in det._store.history((None, run_id))
            ]
            for det in twins
        )
        assert compiled == python, run_id


def test_a_large_table_is_moved_and_given_back_without_losing_a_scope() -> None:
    # 140,000 scopes: the table grows past a megabyte, so the tables it leaves are
    # mapped and given back a slice per new scope; scopes are dropped meanwhile.
    store = _ring_c.RingStore(2, 200_000)
    keys = [(None, f"run-{n}") for n in range(140_000)]
    for n, key in enumerate(keys):
        store.append(key, "read", n, None)
        if n % 5 == 4:
            assert store.drop(keys[n - 3])
    assert len(store) == 140_000 - 140_000 // 5
    for n, key in enumerate(keys):
        window = store.window((None, fresh(key[1])))
        assert [record[1] for record in window] == ([] if n % 5 == 1 else [n]), n


@pytest.mark.parametrize("fill", [1, 2, 3, 7, 16, 29, 30])
def test_a_scan_counts_only_hashes_equal_in_both_halves(fill: int) -> None:
    # A record whose hash shares only its low or only its high 32 bits with
    # the call's must not count, at every fill: a count that compares the
    # args column a few hashes a step (or in halves) must still be exact.
    probe = 0x0123_4567_89AB_CDEF
    near = [
        probe ^ (1 << 40),  # the same low half
        probe ^ 1,  # the same high half
        probe,
        (probe << 32 | probe >> 32) & (2**64 - 1),  # the halves swapped
    ]
    python, compiled = stores(30, 10)
    for i in range(fill):
        python.scan_append(("s", "r"), "read", near[i % len(near)], None, 99, 99)
        compiled.scan_append(("s", "r"), "read", near[i % len(near)], None, 99, 99)
    want = python.scan(("s", "r"), "read", probe, 0, 99)  # alarm 0: always the stats
    got = compiled.scan(("s", "r"), "read", probe, 0, 99)
    assert got == want
    assert want is not None
    assert want.recent == sum(near[i % len(near)] == probe for i in range(fill))


@pytest.mark.parametrize("scan", ["quiet", "alarmed", "appended", "churn"])
def test_a_scanned_scope_is_the_newest_when_the_next_scope_evicts(scan: str) -> None:
    # The compiled scan marks its row used only after scanning it (the LRU move's
    # writes wait for the row's lines): the order an eviction reads is the Python
    # twin's whether the scan was quiet, alarmed, appended its call, or walked a
    # churn of more variants than the stack table holds.
    def drive(store: Any) -> list[list[list[Any]]]:
        keys = [(None, f"run-{n}") for n in range(4)]
        for n, key in enumerate(keys):
            for j in range(12):
                store.attach(key, "read", 100 + j % 10, None, 7, None, no_progress=True)
            store.append(key, "read", n, None)
        oldest = keys[0]
        if scan == "quiet":
            assert store.scan(oldest, "read", 99, 50, 50) is None
        elif scan == "alarmed":
            assert store.scan(oldest, "read", 0, 1, 50) is not None
        elif scan == "appended":
            assert store.scan_append(oldest, "read", 99, None, 50, 50) is None
        else:
            assert store.scan(oldest, "read", 100, 2, 50) is not None
        store.append((None, "run-new"), "read", 5, None)  # evicts the least recently used
        return [raw(store.window(key)) for key in [*keys, (None, "run-new")]]

    python, compiled = stores(30, 4)
    want = drive(python)
    assert want[0] != []  # the scanned scope stayed,
    assert want[1] == []  # the next one went
    assert drive(compiled) == want

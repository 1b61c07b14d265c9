"""Is the record an outcome returns always its own, whatever became of earlier ones?

The compiled ring refills the record it returned last when nothing holds it any
more, instead of freeing it and allocating the next. These tests hold that no
caller can tell: a record that is kept never changes, a dropped one is never
seen again, a record changed behind the dataclass's back is not trusted, and a
finaliser run while the spare is refilled cannot be handed the same record.
Every test runs once per twin (the autouse ``twin`` fixture of conftest.py).
"""

from __future__ import annotations

import dataclasses
import gc
import weakref
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore import CallRecord, LoopDetector

pytestmark = pytest.mark.usefixtures("twin")

ON = {"enabled": True}


def fields(record: CallRecord) -> tuple[Any, ...]:
    return dataclasses.astuple(record)


OUTCOMES = st.sampled_from(
    [
        {"result": "same text"},
        {"result": {"content": [{"type": "text", "text": "x"}], "details": {"n": 1}}},
        {"error": "Unknown tool: nope"},
        {"result": None},
        {"result": 7},
    ]
)


@given(
    steps=st.lists(
        st.tuples(st.integers(0, 5), st.booleans(), OUTCOMES, st.sampled_from([None, "c1"])),
        min_size=1,
        max_size=40,
    )
)
def test_kept_records_never_change_and_each_equals_its_history_entry(
    steps: list[tuple[int, bool, dict[str, Any], str | None]],
) -> None:
    detector = LoopDetector(ON)
    kept: list[tuple[CallRecord, tuple[Any, ...]]] = []
    for offset, keep, outcome, call_id in steps:
        args = {"path": "/a", "offset": offset}
        if call_id is not None:
            detector.record_call("read", args, call_id, run_id="r")
        record = detector.record_outcome("read", args, tool_call_id=call_id, run_id="r", **outcome)
        if record is None:
            continue
        assert type(record) is CallRecord
        assert record in detector.history(run_id="r")
        if keep:
            kept.append((record, fields(record)))
        del record
    for record, snapshot in kept:
        assert fields(record) == snapshot
    ids = [id(record) for record, _ in kept]
    assert len(set(ids)) == len(ids)


def test_a_dropped_record_is_refilled_with_the_next_outcome_fields() -> None:
    detector = LoopDetector(ON)
    detector.record_outcome("read", {"offset": 1}, result="one", run_id="r")
    second = detector.record_outcome("read", {"offset": 2}, result="two", run_id="r")
    assert second == detector.history(run_id="r")[-1]
    assert (second.args_hash, second.result_hash) != (
        detector.history(run_id="r")[0].args_hash,
        detector.history(run_id="r")[0].result_hash,
    )


def test_a_record_changed_behind_the_dataclass_is_not_trusted() -> None:
    detector = LoopDetector(ON)
    record = detector.record_outcome("read", {"offset": 1}, result="same", run_id="r")
    assert record is not None
    assert record.result_hash is not None
    # Frozen, but object.__setattr__ still writes the slots.
    object.__setattr__(record, "result_hash", -record.result_hash)
    object.__setattr__(record, "args_hash", "not an int")
    object.__setattr__(record, "run_id", "elsewhere")
    del record
    again = detector.record_outcome("read", {"offset": 2}, result="same", run_id="r")
    assert again == detector.history(run_id="r")[-1]
    assert again is not None
    assert again.run_id == "r"
    assert isinstance(again.args_hash, int)


class Reentrant:
    """A value whose finaliser records another outcome (re-entry while refilling)."""

    def __init__(self, detector: LoopDetector, seen: list[CallRecord | None]) -> None:
        self.detector = detector
        self.seen = seen

    def __del__(self) -> None:
        self.seen.append(
            self.detector.record_outcome("read", {"offset": 9}, result="inner", run_id="inner")
        )


def test_a_finaliser_run_while_refilling_gets_a_record_of_its_own() -> None:
    detector = LoopDetector(ON)
    seen: list[CallRecord | None] = []
    record = detector.record_outcome("read", {"offset": 1}, result="first", run_id="outer")
    assert record is not None
    # The record becomes the last holder of an object with a finaliser.
    object.__setattr__(record, "tool_call_id", Reentrant(detector, seen))
    del record
    outer = detector.record_outcome("read", {"offset": 2}, result="next", run_id="outer")
    gc.collect()
    assert len(seen) == 1
    inner = seen[0]
    assert outer is not None
    assert inner is not None
    assert outer is not inner
    assert outer == detector.history(run_id="outer")[-1]
    assert inner == detector.history(run_id="inner")[-1]
    assert outer.run_id == "outer"
    assert inner.run_id == "inner"


class Host:
    """A host's session object (hashable by identity, weakly referable)."""


@pytest.mark.parametrize("kept", [False, True])
def test_no_dropped_record_keeps_a_host_session_alive(kept: bool) -> None:
    detector = LoopDetector(ON)
    host = Host()
    ref = weakref.ref(host)
    record = detector.record_outcome("read", {"offset": 1}, result="x", session=host)
    if not kept:
        del record
    detector.end_session(host)
    del host
    if kept:
        assert ref() is not None  # the caller's record holds it
        del record
    gc.collect()
    assert ref() is None


def test_a_field_kept_from_a_dropped_record_keeps_its_value() -> None:
    detector = LoopDetector(ON)
    record = detector.record_outcome("read", {"offset": 1}, result="one", run_id="r")
    assert record is not None
    timestamp, args_hash, result_hash = record.timestamp, record.args_hash, record.result_hash
    snapshot = (float(timestamp), int(args_hash), result_hash)
    del record
    for offset in range(2, 6):
        detector.record_outcome("read", {"offset": offset}, result=f"r{offset}", run_id="r")
    assert (timestamp, args_hash, result_hash) == snapshot
    assert detector.history(run_id="r")[0].timestamp == timestamp


def test_hashes_given_in_place_to_a_dropped_record_are_the_new_ones() -> None:
    # The compiled ring rewrites a dropped record's hash ints in place when
    # nothing else holds them: each outcome's record still reads its own hashes.
    from loopcore._outcome_py import hash_call, outcome_of

    detector = LoopDetector(ON)
    for offset in range(60):
        args = {"path": "/src/app/main.py", "offset": offset, "limit": 200}
        result = f"text {offset % 7}"
        record = detector.record_outcome("read", args, result=result, run_id="r")
        assert record is not None
        assert record.args_hash == hash_call("read", args)
        assert record.result_hash == outcome_of("read", args, result=result)[0]
        assert fields(record) == fields(detector.history(run_id="r")[-1])
        del record

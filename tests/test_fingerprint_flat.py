"""The one-pass writer of small flat dicts (``_fingerprint_flat.h``) against the reference.

A dict of up to 16 ASCII str keys mapped to plain scalars (a tool call's args,
a result's details) is written in one pass; whatever that writer declines
(non-ASCII or long text, wide ints, integral floats beyond int64, a wrapper in
nonces mode) goes to the general writer. Both must give the reference's bytes,
through ``encode``/``fingerprint`` and through the per-call path's args hash
(the C API's ``enc_flat_dict``, from the memo's entries).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore import LoopDetector
from loopcore._outcome_py import hash_call

from .conftest import TWINS
from .test_fingerprint_twins import assert_same

pytestmark = pytest.mark.skipif(
    "cython" not in TWINS, reason="the compiled twin is not built in this install"
)

WRAPPED = (
    '<<<EXTERNAL_UNTRUSTED_CONTENT id="a1b2c3d4e5f60718">>>page'
    '<<<END_EXTERNAL_UNTRUSTED_CONTENT id="a1b2c3d4e5f60718">>>'
)

#: Values at the edges of what the one-pass writer covers, and just past them.
EDGE_VALUES: list[Any] = [
    "",
    "a",
    "abc",
    "abcd",
    "/src/app/main.py",  # 16 characters: the widest inline copy
    "/src/app/main.py!",  # 17
    "x" * 4096,
    "x" * 4097,  # declined: the general writer
    "caf\u00e9",  # non-ASCII: declined
    "\u4e2d\u6587",
    WRAPPED,  # a wrapper: declined in nonces mode only
    "<<<EXTERNAL_UNTRUSTED_CONTENT" + "x" * 200,
    0,
    1,
    -1,
    200,
    2**30 - 1,
    2**30,  # two digits on 3.11: declined
    -(2**30),
    2**62,
    2**63,
    -(2**63) - 1,
    2**100,
    0.0,
    -0.0,
    0.5,
    -2.25,
    1.0,
    1e300,
    9223372036854775807.0,  # 2**63 as a float: beyond int64, declined
    -9223372036854775808.0,  # -2**63: still int64
    math.inf,
    -math.inf,
    math.nan,
    None,
    True,
    False,
]

KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=0, max_size=12) | st.sampled_from(
    ["a" * 256, "b" * 257, "c" * 1, "d" * 2, "path", "offset", "limit"]
)
FLAT = st.dictionaries(KEYS, st.sampled_from(EDGE_VALUES), max_size=16)


@pytest.mark.parametrize("value", EDGE_VALUES, ids=repr)
def test_each_edge_value_alone_and_among_others(value: Any) -> None:
    assert_same({"k": value})
    assert_same({"path": "/src/app/main.py", "offset": 3, "limit": 200, "v": value})
    assert_same({"lines": 200, "truncated": False, "status": value})


@given(FLAT)
def test_generated_flat_dicts_encode_alike(value: dict[str, Any]) -> None:
    assert_same(value)


def test_more_entries_than_the_one_pass_writer_takes() -> None:
    for n in (15, 16, 17, 40):
        assert_same({f"k{i}": i for i in range(n)})


def test_dict_larger_than_the_inline_buffer() -> None:
    # Past the encoder's inline room: the writer asks for room, then writes.
    assert_same({f"key{i}": "v" * 400 for i in range(12)})
    assert_same({"a": "x" * 4000, "b": "y" * 4000})


@given(FLAT)
def test_the_per_call_args_hash_is_the_reference(args: dict[str, Any]) -> None:
    from loopcore._twins import use_twin

    with use_twin("cython"):
        detector = LoopDetector({"enabled": True})
    # check, then record_outcome: the second hash comes from the memo's entries.
    detector.check("read", args)
    record = detector.record_outcome("read", args, result="ok")
    assert record is not None
    assert record.args_hash == hash_call("read", args)


def test_key_sets_met_again_in_turn_and_in_another_order() -> None:
    # The one-pass writer keeps the key sets it met last with their order: the
    # same key objects again (in turn with others, or inserted in another
    # order, or with other values) must still give the reference's bytes.
    keys = ["path", "offset", "limit", "p", "pa", "b" * 257]
    shapes = [keys[:3], keys[3:], keys[1:5], list(reversed(keys[:3])), keys[:3]]
    for round_ in range(3):
        for shape in shapes:
            assert_same({key: round_ for key in shape})
            assert_same({key: f"v{round_}" for key in reversed(shape)})
            assert_same({key: WRAPPED if round_ == 1 else None for key in shape})
    # Keys made afresh each time (not the kept objects) with the same text.
    for _ in range(3):
        assert_same({"".join(["pa", "th"]): 1, "".join(["off", "set"]): 2})


@pytest.mark.parametrize(
    "tail",
    [None, 5, 2**40, "é", WRAPPED, 1.5, 2.0**70],
    ids=["none", "int", "wide-int", "non-ascii", "wrapped", "float", "big-float"],
)
def test_kept_keys_whose_values_outgrow_the_room_or_are_declined(tail: Any) -> None:
    # Keys met before are written in a single pass with their values: a value
    # past the room left, or one the writer declines after others were written,
    # must still come out as the reference's bytes.
    keys = ["alpha", "beta", "gamma"]
    for size in (0, 10, 200, 500, 4000, 5000):
        assert_same({keys[0]: "x" * size, keys[1]: tail, keys[2]: 1})
        assert_same({keys[0]: 1, keys[1]: "y" * size, keys[2]: tail})
        assert_same([{keys[0]: "z" * size, keys[1]: 0, keys[2]: tail}] * 3)

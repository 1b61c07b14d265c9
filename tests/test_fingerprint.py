"""SPEC §2 canonical encoding, pinned through ``hash_call`` and ``hash_outcome``.

Most encoding tests run through both entry points (``enc`` fixture): a plain result of
``hash_outcome`` is the canonical hash of the whole value, so every equality and
inequality that holds for call arguments must hold for plain results too.
"""

from __future__ import annotations

import copy
import itertools
import math
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore import hash_call, hash_outcome

# Runs on both twins (see conftest).
pytestmark = pytest.mark.usefixtures("twin")

Encoder = Callable[[Any], int]

DEEP = 100_000


def _via_call(value: Any) -> int:
    return hash_call("probe", value)


def _via_outcome(value: Any) -> int:
    result_hash, unknown = hash_outcome("probe", {}, result=value)
    assert unknown is None
    assert result_hash is not None
    return result_hash


@pytest.fixture(params=["call", "outcome"])
def enc(request: pytest.FixtureRequest) -> Encoder:
    return _via_call if request.param == "call" else _via_outcome


def _in_range(value: Any) -> bool:
    return type(value) is int and 0 <= value < 2**64


def _nest_lists(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def _nest_dicts(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"k": value}
    return value


# --- mappings -------------------------------------------------------------------


def test_key_order_does_not_matter(enc: Encoder) -> None:
    assert enc({"a": 1, "b": 2, "c": [1, {"x": 1, "y": 2}]}) == enc(
        {"c": [1, {"y": 2, "x": 1}], "b": 2, "a": 1}
    )


def test_int_and_str_keys_differ(enc: Encoder) -> None:
    assert enc({1: "v"}) != enc({"1": "v"})


def test_bool_and_int_keys_differ(enc: Encoder) -> None:
    assert enc({True: "v"}) != enc({1: "v"})


def test_mapping_values_matter(enc: Encoder) -> None:
    assert enc({"a": 1}) != enc({"a": 2})
    assert enc({"a": 1}) != enc({"b": 1})
    assert enc({"a": 1}) != enc({"a": 1, "b": 1})


def test_framing_of_adjacent_strings(enc: Encoder) -> None:
    # Concatenation without length prefixes or separators would make these collide.
    assert enc(["ab", "c"]) != enc(["a", "bc"])
    assert enc({"a": "bc"}) != enc({"ab": "c"})
    assert enc([[1], [2]]) != enc([[1, 2]])
    assert enc([[], [1]]) != enc([[1], []])


# --- sequences and sets ---------------------------------------------------------


def test_list_equals_tuple(enc: Encoder) -> None:
    assert enc([1, "a", None]) == enc((1, "a", None))
    assert enc({"k": [(1, 2), [3]]}) == enc({"k": ([1, 2], (3,))})


def test_list_order_matters(enc: Encoder) -> None:
    assert enc([1, 2]) != enc([2, 1])


def test_set_equals_sorted_list(enc: Encoder) -> None:
    assert enc({1, 2}) == enc([1, 2])
    assert enc(frozenset({1, 2})) == enc([1, 2])
    assert enc({1, 2}) == enc((2, 1)[::-1])


def test_set_encodes_as_some_ordering_of_its_elements(enc: Encoder) -> None:
    # The sort key is the element encoding, so which permutation is not pinned; one must match.
    elems = ["pear", "apple", 7, None, b"raw", 2.5]
    set_hash = enc(set(elems))
    assert enc(frozenset(elems)) == set_hash
    candidates = {enc(list(p)) for p in itertools.permutations(elems)}
    assert set_hash in candidates


def test_set_independent_of_insertion_order(enc: Encoder) -> None:
    words = [f"w{i}" for i in range(50)]
    forward: set[str] = set()
    for w in words:
        forward.add(w)
    backward: set[str] = set()
    for w in reversed(words):
        backward.add(w)
    assert enc(forward) == enc(backward)


def test_set_contents_matter(enc: Encoder) -> None:
    assert enc({1, 2}) != enc({1, 3})
    assert enc({1, 2}) != enc({1})


# --- scalars --------------------------------------------------------------------


def test_bool_distinct_from_int(enc: Encoder) -> None:
    assert enc(True) != enc(1)
    assert enc(False) != enc(0)
    assert enc(True) != enc(1.0)
    assert enc(True) != enc(False)
    assert enc([True]) != enc([1])


def test_float_equal_to_int_encodes_like_int(enc: Encoder) -> None:
    assert enc(1.0) == enc(1)
    assert enc(-0.0) == enc(0)
    assert enc(0.0) == enc(-0.0)
    assert enc(1e300) == enc(int(1e300))
    assert enc(float(2**200)) == enc(2**200)
    assert enc(-3.0) == enc(-3)


def test_non_integral_floats_are_distinct(enc: Encoder) -> None:
    assert enc(1.5) != enc(1)
    assert enc(1.5) != enc(2)
    assert enc(0.1) != enc(0.2)
    assert enc(1.5) != enc("1.5")


def test_nan_equal_to_nan() -> None:
    # Separate NaN objects, including a negative-signed one, must share one encoding.
    nan_a = float("nan")
    nan_b = float("-nan")
    assert nan_a is not nan_b
    assert _via_call(nan_a) == _via_call(nan_b) == _via_call(math.nan)
    assert _via_call([nan_a]) == _via_call([float("nan")])
    assert _via_outcome(nan_a) == _via_outcome(math.nan)


def test_nan_and_infinities_distinct(enc: Encoder) -> None:
    values = [math.nan, math.inf, -math.inf, None, 0, "nan", "inf"]
    hashes = [enc(v) for v in values]
    assert len(set(hashes)) == len(values)
    assert enc(math.inf) == enc(float("inf"))
    assert enc(-math.inf) == enc(float("-inf"))


def test_none_is_distinct(enc: Encoder) -> None:
    assert enc(None) != enc(0)
    assert enc(None) != enc("None")
    assert enc(None) != enc("")
    assert enc(None) != enc([])
    assert enc(None) != enc(False)


def test_int_and_str_values_differ(enc: Encoder) -> None:
    assert enc(1) != enc("1")
    assert enc("") != enc([])


def test_big_ints(enc: Encoder) -> None:
    big = 2**200
    assert enc(big) == enc(2**200)
    assert enc(big) != enc(-big)
    assert enc(big) != enc(big + 1)
    # Truncation to 64 bits or two's-complement wrapping would collide these.
    assert enc(2**64) != enc(0)
    assert enc(2**64 + 1) != enc(1)
    assert enc(-1) != enc(2**64 - 1)
    assert enc(2**63) != enc(-(2**63))


def test_ints_beyond_str_digit_limit(enc: Encoder) -> None:
    # 5001 digits: str() on it raises ValueError under the default int-to-str limit.
    huge = 10**5000
    assert enc(huge) == enc(10**5000)
    assert enc(huge) != enc(huge + 1)
    assert enc(huge) != enc(-huge)
    assert _in_range(enc(-huge))


def test_lone_surrogates(enc: Encoder) -> None:
    high = "\ud800"
    low = "\udc00"
    assert _in_range(enc(high))
    assert enc(high) == enc("\ud800")
    assert enc(high) != enc(low)
    assert enc(high) != enc("")
    assert enc(high) != enc("?")
    assert enc({high: low}) != enc({low: high})
    assert enc("a\udfffb") != enc("ab")


def test_non_ascii_text(enc: Encoder) -> None:
    assert enc("café") != enc("cafe")
    assert enc("日本") == enc("日本")


# --- binary -----------------------------------------------------------------------


def test_bytes_like_are_equal(enc: Encoder) -> None:
    raw = b"abc\x00\xff"
    assert enc(raw) == enc(bytearray(raw)) == enc(memoryview(raw))


def test_bytes_differ_from_str(enc: Encoder) -> None:
    assert enc(b"abc") != enc("abc")
    assert enc(b"") != enc("")
    assert enc(bytearray(b"abc")) != enc("abc")
    assert enc(b"abc") != enc(b"abd")
    assert enc(b"abc") != enc([97, 98, 99])


# --- exceptions and objects -------------------------------------------------------


def test_exceptions_by_class_and_message(enc: Encoder) -> None:
    assert enc(ValueError("boom")) == enc(ValueError("boom"))
    assert enc(ValueError("boom")) != enc(ValueError("bang"))
    assert enc(ValueError("boom")) != enc(TypeError("boom"))
    assert enc(ValueError("boom")) != enc("boom")


@dataclass
class Point:
    x: int
    label: str


@dataclass
class Box:
    corner: Point
    tags: list[str] = field(default_factory=list)


class Pydanticish:
    """Duck-typed stand-in for a pydantic model: only ``model_dump`` matters."""

    def __init__(self, **fields: Any) -> None:
        self._fields = fields

    def model_dump(self) -> dict[str, Any]:
        return dict(self._fields)


def test_dataclass_equals_dict_of_fields(enc: Encoder) -> None:
    assert enc(Point(1, "a")) == enc({"x": 1, "label": "a"})
    assert enc(Point(1, "a")) != enc(Point(2, "a"))
    assert enc(Box(Point(1, "a"), ["t"])) == enc({"corner": {"x": 1, "label": "a"}, "tags": ["t"]})


def test_model_dump_equals_dict_of_fields(enc: Encoder) -> None:
    assert enc(Pydanticish(a=1, b=[1, 2])) == enc({"a": 1, "b": [1, 2]})
    assert enc(Pydanticish(a=1)) != enc(Pydanticish(a=2))


class Plain:
    pass


class SameReprA:
    def __repr__(self) -> str:
        return "same"


class SameReprB:
    def __repr__(self) -> str:
        return "same"


class Labelled:
    def __init__(self, label: str) -> None:
        self.label = label

    def __repr__(self) -> str:
        return f"Labelled({self.label})"


class BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr exploded")


def test_default_repr_is_stable_across_instances(enc: Encoder) -> None:
    first, second = Plain(), Plain()
    assert id(first) != id(second)
    assert enc(first) == enc(second)
    assert enc([first]) == enc([second])


def test_object_repr_and_type_matter(enc: Encoder) -> None:
    assert enc(Labelled("a")) != enc(Labelled("b"))
    assert enc(SameReprA()) != enc(SameReprB())
    assert enc(Plain()) != enc(SameReprA())


def test_raising_repr_still_hashes(enc: Encoder) -> None:
    first = enc(BadRepr())
    assert _in_range(first)
    assert enc(BadRepr()) == first


# --- cycles and sharing -----------------------------------------------------------


def _self_list() -> list[Any]:
    loop: list[Any] = [1]
    loop.append(loop)
    return loop


def _self_dict() -> dict[str, Any]:
    loop: dict[str, Any] = {"a": 1}
    loop["self"] = loop
    return loop


def _mutual() -> list[Any]:
    left: list[Any] = ["left"]
    right: list[Any] = ["right", left]
    left.append(right)
    return left


def _fan_out() -> dict[str, Any]:
    # Two self-references per level: unrolling instead of marking would be exponential.
    loop: dict[str, Any] = {}
    loop["a"] = loop
    loop["b"] = [loop, loop]
    return loop


def _through_tuple() -> tuple[Any, ...]:
    inner: list[Any] = []
    outer = (inner, "t")
    inner.append(outer)
    return outer


@pytest.mark.parametrize("build", [_self_list, _self_dict, _mutual, _through_tuple, _fan_out])
def test_cycles_hash_deterministically(enc: Encoder, build: Callable[[], Any]) -> None:
    value = build()
    first = enc(value)
    assert _in_range(first)
    assert enc(value) == first
    # A separately built cycle of the same shape encodes the same (no addresses involved).
    assert enc(build()) == first


def test_cycle_differs_from_finite_unrolling(enc: Encoder) -> None:
    loop = _self_list()
    assert enc(loop) != enc([1, []])
    assert enc(loop) != enc([1, [1, []]])


def test_cycle_is_cut_where_the_container_recurs(enc: Encoder) -> None:
    # With a marker at the first recurrence, a period-2 cycle encodes as [1, [1, marker]] and a
    # period-1 cycle as [1, marker]; unrolling down to the depth limit would make them equal.
    period_one = _self_list()
    head: list[Any] = [1]
    period_two = [1, head]
    head.append(period_two)
    assert enc(period_one) != enc(period_two)


def test_cycle_contents_matter(enc: Encoder) -> None:
    one: list[Any] = [1]
    one.append(one)
    two: list[Any] = [2]
    two.append(two)
    assert enc(one) != enc(two)


def test_shared_reference_is_not_a_cycle(enc: Encoder) -> None:
    shared = ["leaf", {"k": 1}]
    twice = [shared, shared]
    fresh = [["leaf", {"k": 1}], ["leaf", {"k": 1}]]
    assert enc(twice) == enc(fresh)
    shared_dict = {"k": [1, 2]}
    assert enc({"a": shared_dict, "b": shared_dict}) == enc(
        {"a": {"k": [1, 2]}, "b": {"k": [1, 2]}}
    )


def test_shared_reference_differs_from_real_cycle(enc: Encoder) -> None:
    inner: list[Any] = []
    shared = [inner, inner]
    cyclic: list[Any] = [[]]
    cyclic.append(cyclic)
    assert enc(shared) == enc([[], []])
    assert enc(shared) != enc(cyclic)


# --- depth ----------------------------------------------------------------------


@pytest.mark.parametrize("nest", [_nest_lists, _nest_dicts])
def test_very_deep_nesting_is_safe_and_fast(enc: Encoder, nest: Callable[[int, Any], Any]) -> None:
    value = nest(DEEP, "leaf")
    start = time.perf_counter()
    first = enc(value)
    second = enc(value)
    elapsed = time.perf_counter() - start
    assert _in_range(first)
    assert first == second
    assert elapsed < 5.0


def test_very_deep_mixed_nesting(enc: Encoder) -> None:
    value: Any = 0
    for i in range(DEEP):
        value = [value] if i % 3 == 0 else ({"k": value} if i % 3 == 1 else (value,))
    assert _in_range(enc(value))


@pytest.mark.parametrize("nest", [_nest_lists, _nest_dicts])
def test_differences_below_depth_limit_are_invisible(
    enc: Encoder, nest: Callable[[int, Any], Any]
) -> None:
    assert enc(nest(300, 1)) == enc(nest(300, 2))
    assert enc(nest(1000, "a")) == enc(nest(1000, "b"))


@pytest.mark.parametrize("nest", [_nest_lists, _nest_dicts])
def test_differences_above_depth_limit_are_visible(
    enc: Encoder, nest: Callable[[int, Any], Any]
) -> None:
    assert enc(nest(240, 1)) != enc(nest(240, 2))
    assert enc(nest(10, 1)) != enc(nest(11, 1))


def test_huge_string(enc: Encoder) -> None:
    big = "x" * 10_000_000
    changed = big[:-1] + "y"
    assert _in_range(enc(big))
    assert enc(big) != enc(changed)
    assert enc(big) == enc("x" * 10_000_000)


# --- hash_call specifics ----------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [None, {}, {"a": 1}, [1, 2], "text", 0, -(2**100), math.nan, b"\x00", Plain()],
)
def test_result_is_unsigned_64_bit_int(args: Any) -> None:
    assert _in_range(hash_call("tool", args))
    result_hash, _ = hash_outcome("tool", {}, result=args)
    assert _in_range(result_hash)


def test_tool_name_is_part_of_the_call_hash() -> None:
    args = {"path": "/tmp/x"}
    assert hash_call("read", args) != hash_call("write", args)
    assert hash_call("read", args) == hash_call("read", dict(args))
    assert hash_call("read", {}) != hash_call("reada", {})
    assert hash_call("a", "bc") != hash_call("ab", "c")


@pytest.mark.parametrize("bad", [None, 5, b"read", ["read"], 1.5])
def test_tool_name_must_be_str(bad: Any) -> None:
    with pytest.raises(TypeError, match="tool_name"):
        hash_call(bad, {})
    with pytest.raises(TypeError, match="tool_name"):
        hash_outcome(bad, {}, result="ok")
    with pytest.raises(TypeError, match="tool_name"):
        hash_outcome(bad, {}, error="failed")


# --- update_plan shape ------------------------------------------------------------


def _plan(*entries: Any, explanation: Any = "why") -> dict[str, Any]:
    return {"plan": list(entries), "explanation": explanation}


BASE_PLAN = _plan(
    {"step": "read the file", "status": "completed"},
    {"step": "edit it", "status": "in_progress"},
)


def _up(args: Any) -> int:
    return hash_call("update_plan", args)


def test_update_plan_rewording_is_same_call() -> None:
    reworded = _plan(
        {"step": "open the file", "status": "completed"},
        {"step": "patch it", "status": "in_progress"},
        explanation="a different reason",
    )
    assert _up(reworded) == _up(BASE_PLAN)


def test_update_plan_extra_fields_ignored() -> None:
    extra = copy.deepcopy(BASE_PLAN)
    extra["plan"][0]["note"] = "scratch"
    extra["other"] = 1
    assert _up(extra) == _up(BASE_PLAN)


def test_update_plan_status_change_is_new_call() -> None:
    changed = copy.deepcopy(BASE_PLAN)
    changed["plan"][1]["status"] = "completed"
    assert _up(changed) != _up(BASE_PLAN)


def test_update_plan_added_entry_is_new_call() -> None:
    grown = copy.deepcopy(BASE_PLAN)
    grown["plan"].append({"step": "test it", "status": "pending"})
    assert _up(grown) != _up(BASE_PLAN)


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_update_plan_blanking_a_step_is_new_call(blank: str) -> None:
    blanked = copy.deepcopy(BASE_PLAN)
    blanked["plan"][0]["step"] = blank
    assert _up(blanked) != _up(BASE_PLAN)


def test_update_plan_blanking_explanation_is_new_call() -> None:
    assert _up(_plan(*BASE_PLAN["plan"], explanation="  ")) != _up(BASE_PLAN)
    # Blank, missing, None and non-string explanations are all "no explanation".
    without = {"plan": BASE_PLAN["plan"]}
    for other in ("", " ", None, 5):
        assert _up(_plan(*BASE_PLAN["plan"], explanation=other)) == _up(without)


def test_update_plan_non_string_step_and_status() -> None:
    assert _up(_plan({"step": 5, "status": 7})) == _up(_plan({}))
    assert _up(_plan({"step": "   ", "status": None})) == _up(_plan({}))
    assert _up(_plan({"step": "x"})) != _up(_plan({}))
    assert _up(_plan({"status": "pending"})) != _up(_plan({}))


def test_update_plan_non_mapping_entries() -> None:
    assert _up(_plan("just text")) == _up(_plan({}))
    assert _up(_plan(["a", "b"], 3)) == _up(_plan({}, {}))
    assert _up(_plan("x")) != _up(_plan())


def test_update_plan_missing_or_non_list_plan_is_empty() -> None:
    empty = _up({"plan": []})
    assert _up({}) == empty
    assert _up({"plan": "not a list"}) == empty
    assert _up({"plan": None}) == empty
    assert _up({"plan": {"step": "x"}}) == empty
    assert _up(None) == empty
    assert _up("not a mapping") == empty
    assert _up({"plan": [{}]}) != empty


def test_update_plan_shape_is_update_plan_only() -> None:
    reworded = copy.deepcopy(BASE_PLAN)
    reworded["plan"][0]["step"] = "something else"
    assert hash_call("other_tool", reworded) != hash_call("other_tool", BASE_PLAN)


# --- hostile values ---------------------------------------------------------------


class RaisingModelDump:
    def model_dump(self) -> dict[str, Any]:
        raise RuntimeError("no dump")


@dataclass
class Node:
    value: int
    next: Any = None


def _self_node() -> Node:
    node = Node(1)
    node.next = node
    return node


def _deep_nodes() -> Node:
    node = Node(0)
    for i in range(1, 20_000):
        node = Node(i, node)
    return node


def _hostile_values() -> list[Any]:
    return [
        BadRepr(),
        [BadRepr(), {"k": BadRepr()}],
        RaisingModelDump(),
        _self_node(),
        _deep_nodes(),
        Point,
        Plain,
        print,
        lambda: None,
        sys,
        object(),
        NotImplemented,
        Ellipsis,
        range(5),
        iter([1, 2]),
        complex(1, 2),
        {frozenset({1}): {1, 2}},
        {None: 1, 2.5: 2, (1, 2): 3, b"k": 4},
        {"\ud800": "\udfff"},
        ValueError(),
        memoryview(b"abc")[1:],
    ]


@pytest.mark.parametrize("index", range(len(_hostile_values())))
def test_hostile_values_never_raise(index: int) -> None:
    value = _hostile_values()[index]
    assert _in_range(hash_call("tool", value))
    assert _in_range(hash_call("update_plan", value))
    result_hash, _ = hash_outcome("tool", value, result=value)
    assert _in_range(result_hash)
    error_hash, _ = hash_outcome("tool", value, error=value)
    assert _in_range(error_hash)


# --- property tests ---------------------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()
    | st.binary()
)
HASHABLE_SCALARS = st.none() | st.booleans() | st.integers() | st.text() | st.binary()
KEYS = st.text() | st.integers()

NESTED = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=5)
        | st.lists(children, max_size=5).map(tuple)
        | st.dictionaries(KEYS, children, max_size=5)
        | st.sets(HASHABLE_SCALARS, max_size=5)
        | st.frozensets(HASHABLE_SCALARS, max_size=5)
    ),
    max_leaves=30,
)


def _shuffled(value: Any, rnd: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: _shuffled(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rnd) for v in value]
    if isinstance(value, tuple):
        return tuple(_shuffled(v, rnd) for v in value)
    return value


def _swap_containers(value: Any) -> Any:
    """An equal-by-contract twin: lists <-> tuples, sets <-> frozensets, ints as floats."""
    if isinstance(value, dict):
        return {k: _swap_containers(v) for k, v in value.items()}
    if isinstance(value, list):
        return tuple(_swap_containers(v) for v in value)
    if isinstance(value, tuple):
        return [_swap_containers(v) for v in value]
    if isinstance(value, frozenset):
        return set(value)
    if isinstance(value, set):
        return frozenset(value)
    if type(value) is int and abs(value) < 2**53:
        return float(value)
    return value


@given(NESTED)
def test_property_never_raises(value: Any) -> None:
    assert _in_range(hash_call("tool", value))
    assert _in_range(hash_call("update_plan", value))
    result_hash, _ = hash_outcome("tool", {}, result=value)
    assert _in_range(result_hash)
    # error=None means "no error", so only other values make an error outcome.
    error_hash, _ = hash_outcome("tool", {}, error=value)
    assert error_hash is None if value is None else _in_range(error_hash)


@given(st.dictionaries(KEYS, NESTED, max_size=8), st.randoms(use_true_random=False))
def test_property_key_order_irrelevant(value: dict[Any, Any], rnd: random.Random) -> None:
    assert hash_call("tool", _shuffled(value, rnd)) == hash_call("tool", value)


@given(NESTED)
def test_property_equal_values_hash_equal(value: Any) -> None:
    assert hash_call("tool", copy.deepcopy(value)) == hash_call("tool", value)
    assert hash_call("tool", _swap_containers(value)) == hash_call("tool", value)


# --- cross-process determinism ----------------------------------------------------

PROBE_ARGS = (
    "{'words': {'alpha', 'beta', 'gamma', 'delta', 'epsilon', 'zeta'},"
    " 'frozen': frozenset({'x', 'y', 'z', 'w'}),"
    " 'nested': {'k2': [1, 2.5, None, True], 'k1': ('t', b'\\x00\\xff')},"
    " 'nan': float('nan'), 'big': 2**200, 'text': 'caf\\u00e9 \\ud800'}"
)


def test_determinism_across_processes(twin: str) -> None:
    expected = hash_call("probe", eval(PROBE_ARGS))
    code = f"from loopcore import hash_call; print(hash_call('probe', {PROBE_ARGS}))"
    for seed in ("0", "1", "987654"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        if twin == "python":
            env["LOOPCORE_NO_EXTENSIONS"] = "1"
        proc = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert int(proc.stdout.strip()) == expected

"""The compiled fingerprint twin against the reference, byte for byte (SPEC §2).

``_fingerprint_py`` is the reference: for every value the compiled twin must
return the same ``encode()`` bytes and the same ``fingerprint()``, or hashes
recorded by one twin would not match the other's (or another machine's). Both
modules are imported directly; the conftest ``twin`` fixture only runs each
test once per leg.
"""

from __future__ import annotations

import dataclasses
import enum
import gc
import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from loopcore import LoopDetector
from loopcore import _fingerprint_py as py

from .conftest import TWINS

# The conftest's rule: the compiled twin is compared whenever it is built, and must be
# when LOOPCORE_EXPECT_EXTENSIONS=1 (then a missing module fails the import here). An
# install without it (LOOPCORE_NO_EXTENSIONS, or PyPy from the sdist) has nothing to compare.
if "cython" in TWINS:
    from loopcore import _fingerprint_c as c
else:
    c = py
pytestmark = pytest.mark.skipif(
    "cython" not in TWINS, reason="the compiled twin is not built in this install"
)

DOMAINS = (b"", b"loopcore:call\x00", b"\xff" * 40)


def assert_same(value: Any) -> None:
    expected = py.encode(value)
    assert c.encode(value) == expected
    for domain in DOMAINS:
        assert c.fingerprint(value, domain) == py.fingerprint(value, domain)
    # The nonce-normalising mode of outcome hashes (SPEC §8.5) agrees as well.
    assert c.encode(value, nonces=True) == py.encode(value, nonces=True)
    assert c.fingerprint(value, DOMAINS[1], nonces=True) == py.fingerprint(
        value, DOMAINS[1], nonces=True
    )


# ---- generated values -------------------------------------------------------

BIG_INTS = st.integers(min_value=-(2**200), max_value=2**200) | st.sampled_from(
    [2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, -(2**64), 2**64 - 1]
)
FLOATS = (
    st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-(2**70), max_value=2**70).map(float)
    | st.sampled_from([-0.0, 1e300, -1e300, 2.0**63, -(2.0**63), 2.0**64, 2.0**53 + 2, 0.1])
)
# One alphabet per storage kind of str (ASCII, Latin-1, BMP, astral), plus
# lone surrogates, which only "surrogatepass" can encode.
TEXT = (
    st.text(st.characters(max_codepoint=0x7F))
    | st.text(st.characters(max_codepoint=0xFF))
    | st.text(st.characters(max_codepoint=0xFFFF, codec=None))
    | st.text(st.characters(codec=None) | st.characters(categories=["Cs"]))
)
BINARY = st.binary() | st.binary().map(bytearray)
SCALARS = st.none() | st.booleans() | st.integers() | BIG_INTS | FLOATS | TEXT | BINARY
HASHABLE = st.none() | st.booleans() | st.integers() | BIG_INTS | FLOATS | TEXT | st.binary()
KEYS = HASHABLE | st.tuples(HASHABLE, HASHABLE)

NESTED = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=6)
        | st.lists(children, max_size=6).map(tuple)
        | st.dictionaries(KEYS, children, max_size=6)
        | st.sets(HASHABLE, max_size=6)
        | st.frozensets(HASHABLE | st.tuples(HASHABLE), max_size=6)
    ),
    max_leaves=40,
)


@given(NESTED)
def test_generated_values_encode_alike(value: Any) -> None:
    assert_same(value)


@given(st.lists(NESTED, min_size=1, max_size=4))
def test_generated_values_shared_and_wrapped(values: list[Any]) -> None:
    # The same objects referenced twice, and wrapped in a dataclass-free dict.
    assert_same([values, values, {"v": values, "w": tuple(values)}])


# ---- cycles, sharing, depth --------------------------------------------------


def test_cycles() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    assert_same(loop)
    assert c.encode(loop).endswith(b"C")

    mapping: dict[str, Any] = {"a": 1}
    mapping["self"] = mapping
    assert_same(mapping)

    inner: list[Any] = []
    outer = {"inner": inner}
    inner.append(outer)
    assert_same([outer, inner])

    through_tuple: list[Any] = []
    through_tuple.append((through_tuple, 1))
    assert_same(through_tuple)


def test_shared_object_is_encoded_in_full_each_time() -> None:
    shared = {"k": [1, 2, {"x": 3}]}
    value = [shared, shared, {"again": shared}]
    assert_same(value)
    assert b"C" not in c.encode(value)[:1]
    assert c.encode(value) == c.encode(
        [{"k": [1, 2, {"x": 3}]}, {"k": [1, 2, {"x": 3}]}, {"again": {"k": [1, 2, {"x": 3}]}}]
    )


def _nest_lists(levels: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(levels):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


def _nest_dicts(levels: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(levels):
        child: dict[str, Any] = {}
        node["k"] = child
        node = child
    return root


def _nest_tuples(levels: int) -> tuple[Any, ...]:
    value: tuple[Any, ...] = ()
    for _ in range(levels):
        value = (value, 1)
    return value


@pytest.mark.parametrize("nest", [_nest_lists, _nest_dicts, _nest_tuples])
@pytest.mark.parametrize("levels", [254, 255, 256, 257, 300, 100_000])
def test_deep_nesting(nest: Any, levels: int) -> None:
    value = nest(levels)
    assert_same(value)
    assert (b"D" in c.encode(value)) == (levels >= 256)


@pytest.mark.parametrize("levels", [252, 253, 254, 255, 256])
def test_call_hash_depth_limit_through_the_c_api(levels: int) -> None:
    # The compiled store hashes (tool, args) with enc_list_header + enc_value
    # instead of building the tuple: args must still hit the depth limit one
    # level down, where the reference (which encodes the tuple) puts it.
    args = {"a": _nest_lists(levels)}
    detector = LoopDetector()
    detector.record_call("read", args)
    expected = xxhash.xxh3_64_intdigest(b"loopcore:call\x00" + py.encode(("read", args)))
    assert detector.history()[-1].args_hash == expected


class _ItemsRaise(Mapping[str, Any]):
    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def items(self) -> Any:
        raise RuntimeError("no items")


class _Model:
    def __init__(self, **fields: Any) -> None:
        self.fields = fields

    def model_dump(self) -> Any:
        return dict(self.fields)

    def __repr__(self) -> str:
        return "_Model()"


@pytest.mark.parametrize(
    "leaf", [_ItemsRaise(), _Model(a=1), [1], {"a": 1}, {1, 2}], ids=lambda v: type(v).__name__
)
def test_container_at_the_depth_limit(leaf: Any) -> None:
    # The reference lists a container's children before the depth check, so
    # one whose children cannot be listed is a leaf even at the limit.
    for levels in (255, 256, 257):
        value = _nest_lists(levels)
        node = value
        while node:
            node = node[0]
        node.append(leaf)
        assert_same(value)


# ---- unusual types ------------------------------------------------------------


@dataclasses.dataclass
class _Point:
    y: int
    x: Any = None
    tags: list[str] = dataclasses.field(default_factory=list)


class _BadModelDump:
    def model_dump(self) -> Any:
        raise ValueError("cannot dump")

    def __repr__(self) -> str:
        return "<_BadModelDump>"


class _NonMappingDump:
    def model_dump(self) -> Any:
        return [1, 2]

    def __repr__(self) -> str:
        return "<_NonMappingDump>"


class _AddressRepr:
    def __repr__(self) -> str:
        return "<thing at 0x7f3a5c2b1d90 and at 0xDEADbeef>"


class _RaisingRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


class _NonStrRepr:
    def __repr__(self) -> Any:
        return 42


class _BadStrError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message")


class _Color(enum.IntEnum):
    RED = 1
    BIG = 2**70


class _Str(str):
    def __str__(self) -> str:
        return "overridden"

    def encode(self, *args: Any, **kwargs: Any) -> bytes:
        return b"overridden"


class _Int(int):
    def __index__(self) -> int:
        return 0

    def bit_length(self) -> int:
        return 0


class _Float(float):
    pass


class _FloatOverride(float):
    def __float__(self) -> float:
        return 2.5


class _Bytes(bytes):
    pass


class _List(list):  # type: ignore[type-arg]
    def __iter__(self) -> Iterator[Any]:
        return iter(["iterated"])


class _Dict(dict):  # type: ignore[type-arg]
    pass


def _released_view() -> memoryview:
    view = memoryview(b"gone")
    view.release()
    return view


def _point_cycle() -> _Point:
    point = _Point(1)
    point.x = point
    return point


UNUSUAL: list[Any] = [
    _Point(2, "a", ["t"]),
    [_Point(1), {"p": _Point(3, _Point(4))}],
    _point_cycle(),
    _Model(b=[1, {"c": None}], a="x"),
    _BadModelDump(),
    _NonMappingDump(),
    ValueError("boom"),
    KeyError("k"),
    _BadStrError("x"),
    _AddressRepr(),
    _RaisingRepr(),
    _NonStrRepr(),
    _ItemsRaise(),
    _Dict(b=2, a=1),
    _List([1, 2]),
    memoryview(b"view"),
    memoryview(bytearray(b"\x00\x01")).cast("B"),
    _released_view(),
    _Str("sub\u00e9"),
    _Int(5),
    _Int(2**80),
    _Color.RED,
    _Color.BIG,
    _Float(1.5),
    _Float(3.0),
    _Float(float("nan")),
    _FloatOverride(1.0),
    _Bytes(b"raw"),
    complex(1, 2),
    range(3),
    type,
    _Point,
    Ellipsis,
]


@pytest.mark.parametrize("value", UNUSUAL, ids=[type(v).__name__ for v in UNUSUAL])
def test_unusual_types(value: Any) -> None:
    assert_same(value)
    assert_same({"wrapped": [value, (value,)]})


def test_long_strings() -> None:
    for char in ("a", "\u00e9", "\u20ac", "\U0001f600", "\ud800"):
        text = (char + "x") * 10_000
        assert len(text) == 20_000
        assert_same(text)
        assert_same({text: text})


def test_many_entries_use_the_full_sort() -> None:
    keys: list[Any] = [*range(-50, 50), *(f"k{i}" for i in range(100)), 2**70, 1.5, b"b", None]
    assert_same({key: [key, {"n": key}] for key in keys})
    assert_same({"outer": {key: {key: key} for key in keys}})
    assert_same(set(keys[:-1]))
    assert_same(frozenset(keys))
    assert_same({str(i): list(range(i)) for i in range(200)})


@pytest.mark.parametrize(
    "keys",
    [
        # Lengths are little-endian in the encoding: 256 ("\x00\x01...") sorts
        # before 1 ("\x01\x00..."), and 257 before 2.
        ["a", "b" * 256, "c" * 255, "d" * 257, "e" * 2, "f" * 512, "g" * 65536],
        ["path", "offset", "limit", "p", "pa", "limiu", "limis"],
        ["same", "samf", "samd", "sam", "samee"],
        ["x\u00e9", "xy", "x"],  # one key not ASCII: the general sort
    ],
)
def test_small_dicts_order_str_keys_as_encoded(keys: list[str]) -> None:
    for rotation in range(len(keys)):
        ordered = keys[rotation:] + keys[:rotation]
        assert_same({key: index for index, key in enumerate(ordered)})
        assert_same({key: [key, {key: None}] for key in reversed(ordered)})


def test_item_filter_is_the_reference_path() -> None:
    def drop_ids(mapping: Mapping[Any, Any]) -> Any:
        return ((k, v) for k, v in mapping.items() if k != "id")

    value = {"id": 7, "text": "hi", "nested": {"id": 8, "x": [1]}}
    assert c.encode(value, drop_ids) == py.encode(value, drop_ids)


def test_domain_other_than_bytes() -> None:
    assert c.fingerprint([1], bytearray(b"dom")) == py.fingerprint([1], bytearray(b"dom"))
    with pytest.raises(TypeError):
        py.fingerprint([1], "dom")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        c.fingerprint([1], "dom")


# ---- snapshots, references, hostile code --------------------------------------


class _MutatesParent:
    def __init__(self, parent: Any) -> None:
        self.parent = parent

    def __repr__(self) -> str:
        # Same size, other contents, and the last references to the payloads
        # gone: reading the live container would encode "late" (or freed memory).
        if isinstance(self.parent, dict):
            for key in self.parent:
                self.parent[key] = "late"
        else:
            self.parent[:] = ["late"] * len(self.parent)
        return "<mutator>"


class _Payload:
    """Only the container under mutation refers to it: a use-after-free canary."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"<payload {self.text}>"


def test_repr_mutating_the_parent_dict_does_not_change_the_encoding() -> None:
    def build() -> dict[str, Any]:
        parent: dict[str, Any] = {"a": 1, "z": _Payload("z")}
        parent["m"] = _MutatesParent(parent)
        parent["q"] = _Payload("q")
        return parent

    expected = py.encode(build())
    assert c.encode(build()) == expected


def test_repr_mutating_the_parent_list_does_not_change_the_encoding() -> None:
    def build() -> list[Any]:
        parent: list[Any] = [1]
        parent.append(_MutatesParent(parent))
        parent.append(_Payload("after"))
        return parent

    assert c.encode(build()) == py.encode(build())


class _MutatingModel:
    def __init__(self, parent: dict[str, Any]) -> None:
        self.parent = parent

    def model_dump(self) -> dict[str, Any]:
        self.parent.clear()
        return {"dumped": _Payload("d")}


def test_model_dump_mutating_the_parent() -> None:
    def build() -> dict[str, Any]:
        parent: dict[str, Any] = {"b": _Payload("b")}
        parent["a"] = _MutatingModel(parent)
        parent["c"] = _Payload("c")
        return parent

    assert c.encode(build()) == py.encode(build())


class _Escape(BaseException):
    pass


class _ReprEscapes:
    def __repr__(self) -> str:
        raise _Escape


def test_references_are_released_on_success_and_on_error() -> None:
    held = _Payload("held")
    key = "a-key-nobody-else-has"
    value = {key: [held, (held, {"x": held})], "n": {held.text: [held] * 40}}
    # The escape leaves open containers behind at several levels: their
    # snapshots must be released too.
    failing = [{key: held}, [held] * 50, {key: [held, (held, _ReprEscapes())]}]
    for module in (py, c):
        module.encode(value)
        with pytest.raises(_Escape):
            module.encode(failing)
    gc.collect()
    watched = (held, key, *failing)
    before = [sys.getrefcount(x) for x in watched]
    for _ in range(100):
        c.encode(value)
        with pytest.raises(_Escape):
            c.encode(failing)
    gc.collect()
    assert [sys.getrefcount(x) for x in watched] == before


class _Reentrant:
    def __repr__(self) -> str:
        return c.encode({"inner": [1, 2]}).hex()


def test_reentrant_encode_from_repr() -> None:
    value = {"a": _Reentrant(), "b": [_Reentrant(), {"c": 1}]}
    # The reference calls the same (compiled) encode from the repr.
    assert c.encode(value) == py.encode(value)


class _FakeStr:
    """Claims to be a str: isinstance() says yes, but it is not one."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str

    def __repr__(self) -> str:
        return "<fake str>"


class _FloatRaises(float):
    def __float__(self) -> float:
        raise ValueError("no float")


@pytest.mark.parametrize("value", [_FakeStr(), _FloatRaises(2.5)], ids=["fake-str", "float-raises"])
def test_values_that_lie_or_fail_still_encode_alike(value: Any) -> None:
    # A __class__ that claims str, a __float__ that raises: neither twin may
    # raise, and both encode them the same way.
    assert_same(value)
    assert_same([value, {"k": value}])
    assert c.encode([value]) == b"l" + (1).to_bytes(8, "little") + c.encode(value)

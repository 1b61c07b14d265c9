"""The encoders' nonce-normalising mode (SPEC §8.5): which strings it touches, on both twins.

``nonces=True`` is how every outcome hash is taken: str values at any depth are
normalised, mapping keys (and everything inside a key) never are, and a text
without a wrapper encodes exactly as it does without the mode.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore import _fingerprint_py
from loopcore._nonce import Verbatim

from .conftest import TWINS

ENCODERS: list[Any] = [_fingerprint_py]
if "cython" in TWINS:
    from loopcore import _fingerprint_c

    ENCODERS.append(_fingerprint_c)

N1, N2, ZERO = "9f3a0c1d2b4e5f60", "0123456789abcdef", "0" * 16


def wrap(nonce: str, body: str = "page") -> str:
    return (
        f'<<<EXTERNAL_UNTRUSTED_CONTENT id="{nonce}">>>{body}'
        f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{nonce}">>>'
    )


@dataclasses.dataclass
class Box:
    inner: Any


class Dumps:
    def __init__(self, fields: dict[str, Any]) -> None:
        self.fields = fields

    def model_dump(self) -> dict[str, Any]:
        return self.fields


def _each(value_of: Any) -> list[tuple[bytes, bytes]]:
    """(encoding with N1, encoding with N2) in nonces mode, per encoder."""
    return [
        (e.encode(value_of(N1), nonces=True), e.encode(value_of(N2), nonces=True)) for e in ENCODERS
    ]


VALUES = {
    "str": lambda n: wrap(n),
    "list": lambda n: [1, [wrap(n)]],
    "dict value": lambda n: {"k": wrap(n)},
    "many entries": lambda n: {f"k{i}": wrap(n) for i in range(40)},
    "set element": lambda n: {wrap(n), "x"},
    "dataclass": lambda n: Box(wrap(n)),
    "exception": lambda n: ValueError(wrap(n)),
    "str subclass": lambda n: type("S", (str,), {})(wrap(n)),
    "long": lambda n: "x" * (1 << 20) + wrap(n) + "y" * 70_000,
    "non-ascii": lambda n: "é" * 10 + wrap(n, "ü"),
}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_values_are_normalised(name: str) -> None:
    pairs = _each(VALUES[name])
    for first, second in pairs:
        assert first == second
    assert len({pair[0] for pair in pairs}) == 1  # the twins agree


KEYS = {
    "str key": lambda n: {wrap(n): 1},
    "tuple key": lambda n: {(1, wrap(n)): 1},
    "frozenset key": lambda n: {frozenset({wrap(n)}): 1},
    "model_dump key": lambda n: Dumps({wrap(n): 1}),
    "key among many": lambda n: {**{f"k{i}": i for i in range(40)}, wrap(n): 1},
    "non-ascii key": lambda n: {wrap(n, "ü"): 1},
    "str subclass key": lambda n: {type("K", (str,), {})(wrap(n)): 1},
    "mapping proxy key": lambda n: types.MappingProxyType({wrap(n): [wrap(n)]}),
}


@pytest.mark.parametrize("name", sorted(KEYS))
def test_keys_are_never_normalised(name: str) -> None:
    pairs = _each(KEYS[name])
    for first, second in pairs:
        assert first != second
    assert len({pair[0] for pair in pairs}) == 1


def test_the_mode_is_off_by_default() -> None:
    for encoder in ENCODERS:
        assert encoder.encode(wrap(N1)) != encoder.encode(wrap(N2))
        assert encoder.fingerprint(wrap(N1)) != encoder.fingerprint(wrap(N2))
        assert encoder.fingerprint(wrap(N1), nonces=True) == encoder.fingerprint(wrap(ZERO))


def test_verbatim_is_left_alone() -> None:
    for encoder in ENCODERS:
        assert encoder.encode(Verbatim(wrap(N1)), nonces=True) == encoder.encode(wrap(N1))
        assert encoder.encode(Verbatim("x"), nonces=True) == encoder.encode("x")


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=200),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(JSONISH)
def test_text_without_a_wrapper_encodes_as_without_the_mode(value: Any) -> None:
    for encoder in ENCODERS:
        assert encoder.encode(value, nonces=True) == encoder.encode(value)


@given(st.lists(st.sampled_from([wrap(N1), wrap(N2), wrap(ZERO), "<<<", "x"]), max_size=4))
def test_sets_sort_the_normalised_elements(elements: list[str]) -> None:
    encodings = {encoder.encode(set(elements), nonces=True) for encoder in ENCODERS}
    assert len(encodings) == 1

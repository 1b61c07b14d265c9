"""The canonical byte format itself, which every twin must produce byte for byte.

Expected bytes are built here from the format's definition (tag byte, 8-byte
little-endian lengths and counts), not copied from an implementation's output:
hashes must stay equal across twins, machines and releases.
"""

from __future__ import annotations

import array
import struct
from typing import Any

import numpy as np
import pytest

from loopcore import _fingerprint

# Runs on both twins (see conftest).
pytestmark = pytest.mark.usefixtures("twin")


def u64(n: int) -> bytes:
    return struct.pack("<Q", n)


def i64(n: int) -> bytes:
    return b"i" + struct.pack("<q", n)


def s(text: str) -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    return b"s" + u64(len(data)) + data


def seq(*items: bytes) -> bytes:
    return b"l" + u64(len(items)) + b"".join(items)


def mapping(*entries: tuple[bytes, bytes]) -> bytes:
    return b"d" + u64(len(entries)) + b"".join(k + v for k, v in sorted(entries))


CASES: list[tuple[Any, bytes]] = [
    (None, b"N"),
    (True, b"T"),
    (False, b"F"),
    (0, i64(0)),
    (-1, i64(-1)),
    (2**63 - 1, i64(2**63 - 1)),
    (-(2**63), i64(-(2**63))),
    (2**63, b"I" + u64(9) + (2**63).to_bytes(9, "little", signed=True)),
    (-(2**70), b"I" + u64(9) + (-(2**70)).to_bytes(9, "little", signed=True)),
    (2.0, i64(2)),
    (-0.0, i64(0)),
    (0.5, b"f" + struct.pack("<d", 0.5)),
    (float("nan"), b"n"),
    (float("inf"), b"+"),
    (float("-inf"), b"-"),
    ("", s("")),
    ("h\u00e9", b"s" + u64(3) + b"h\xc3\xa9"),
    ("\ud800", b"s" + u64(3) + b"\xed\xa0\x80"),
    (b"\x00\xff", b"b" + u64(2) + b"\x00\xff"),
    (bytearray(b"ab"), b"b" + u64(2) + b"ab"),
    ([], seq()),
    ((1, "a"), seq(i64(1), s("a"))),
    ({3, 1, 2}, seq(i64(1), i64(2), i64(3))),
    ({"b": 1, "a": [None]}, mapping((s("a"), seq(b"N")), (s("b"), i64(1)))),
    ({1: "x", "1": "y"}, mapping((i64(1), s("x")), (s("1"), s("y")))),
    (ValueError("boom"), b"x" + s("builtins.ValueError") + s("boom")),
    # Buffers and numpy arrays (SPEC §11): "a", element type, shape, raw bytes.
    (array.array("b", [1, -1]), b"a" + s("b") + seq(i64(2)) + b"b" + u64(2) + b"\x01\xff"),
    (
        np.arange(6, dtype="<u2").reshape(2, 3),
        b"a" + s("<u2") + seq(i64(2), i64(3)) + b"b" + u64(12) + struct.pack("<6H", *range(6)),
    ),
    (np.int8(-2), b"a" + s("|i1") + seq() + b"b" + u64(1) + b"\xfe"),
]


@pytest.mark.parametrize(("value", "expected"), CASES, ids=[repr(v)[:30] for v, _ in CASES])
def test_canonical_bytes(value: Any, expected: bytes) -> None:
    assert _fingerprint.encode(value) == expected


def test_cycle_and_depth_markers() -> None:
    loop: list[Any] = []
    loop.append(loop)
    assert _fingerprint.encode(loop) == seq(b"C")

    deep: list[Any] = []
    node = deep
    for _ in range(300):
        child: list[Any] = []
        node.append(child)
        node = child
    expected = b"D"
    for _ in range(256):  # depths 255 .. 0 are encoded, depth 256 is cut
        expected = seq(expected)
    assert _fingerprint.encode(deep) == expected


def test_fingerprint_is_xxh3_of_domain_and_encoding() -> None:
    import xxhash

    value = {"path": "/x", "n": [1, 2.5]}
    encoded = _fingerprint.encode(value)
    assert _fingerprint.fingerprint(value) == xxhash.xxh3_64_intdigest(encoded)
    assert _fingerprint.fingerprint(value, b"dom") == xxhash.xxh3_64_intdigest(b"dom" + encoded)

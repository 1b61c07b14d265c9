"""Buffers and numpy arrays: the ``a`` tag, on both twins byte for byte (SPEC §11).

An object other than bytes, bytearray and memoryview that exposes the buffer
protocol, or a numpy array or scalar, encodes as ``a`` + element type (str) +
shape (list of ints) + raw bytes in C order (``b``), so two different arrays
never collide through numpy's truncated repr. Expected bytes are built from
the format here.
"""

from __future__ import annotations

import array
import ctypes
import mmap
import struct
from typing import Any

import numpy as np
import pytest

from loopcore import _fingerprint_py, _outcome_py
from loopcore._twins import use_twin

from .conftest import TWINS

if "cython" in TWINS:
    from loopcore import _fingerprint_c, _outcome_c

    ENCODERS: tuple[Any, ...] = (_fingerprint_py, _fingerprint_c)
    OUTCOMES: tuple[Any, ...] = (_outcome_py, _outcome_c)
else:
    ENCODERS = (_fingerprint_py,)
    OUTCOMES = (_outcome_py,)


def u64(n: int) -> bytes:
    return struct.pack("<Q", n)


def s(text: str) -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    return b"s" + u64(len(data)) + data


def arr(fmt: str, shape: tuple[int, ...], data: bytes) -> bytes:
    dims = b"".join(b"i" + struct.pack("<q", n) for n in shape)
    return b"a" + s(fmt) + b"l" + u64(len(shape)) + dims + b"b" + u64(len(data)) + data


def encoding(value: Any) -> bytes:
    """The one encoding every twin gives ``value``, and each twin's fingerprint of it."""
    found = [encoder.encode(value) for encoder in ENCODERS]
    assert all(e == found[0] for e in found)
    prints = {encoder.fingerprint(value, b"dom") for encoder in ENCODERS}
    assert len(prints) == 1
    return found[0]


def fp(value: Any) -> int:
    prints = {encoder.fingerprint(value) for encoder in ENCODERS}
    assert len(prints) == 1
    return prints.pop()


# ---- the format ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (array.array("i", [1, -2]), arr("i", (2,), array.array("i", [1, -2]).tobytes())),
        (array.array("d", []), arr("d", (0,), b"")),
        (np.arange(3, dtype="<f8"), arr("<f8", (3,), struct.pack("<3d", 0, 1, 2))),
        (
            np.arange(6, dtype="<i2").reshape(2, 3),
            arr("<i2", (2, 3), struct.pack("<6h", *range(6))),
        ),
        (np.array(7, dtype="<i8"), arr("<i8", (), struct.pack("<q", 7))),
        (np.int64(7), arr("<i8", (), struct.pack("<q", 7))),
        (np.float32(1.5), arr("<f4", (), struct.pack("<f", 1.5))),
        (np.bool_(True), arr("|b1", (), b"\x01")),
        (np.zeros(2, dtype=">i4"), arr(">i4", (2,), bytes(8))),
        (
            np.array(["2020-01-01"], dtype="M8[D]"),
            arr("<M8[D]", (1,), struct.pack("<q", 18262)),
        ),
        (
            np.zeros(1, dtype=[("a", "<i4"), ("b", "<f8")]),
            arr("[('a', '<i4'), ('b', '<f8')]", (1,), bytes(12)),
        ),
        ((ctypes.c_int32 * 2)(3, 4), arr("<i", (2,), struct.pack("<2i", 3, 4))),
    ],
    ids=[
        "array.array",
        "empty-array.array",
        "float64",
        "2d-int16",
        "0d",
        "numpy-scalar",
        "float32-scalar",
        "bool-scalar",
        "big-endian",
        "datetime64-no-buffer",
        "structured",
        "ctypes-array",
    ],
)
def test_array_encoding(value: Any, expected: bytes) -> None:
    assert encoding(value) == expected


def test_mmap_encodes_its_bytes_and_stays_closable() -> None:
    region = mmap.mmap(-1, 5)
    region.write(b"hello")
    assert encoding(region) == arr("B", (5,), b"hello")
    assert encoding({"m": [region]}) == b"d" + u64(1) + s("m") + b"l" + u64(1) + encoding(region)
    region.close()  # no buffer export left behind
    assert encoding(region).startswith(b"r" + s("mmap.mmap"))


def test_bytes_like_keep_their_binary_encoding() -> None:
    for value in (
        b"ab",
        bytearray(b"ab"),
        memoryview(b"ab"),
        memoryview(np.frombuffer(b"ab", "u1")),
    ):
        assert encoding(value) == b"b" + u64(2) + b"ab"


# ---- distinctness and equality ---------------------------------------------------


def test_large_arrays_differing_in_one_element_differ() -> None:
    # numpy's repr of both is "array([   0,    1,    2, ..., 9997, 9998, 9999])".
    first = np.arange(10_000)
    second = first.copy()
    second[5_000] = -1
    assert repr(first) == repr(second)
    assert encoding(first) != encoding(second)
    assert fp(first) != fp(second)
    assert fp({"rows": first}) != fp({"rows": second})


def test_equal_arrays_encode_equal() -> None:
    assert encoding(np.arange(10_000)) == encoding(np.arange(10_000))
    assert encoding(np.zeros((3, 4))) == encoding(np.zeros((3, 4)))
    # A C type spelled two ways ("q" and "l" on Linux) is one dtype string.
    assert encoding(np.zeros(2, dtype="q")) == encoding(np.zeros(2, dtype=np.int64))


def test_non_contiguous_views_encode_as_their_contiguous_copy() -> None:
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    for view in (base[::2], base.T, base[:, 1::3], base[::-1], np.asfortranarray(base)):
        assert not view.flags.c_contiguous or view is base
        assert encoding(view) == encoding(np.ascontiguousarray(view))
        assert encoding(view) == arr("<i4", view.shape, np.ascontiguousarray(view).tobytes())
    buffer_view = memoryview(array.array("h", range(10)))[::3]
    assert encoding(np.asarray(buffer_view)) == arr("<i2", (4,), struct.pack("<4h", 0, 3, 6, 9))


def test_same_bytes_of_different_dtypes_differ() -> None:
    zeros = [np.zeros(4, dtype=t) for t in ("i4", "u4", "f4", "<i4", ">i4", "V4", "S4", "u1")]
    raw = {z.tobytes() for z in zeros if z.dtype.itemsize == 4}
    assert len(raw) == 1
    assert len({encoding(z) for z in zeros}) == len(zeros) - 1  # "i4" is "<i4"
    assert encoding(np.zeros(4, "i2")) != encoding(np.zeros(2, "i4"))
    assert encoding(array.array("i", [0])) != encoding(array.array("f", [0]))


def test_shape_matters() -> None:
    flat = np.arange(6)
    shapes = {encoding(flat.reshape(shape)) for shape in [(6,), (2, 3), (3, 2), (1, 6), (6, 1)]}
    assert len(shapes) == 5


def test_zero_dim_arrays_and_scalars() -> None:
    assert encoding(np.array(3.5)) == arr("<f8", (), struct.pack("<d", 3.5))
    assert encoding(np.array(1)) != encoding(np.array(2))
    assert encoding(np.array(1)) != encoding(np.array([1]))
    day = np.datetime64("2020-01-01")
    assert encoding(day) == encoding(np.array(day)) == arr("<M8[D]", (), struct.pack("<q", 18262))
    assert encoding(day) != encoding(np.datetime64(18262, "s"))
    # A float64 scalar is a float subclass: it encodes as the float it is, not
    # as the 0-d array it could become.
    assert encoding(np.float64(2.5)) == encoding(2.5) != encoding(np.array(2.5))


@pytest.mark.parametrize(
    "value",
    [
        np.array([1, "a", None], dtype=object),
        np.zeros(1, dtype=[("o", "O")]),
        (ctypes.c_void_p * 2)(),
        ctypes.pointer(ctypes.c_int(1)),
    ],
    ids=["object-array", "object-field", "void-pointers", "pointer"],
)
def test_buffers_of_addresses_keep_the_opaque_encoding(value: Any) -> None:
    assert encoding(value).startswith(b"r")


def test_large_arrays_are_streamed_alike() -> None:
    big = np.arange(300_000, dtype=np.float64)  # 2.4 MB of raw bytes
    assert encoding(big) == arr("<f8", big.shape, big.tobytes())
    for value in (big, [1, big, "x"], {"a": big, "b": big[::2]}, {1: big, "é": [big]}):
        prints = {encoder.fingerprint(value, b"d") for encoder in ENCODERS}
        assert len(prints) == 1


def test_call_and_outcome_hashes_agree_across_twins() -> None:
    values = [np.arange(50), np.zeros((2, 2)), array.array("q", [1, 2]), np.int32(3)]
    for value in values:
        results = set()
        for twin in TWINS:
            for module in OUTCOMES:
                with use_twin(twin):
                    results.add(
                        (
                            module.hash_call("read", {"x": value}),
                            module.hash_outcome("read", {}, result=value),
                            module.hash_outcome("read", {}, result={"details": {"v": value}}),
                        )
                    )
        assert len(results) == 1
    assert _outcome_py.hash_call("read", {"x": np.arange(10_000)}) != _outcome_py.hash_call(
        "read", {"x": np.arange(10_000)[::-1]}
    )

"""How is a Python value turned into a 64-bit fingerprint? (SPEC §2, pure-Python twin)

The canonical encoding is prefix-free: every value starts with a one-byte tag,
variable-length payloads carry an 8-byte little-endian length, containers an
8-byte element count. Concatenating encodings is therefore unambiguous, which
lets mapping entries and set elements be sorted by their encoded bytes.

The walk uses an explicit stack rather than recursion so that no input, and no
depth of caller stack, can raise ``RecursionError``. The compiled twin must
produce byte-identical output; this module is the reference.
"""

from __future__ import annotations

import dataclasses
import re
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import xxhash

__all__ = ["IMPLEMENTATION", "MAX_DEPTH", "encode", "fingerprint"]

IMPLEMENTATION = "python"

#: Containers nested deeper than this encode as the depth marker.
MAX_DEPTH = 256

_pack_i64 = struct.Struct("<q").pack
_pack_u64 = struct.Struct("<Q").pack
_pack_f64 = struct.Struct("<d").pack
_xxh3 = xxhash.xxh3_64_intdigest

_NONE = b"N"
_TRUE = b"T"
_FALSE = b"F"
_NAN = b"n"
_POS_INF = b"+"
_NEG_INF = b"-"
_CYCLE = b"C"
_DEPTH = b"D"
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")

# Container kinds on the explicit stack.
_SEQ = 0
_MAP = 1
_SET = 2

#: Optional hook for mappings: given a mapping, return the (key, value) pairs to encode.
ItemFilter = Callable[[Mapping[Any, Any]], Iterable[tuple[Any, Any]]]


def _str(value: str) -> bytes:
    data = value.encode("utf-8", "surrogatepass")
    return b"s" + _pack_u64(len(data)) + data


def _int(value: int) -> bytes:
    if _INT64_MIN <= value <= _INT64_MAX:
        return b"i" + _pack_i64(value)
    # Two's complement, minimal length; to_bytes is not subject to the
    # int-to-decimal digit limit that str() has.
    data = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
    return b"I" + _pack_u64(len(data)) + data


def _float(value: float) -> bytes:
    if value != value:
        return _NAN
    if value == float("inf"):
        return _POS_INF
    if value == float("-inf"):
        return _NEG_INF
    if value.is_integer():
        return _int(int(value))
    return b"f" + _pack_f64(value)


def _binary(data: bytes) -> bytes:
    return b"b" + _pack_u64(len(data)) + data


def _qualname(cls: type) -> str:
    try:
        module = getattr(cls, "__module__", None)
        qualname = getattr(cls, "__qualname__", None)
    except Exception:  # a metaclass can make even these raise
        return "?"
    if not isinstance(qualname, str):
        qualname = "?"
    return f"{module}.{qualname}" if isinstance(module, str) else qualname


def _exception(exc: BaseException) -> bytes:
    try:
        message = str(exc)
    except Exception:
        message = ""
    return b"x" + _str(_qualname(type(exc))) + _str(message)


def _opaque(value: object) -> bytes:
    try:
        text = repr(value)
        if not isinstance(text, str):
            text = "<repr did not return str>"
    except Exception:
        text = "<repr failed>"
    return b"r" + _str(_qualname(type(value))) + _str(_ADDRESS.sub("", text))


def _children(value: object, item_filter: ItemFilter | None) -> tuple[int, list[Any]] | None:
    """The container kind and flat child list of ``value``, or None for a leaf.

    Mapping children are laid out as key0, value0, key1, value1, ...
    """
    cls = type(value)
    if cls is dict or isinstance(value, Mapping):
        mapping: Mapping[Any, Any] = value  # type: ignore[assignment]
        items = item_filter(mapping) if item_filter is not None else mapping.items()
        flat: list[Any] = []
        for key, item in items:
            flat.append(key)
            flat.append(item)
        return _MAP, flat
    if cls is list or cls is tuple or isinstance(value, (list, tuple)):
        return _SEQ, list(value)  # type: ignore[call-overload]
    if isinstance(value, (set, frozenset)):
        return _SET, list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        flat = []
        for field in dataclasses.fields(value):
            flat.append(field.name)
            flat.append(getattr(value, field.name))
        return _MAP, flat
    dump = getattr(cls, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        dumped = value.model_dump()  # type: ignore[attr-defined]
        if isinstance(dumped, Mapping):
            return _children(dumped, item_filter)
    return None


def _leaf(value: object) -> bytes:
    """Encoding of a value that has no children (never raises)."""
    cls = type(value)
    if cls is str:
        return _str(value)  # type: ignore[arg-type]
    if value is None:
        return _NONE
    if value is True:
        return _TRUE
    if value is False:
        return _FALSE
    if cls is int:
        return _int(value)  # type: ignore[arg-type]
    if cls is float:
        return _float(value)  # type: ignore[arg-type]
    # Subclasses (enums, numpy float64, str subclasses) encode as their base value.
    if isinstance(value, str):
        return _str(str.__str__(value))
    if isinstance(value, int):
        return _int(int.__index__(value))
    if isinstance(value, float):
        return _float(float(value))
    if isinstance(value, (bytes, bytearray)):
        return _binary(bytes(value))
    if isinstance(value, memoryview):
        try:
            return _binary(value.tobytes())
        except Exception:
            return _opaque(value)
    if isinstance(value, BaseException):
        return _exception(value)
    return _opaque(value)


def _finish(kind: int, parts: list[bytes]) -> bytes:
    if kind == _MAP:
        pairs = sorted(zip(parts[0::2], parts[1::2], strict=True))
        return b"d" + _pack_u64(len(pairs)) + b"".join(k + v for k, v in pairs)
    if kind == _SET:
        parts.sort()
    return b"l" + _pack_u64(len(parts)) + b"".join(parts)


def encode(value: object, item_filter: ItemFilter | None = None) -> bytes:
    """The canonical byte encoding of ``value`` (SPEC §2). Never raises."""
    # A frame is [object id, kind, children, next child index, encoded parts].
    stack: list[list[Any]] = []
    on_path: set[int] = set()
    result = b""
    current: object = value
    while True:
        # Encode ``current``: either it is a leaf (result set) or a new frame is pushed.
        if isinstance(current, (str, int, float)) or current is None:
            result = _leaf(current)
        elif id(current) in on_path:
            result = _CYCLE
        else:
            try:
                shape = _children(current, item_filter)
            except Exception:
                shape = None
            if shape is None:
                result = _leaf(current)
            elif len(stack) >= MAX_DEPTH:
                result = _DEPTH
            elif not shape[1]:
                result = _finish(shape[0], [])
            else:
                ident = id(current)
                on_path.add(ident)
                stack.append([ident, shape[0], shape[1], 0, []])
                current = shape[1][0]
                stack[-1][3] = 1
                continue
        # Hand ``result`` to the enclosing frames, closing every frame that is complete.
        while stack:
            frame = stack[-1]
            frame[4].append(result)
            children = frame[2]
            index = frame[3]
            if index < len(children):
                current = children[index]
                frame[3] = index + 1
                break
            stack.pop()
            on_path.discard(frame[0])
            result = _finish(frame[1], frame[4])
        else:
            return result


def fingerprint(value: object, domain: bytes = b"") -> int:
    """xxh3-64 of ``domain`` followed by the canonical encoding of ``value``."""
    return _xxh3(domain + encode(value))

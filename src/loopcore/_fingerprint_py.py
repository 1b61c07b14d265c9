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
from collections.abc import Callable, Iterable, Mapping, Sequence
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
    try:
        return _subclass_leaf(value)
    except Exception:
        # Only an object whose ``__class__`` claims a type it does not have
        # gets here (``isinstance`` believes it): encode what it really is.
        return _opaque(value)


def _subclass_leaf(value: object) -> bytes:
    # Subclasses (enums, numpy float64, str subclasses) encode as their base value.
    if isinstance(value, str):
        return _str(str.__str__(value))
    if isinstance(value, int):
        return _int(int.__index__(value))
    if isinstance(value, float):
        try:
            number = float(value)
        except Exception:
            number = float.__float__(value)  # a __float__ that raises: the stored value
        return _float(number)
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
        # Key encodings are prefix-free, so sorting key+value strings orders
        # entries by key first, then by value for keys that encode alike.
        entries = [k + v for k, v in zip(parts[0::2], parts[1::2], strict=True)]
        entries.sort()
        return b"d" + _pack_u64(len(entries)) + b"".join(entries)
    if kind == _SET:
        parts.sort()
    return b"l" + _pack_u64(len(parts)) + b"".join(parts)


def encode(value: object, item_filter: ItemFilter | None = None) -> bytes:
    """The canonical byte encoding of ``value`` (SPEC §2). Never raises."""
    # The open container is held in locals; its parents wait on ``stack`` as
    # (id, kind, children, next index, encoded parts). The root is a pseudo
    # frame, so ``len(stack)`` is the depth of a container about to open.
    stack: list[tuple[int, int, Sequence[Any], int, list[bytes]]] = []
    on_path: set[int] = set()
    children: Sequence[Any] = (value,)
    ident, kind, index = 0, _SEQ, 0
    parts: list[bytes] = []
    while True:
        if index < len(children):
            current: Any = children[index]
            index += 1
            cls = type(current)
            if cls is str:
                parts.append(_str(current))
                continue
            if cls is int:
                parts.append(_int(current))
                continue
            if current is None or isinstance(current, (str, int, float)):
                parts.append(_leaf(current))
                continue
            child_id = id(current)
            if child_id in on_path:
                parts.append(_CYCLE)
                continue
            shape: tuple[int, list[Any]] | None
            if cls is dict and item_filter is None:
                shape = (_MAP, [x for item in current.items() for x in item])
            else:
                try:
                    shape = _children(current, item_filter)
                except Exception:
                    shape = None
            if shape is None:
                parts.append(_leaf(current))
            elif len(stack) >= MAX_DEPTH:
                parts.append(_DEPTH)
            else:
                stack.append((ident, kind, children, index, parts))
                on_path.add(child_id)
                ident, index, parts = child_id, 0, []
                kind, children = shape
            continue
        if not stack:
            return parts[0]
        encoded = _finish(kind, parts)
        on_path.discard(ident)
        ident, kind, children, index, parts = stack.pop()
        parts.append(encoded)


def fingerprint(value: object, domain: bytes = b"") -> int:
    """xxh3-64 of ``domain`` followed by the canonical encoding of ``value``."""
    return _xxh3(domain + encode(value))

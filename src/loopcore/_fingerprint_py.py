"""How is a Python value turned into a 64-bit fingerprint? (SPEC §2, pure-Python twin)

The canonical encoding is prefix-free: every value starts with a one-byte tag,
variable-length payloads carry an 8-byte little-endian length, containers an
8-byte element count. Concatenating encodings is therefore unambiguous, which
lets mapping entries and set elements be sorted by their encoded bytes.

Tags: ``N`` ``T`` ``F`` (None, True, False); ``i`` + int64; ``I`` + length +
two's complement (other ints); ``f`` + double, ``n`` ``+`` ``-`` (NaN, ±inf;
an integral float is the int it equals); ``s`` + length + UTF-8 (str); ``b`` +
length + bytes (bytes, bytearray, memoryview); ``l`` + count + elements (list,
tuple, sorted set); ``d`` + count + sorted key/value entries (mappings,
dataclasses, ``model_dump()``); ``x`` + name + message (exceptions); ``a`` +
format + shape + raw bytes (arrays, SPEC §11: any other buffer exporter, and
numpy arrays); ``r`` + name + ``repr()`` without addresses (anything else);
``C`` (a cycle); ``D`` (the depth limit).

``nonces=True`` (outcome hashes, SPEC §8.5) first normalises every str *value*
— at any depth, in sets, dataclass fields and exception messages, but never a
mapping key nor anything inside one — with ``_nonce.normalise``; a
``_nonce.Verbatim`` str is taken as already normalised. A str without a
wrapper is unchanged, so its encoding is the same in both modes.

The array tag ``a`` is followed by three encodings of their own: the element
type as a str (a numpy array's or scalar's ``dtype.str``, e.g. ``"<f8"``,
``"<M8[s]"``, or ``str(dtype.descr)`` for a structured dtype; any other
buffer's struct format, e.g. ``"B"`` for an ``mmap``, ``"i"`` for an
``array.array("i")``), the shape as a list of ints (``l`` + count + ``i``
each; empty for a 0-d array or a numpy scalar), and the raw bytes in C order
as ``b`` + length + bytes. Buffers of Python objects or pointers (numpy
``object`` dtypes, formats with ``O``, ``P`` or ``&``) hold addresses, not
values: they keep the ``r`` encoding.

A name (``x`` and ``r``) is ``type(value)``'s own ``__module__`` + ``"."`` +
``__qualname__``, read through ``type``'s descriptors so that no metaclass,
``__class__`` or ``__getattribute__`` can lie or raise; a ``__qualname__``
that is not an exact ``str`` is ``"?"``, a ``__module__`` that is not one is
left out. A ``repr()`` that raises is ``"<repr failed>"``. No method of a
value runs on these texts (no ``format()``, no subclass ``encode``).

The walk uses an explicit stack rather than recursion so that no input, and no
depth of caller stack, can raise ``RecursionError``. It produces the encoding
as a list of chunks: large str and bytes payloads stay chunks of their own
(never concatenated), and ``fingerprint`` streams big encodings into the hash,
so a huge value costs at most one copy (its UTF-8 bytes). The compiled twin
must produce byte-identical output; this module is the reference.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import xxhash

from ._fingerprint_leaves import (
    STREAM_MIN,
    _int,
    _leaf_parts,
    _normalised,
    _pack_u64,
    _str,
    _str_parts,
)
from ._nonce import MIN_WRAPPED

__all__ = ["IMPLEMENTATION", "MAX_DEPTH", "encode", "fingerprint"]

IMPLEMENTATION = "python"

#: Containers nested deeper than this encode as the depth marker.
MAX_DEPTH = 256

_xxh3 = xxhash.xxh3_64_intdigest
_xxh3_stream = xxhash.xxh3_64

_CYCLE = b"C"
_DEPTH = b"D"
# Strings at least this long keep their payload as a chunk of its own.
_LONG_STR = 1 << 16


# Container kinds on the explicit stack.
_SEQ = 0
_MAP = 1
_SET = 2

#: Optional hook for mappings: given a mapping, return the (key, value) pairs to encode.
ItemFilter = Callable[[Mapping[Any, Any]], Iterable[tuple[Any, Any]]]


def _children(value: object, item_filter: ItemFilter | None) -> tuple[int, list[Any]] | None:
    """The container kind and flat child list of ``value``, or None for a leaf.

    Mapping children are laid out as key0, value0, key1, value1, ... The kind
    is decided by the real type: an object whose ``__class__`` lies or raises
    is what it is (SPEC §11).
    """
    cls = type(value)
    if cls is dict or issubclass(cls, Mapping):
        mapping: Mapping[Any, Any] = value  # type: ignore[assignment]
        items = item_filter(mapping) if item_filter is not None else mapping.items()
        flat: list[Any] = []
        for key, item in items:
            flat.append(key)
            flat.append(item)
        return _MAP, flat
    if cls is list or cls is tuple or issubclass(cls, (list, tuple)):
        return _SEQ, list(value)  # type: ignore[call-overload]
    if issubclass(cls, (set, frozenset)):
        return _SET, list(value)  # type: ignore[call-overload]
    if issubclass(cls, type):
        return None  # a class, even a dataclass or a model class, is a leaf
    if dataclasses.is_dataclass(cls):
        flat = []
        for field in dataclasses.fields(cls):
            flat.append(field.name)
            flat.append(getattr(value, field.name))
        return _MAP, flat
    dump = getattr(cls, "model_dump", None)
    if callable(dump):
        dumped = value.model_dump()  # type: ignore[attr-defined]
        if isinstance(dumped, Mapping):
            return _children(dumped, item_filter)
    return None


def _finish(kind: int, groups: list[list[bytes]], out: list[bytes]) -> None:
    """Append a mapping's or set's encoding to ``out``: ``groups`` holds each child's chunks."""
    if kind == _SET:
        elements = [b"".join(group) for group in groups]
        elements.sort()
        out.append(b"l" + _pack_u64(len(elements)))
        out += elements
        return
    # Entries are ordered by their encoded bytes, key then value. Key encodings
    # are prefix-free, so two different keys are ordered by the keys alone and
    # a value's chunks are only joined to break a tie between equal keys.
    entries = [
        (b"".join(key), value) for key, value in zip(groups[0::2], groups[1::2], strict=True)
    ]
    entries.sort(key=_entry_key)
    count = len(entries)
    index = 0
    while index < count:
        end = index + 1
        while end < count and entries[end][0] == entries[index][0]:
            end += 1
        if end - index > 1:
            entries[index:end] = sorted(entries[index:end], key=_entry_value)
        index = end
    out.append(b"d" + _pack_u64(count))
    for key_bytes, value in entries:
        out.append(key_bytes)
        out += value


def _entry_key(entry: tuple[bytes, list[bytes]]) -> bytes:
    return entry[0]


def _entry_value(entry: tuple[bytes, list[bytes]]) -> bytes:
    return b"".join(entry[1])


def _chunks(
    value: object, item_filter: ItemFilter | None, nonces: bool = False
) -> tuple[list[bytes], bool]:
    """The canonical encoding of ``value`` as a list of chunks (never raises on values).

    The flag says whether a payload was kept as a chunk of its own (so the
    encoding may be big enough to stream).
    """
    # The open container is held in locals; its parents wait on ``stack`` as
    # (id, kind, children, next index, output list, child groups, norm). The
    # root is a pseudo frame, so ``len(stack)`` is the depth of a container
    # about to open. A list or tuple writes straight into its parent's output;
    # a mapping or set gathers each child's chunks in a group of its own, to
    # sort them. ``norm``: str values in this container are nonce-normalised
    # (the nonces mode, outside every mapping key); a mapping's keys sit at
    # the even child indices.
    stack: list[
        tuple[int, int, Sequence[Any], int, list[bytes], list[list[bytes]] | None, bool]
    ] = []
    on_path: set[int] = set()
    children: Sequence[Any] = (value,)
    ident, kind, index = 0, _SEQ, 0
    out: list[bytes] = []
    groups: list[list[bytes]] | None = None
    split = False
    norm = nonces
    parts: tuple[bytes, ...]
    while True:
        if index < len(children):
            current: Any = children[index]
            index += 1
            if groups is not None:
                out = []
                groups.append(out)
            cls = type(current)
            if cls is str:
                # A value (not a key, nor in one) that is long enough to hold a wrapper.
                if norm and len(current) >= MIN_WRAPPED and not (kind == _MAP and index & 1):
                    current = _normalised(current)
                if len(current) < _LONG_STR:
                    out.append(_str(current))
                else:
                    out += _str_parts(current)
                    split = True
                continue
            if cls is int:
                out.append(_int(current))
                continue
            # Is this child a value to normalise (not a key, nor in one)?
            here = norm and not (kind == _MAP and index & 1)
            if current is None or issubclass(cls, (str, int, float)):
                parts = _leaf_parts(current, here)
                out += parts
                split = split or len(parts) > 1
                continue
            child_id = id(current)
            if child_id in on_path:
                out.append(_CYCLE)
                continue
            shape: tuple[int, list[Any]] | None
            if cls is dict and item_filter is None:
                shape = (_MAP, [x for item in current.items() for x in item])
            elif cls is bytes:
                shape = None
            else:
                try:
                    shape = _children(current, item_filter)
                except Exception:
                    shape = None
            if shape is None:
                parts = _leaf_parts(current, here)
                out += parts
                split = split or len(parts) > 1
            elif len(stack) >= MAX_DEPTH:
                out.append(_DEPTH)
            else:
                stack.append((ident, kind, children, index, out, groups, norm))
                on_path.add(child_id)
                ident, index, norm = child_id, 0, here
                kind, children = shape
                if kind == _SEQ:
                    out.append(b"l" + _pack_u64(len(children)))
                    groups = None
                else:
                    groups = []
            continue
        if not stack:
            return out, split
        done_kind, done_groups = kind, groups
        on_path.discard(ident)
        ident, kind, children, index, out, groups, norm = stack.pop()
        if done_groups is not None:
            _finish(done_kind, done_groups, out)


def encode(value: object, item_filter: ItemFilter | None = None, *, nonces: bool = False) -> bytes:
    """The canonical byte encoding of ``value`` (SPEC §2). Never raises.

    ``nonces``: str values nonce-normalised first (SPEC §8.5, outcome hashes).
    """
    return b"".join(_chunks(value, item_filter, nonces)[0])


def fingerprint(value: object, domain: bytes = b"", *, nonces: bool = False) -> int:
    """xxh3-64 of ``domain`` followed by the canonical encoding of ``value``."""
    chunks, split = _chunks(value, None, nonces)
    if not split or sum(map(len, chunks)) < STREAM_MIN:
        return _xxh3(domain + b"".join(chunks))
    # A big encoding is hashed as it stands, chunk by chunk: no joined copy.
    hasher = _xxh3_stream(domain + b"")
    for chunk in chunks:
        hasher.update(chunk)
    return hasher.intdigest()

"""How is a scope named in Redis, and how are its stored records read back? (SPEC §10)

Keys: ``{prefix}{<session>}:r:<run>`` (the ring), ``…:m:<run>`` (its hash of
names, ids and hook state) and ``{prefix}{<session>}:runs`` (the session's
runs). The session and run are written type-tagged and base64url-encoded, so
``None`` and ``"None"`` differ and ids holding ``:``, ``{`` or ``}`` can neither
collide nor move the hash tag; the tag is the session, so every key of a scope
(and of its session) lives in one cluster slot.

A ring is the native row layout for ``history_size`` records: columns of args
hashes, result hashes, call id hashes and timestamps (8 bytes each), tool and
unknown-name indices (4), flags (1) and identities (8), little-endian.
"""

from __future__ import annotations

import base64
import math
import struct
import sys
from collections.abc import Hashable, Sequence
from typing import Any

import xxhash

from ._records import OUTCOME_KINDS, CallRecord, call_record
from ._scopes import ScopeKey, session_of

__all__ = [
    "RECORD_BYTES",
    "ScopeKeys",
    "decode_window",
    "id_hash",
    "pack_hash",
    "record_of",
    "scope_keys",
    "unpack_hash",
]

RECORD_BYTES = 49
HAS_RESULT, HAS_UNKNOWN, HAS_CALL_ID = 1, 2, 4
KIND_SHIFT, KIND_BITS, NO_PROGRESS, HAS_IDENTITY = 4, 0x30, 0x40, 0x80
_U64 = struct.Struct("<Q")
_F64 = struct.Struct("<d")
_LITTLE = sys.byteorder == "little"

ScopeKeys = tuple[str, str, str, str]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _text(value: str) -> bytes:
    # Lone surrogates are valid str: encoded, never an error.
    return value.encode("utf-8", "surrogatepass")


def _session_part(session: Hashable, depth: int = 0) -> str:
    """A session as a key part: equal sessions (``1 == 1.0 == True``) give equal parts."""
    kind = type(session)
    if session is None:
        return "n"
    if kind is str:
        return "s" + _b64(_text(session))  # type: ignore[arg-type]
    if kind is bool or kind is int:
        return "i" + str(int(session))  # type: ignore[call-overload]
    if kind is float:
        value: float = session  # type: ignore[assignment]
        if math.isfinite(value) and value.is_integer():
            return "i" + str(int(value))
        return "f" + value.hex()
    if kind is bytes:
        return "y" + _b64(session)  # type: ignore[arg-type]
    if kind is tuple and depth < 8:
        inner = ",".join(_session_part(item, depth + 1) for item in session)  # type: ignore[attr-defined]
        return "t" + _b64(inner.encode("ascii"))
    raise TypeError(
        "session: a shared store needs a str, int, float, bytes, None or a tuple of them, "
        f"got {type(session).__qualname__}"
    )


def scope_keys(prefix: str, key: ScopeKey) -> ScopeKeys:
    """(ring, meta, runs, run member) of a scope; the session's hash tag shared by all."""
    base = f"{prefix}{{{_session_part(session_of(key))}}}:"
    run = key[1]
    member = "n" if run is None else "s" + _b64(_text(run))
    return base + "r:" + member, base + "m:" + member, base + "runs", member


def session_keys(prefix: str, session: Hashable) -> tuple[str, str]:
    """(the session's runs key, the prefix of its runs' keys)."""
    base = f"{prefix}{{{_session_part(session)}}}:"
    return base + "runs", base


def pack_hash(value: int) -> bytes:
    return _U64.pack(value & 0xFFFFFFFFFFFFFFFF)


def unpack_hash(data: bytes) -> int:
    return int(_U64.unpack(data)[0])


def pack_time(value: float) -> bytes:
    return _F64.pack(value)


def id_hash(call_id: str) -> bytes:
    """The 8 bytes stored for a call id (the id itself is kept beside the ring)."""
    return xxhash.xxh3_64_digest(_text(call_id))[::-1]


def _column(ring: bytes, start: int, count: int, code: str) -> Sequence[Any]:
    view = memoryview(ring)[start : start + count * struct.calcsize(code)]
    if _LITTLE:
        column: Sequence[Any] = view.cast(code)  # type: ignore[call-overload]
        return column
    return struct.unpack(f"<{count}{code}", view)


def decode_window(
    ring: bytes, head: int, fill: int, names: Sequence[bytes | None], history_size: int
) -> list[list[Any]]:
    """A stored ring as records in the Python ring's layout (``_counts``), oldest first.

    The call id field holds the id's stored hash: the counts compare ids only.
    """
    if not fill:
        return []
    h = history_size
    args = _column(ring, 0, h, "Q")
    results = _column(ring, 8 * h, h, "Q")
    ids = _column(ring, 16 * h, h, "Q")
    times = _column(ring, 24 * h, h, "d")
    tools = _column(ring, 32 * h, h, "I")
    unknowns = _column(ring, 36 * h, h, "I")
    flags = ring[40 * h : 41 * h]
    identities = _column(ring, 41 * h, h, "Q")
    text = [None if n is None else n.decode("utf-8", "surrogatepass") for n in names]
    records: list[list[Any]] = []
    for i in range(fill):
        s = (head - fill + i) % h
        f = flags[s]
        records.append(
            [
                text[tools[s]],
                args[s],
                ids[s] if f & HAS_CALL_ID else None,
                times[s],
                results[s] if f & HAS_RESULT else None,
                text[unknowns[s]] if f & HAS_UNKNOWN else None,
                (f & KIND_BITS) >> KIND_SHIFT,
                identities[s] if f & HAS_IDENTITY else None,
                bool(f & NO_PROGRESS),
            ]
        )
    return records


def _str(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "surrogatepass")


def record_of(key: ScopeKey, record: Sequence[Any], call_id: str | None) -> CallRecord:
    """A decoded record (``decode_window``) as ``history()`` gives it, with its real id."""
    return call_record(key, [*record[:2], call_id, *record[3:]])


def attached_record(key: ScopeKey, fields: Sequence[Any]) -> CallRecord:
    """The record the attach script returns (its eight fields, as the script lists them)."""
    tool, args, call_id, ts, result, unknown, flags, identity = fields[:8]
    f = int(flags)
    return CallRecord(
        _str(tool) or "",
        unpack_hash(args),
        _str(call_id) if call_id else None,
        session_of(key),
        key[1],
        float(_F64.unpack(ts)[0]),
        unpack_hash(result) if f & HAS_RESULT else None,
        _str(unknown) if unknown else None,
        OUTCOME_KINDS[(f & KIND_BITS) >> KIND_SHIFT],
        unpack_hash(identity) if f & HAS_IDENTITY else None,
        bool(f & NO_PROGRESS),
    )


def note_value(call_id: str | None, note: str) -> bytes:
    """A pending note as the hash holds it: whose call it is (or anyone's), then the note."""
    owner = b"" if call_id is None else _text(call_id)
    return b"%d%d:%s%s" % (call_id is not None, len(owner), owner, _text(note))


def note_field(tool_name: str, args_hash: int) -> bytes:
    return b"o" + _text(tool_name) + b"\n" + pack_hash(args_hash)

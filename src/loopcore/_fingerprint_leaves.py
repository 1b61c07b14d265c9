"""How does the reference encode one value that holds no others? (SPEC §2, §11)

The leaves of the pure-Python twin's canonical encoding (``_fingerprint_py``
walks the containers): str, int and float, bytes-likes, exceptions, buffers
and numpy arrays, and the opaque ``r`` encoding of anything else, with the
names read through ``type``'s own descriptors. The module docstring of
``_fingerprint_py`` gives the format; nothing here raises on a value.
"""

from __future__ import annotations

import re
import struct
import sys
from collections.abc import Sequence

from ._nonce import MIN_WRAPPED, START, Verbatim, normalise

#: Encodings at least this long are streamed into the hash chunk by chunk.
STREAM_MIN = 1 << 20

_pack_i64 = struct.Struct("<q").pack
_pack_u64 = struct.Struct("<Q").pack
_pack_f64 = struct.Struct("<d").pack

_NONE = b"N"
_TRUE = b"T"
_FALSE = b"F"
_NAN = b"n"
_POS_INF = b"+"
_NEG_INF = b"-"
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# Struct-format field names (``:name:``), which are not element types.
_FIELD_NAMES = re.compile(r":[^:]*:")
# Element types whose bytes are addresses: Python objects, pointers.
_POINTER_TYPES = re.compile(r"[OP&]")

# The type's own name, past any metaclass: the descriptors ``type`` itself uses.
_type_qualname = type.__dict__["__qualname__"].__get__
_type_module = type.__dict__["__module__"].__get__
_NO_NAME = "?"
_REPR_FAILED = "<repr failed>"


def _str(value: str) -> bytes:
    data = value.encode("utf-8", "surrogatepass")
    return b"s" + _pack_u64(len(data)) + data


def _str_parts(value: str) -> tuple[bytes, ...]:
    """``_str`` of an exact str, the payload of a long one as a chunk of its own."""
    data = value.encode("utf-8", "surrogatepass")
    head = b"s" + _pack_u64(len(data))
    return (head, data) if len(data) >= STREAM_MIN else (head + data,)


def _normalised(text: str) -> str:
    """An exact str with its wrapper nonces zeroed (SPEC §8.5); never raises."""
    if len(text) < MIN_WRAPPED or START not in text:
        return text
    try:
        return normalise(text)
    except Exception:  # MemoryError: encoding must not raise
        return text


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


def _binary_parts(data: bytes) -> tuple[bytes, ...]:
    head = b"b" + _pack_u64(len(data))
    return (head, data) if len(data) >= STREAM_MIN else (head + data,)


def _exact(text: object, default: str) -> str:
    """``text`` as an exact str (a subclass's own methods never run on it), else ``default``."""
    if type(text) is str:
        return text
    if issubclass(type(text), str):
        return str.__str__(text)
    return default


def _qualname(cls: type) -> str:
    """``module.qualname`` of ``cls`` itself (see the module docstring); never raises."""
    try:
        qualname = _type_qualname(cls)
    except Exception:
        return _NO_NAME
    if type(qualname) is not str:
        return _NO_NAME
    try:
        module = _type_module(cls)
    except Exception:
        return qualname
    # Plain concatenation of exact strs: no __format__, no __add__ of a subclass.
    return module + "." + qualname if type(module) is str else qualname


def _exception(exc: BaseException, nonces: bool = False) -> bytes:
    try:
        message = _exact(str(exc), "")
    except Exception:
        message = ""
    if nonces:
        message = _normalised(message)
    return b"x" + _str(_qualname(type(exc))) + _str(message)


def _opaque_text(value: object) -> str:
    try:
        text = _exact(repr(value), _REPR_FAILED)
    except Exception:
        return _REPR_FAILED
    return _ADDRESS.sub("", text)


def _opaque(value: object) -> bytes:
    try:
        return b"r" + _str(_qualname(type(value))) + _str(_opaque_text(value))
    except Exception:  # MemoryError: encoding must not raise
        return _LAST_RESORT


#: The opaque encoding of a value of which nothing could be read.
_LAST_RESORT = b"r" + _str(_NO_NAME) + _str(_REPR_FAILED)


def _array_parts(fmt: str, shape: Sequence[int], data: bytes) -> tuple[bytes, ...]:
    head = b"a" + _str(fmt) + b"l" + _pack_u64(len(shape))
    head += b"".join(_int(n) for n in shape)
    return (head, *_binary_parts(data))


def _buffer_parts(value: object) -> tuple[bytes, ...] | None:
    """The ``a`` encoding of a numpy array or other buffer exporter, or None (SPEC §11)."""
    cls = type(value)
    if hasattr(cls, "__array__"):
        parts = _numpy_parts(value, cls)
        if parts is not None:
            return parts
    try:
        view = memoryview(value)  # type: ignore[arg-type]
    except Exception:
        return None
    with view:  # released at once: an mmap must stay closable
        fmt = view.format
        if _POINTER_TYPES.search(_FIELD_NAMES.sub("", fmt)):
            return None
        shape = view.shape or ()
        data = view.tobytes()
    return _array_parts(fmt, shape, data)


def _numpy_parts(value: object, cls: type) -> tuple[bytes, ...] | None:
    """A numpy array or scalar: its dtype string, shape and bytes in C order.

    Duck-typed first (``__array__`` on the type), so numpy is never imported
    here; then only numpy's own types qualify (other array-likes, such as
    pandas or torch objects, would convert, compute or drop their index), read
    through numpy's own descriptors. The dtype string is ``dtype.str``
    (``"<f8"``, ``"<M8[s]"``: the same on every platform, where a buffer's
    format names C types), or ``str(dtype.descr)`` for a structured dtype,
    whose ``dtype.str`` would drop the field names.
    """
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return None
    if issubclass(cls, numpy.ndarray):
        base = numpy.ndarray
    elif issubclass(cls, numpy.generic):
        base = numpy.generic
    else:
        return None
    dtype = base.dtype.__get__(value)
    if dtype.hasobject is not False:
        return None  # the bytes are addresses
    fmt = dtype.str if dtype.names is None else str(dtype.descr)
    shape = base.shape.__get__(value)
    data = base.tobytes(value)
    if type(fmt) is not str or type(data) is not bytes or type(shape) is not tuple:
        return None
    if not all(type(n) is int for n in shape):
        return None
    return _array_parts(fmt, shape, data)


def _leaf_parts(value: object, nonces: bool = False) -> tuple[bytes, ...]:
    """``_leaf`` as chunks: a large payload is a chunk of its own (never raises).

    ``nonces``: a str value or an exception's message is normalised (SPEC §8.5).
    """
    cls = type(value)
    if cls is str:
        return _str_parts(_normalised(value) if nonces else value)  # type: ignore[arg-type]
    if value is None:
        return (_NONE,)
    if value is True:
        return (_TRUE,)
    if value is False:
        return (_FALSE,)
    if cls is int:
        return (_int(value),)  # type: ignore[arg-type]
    if cls is float:
        return (_float(value),)  # type: ignore[arg-type]
    try:
        return _subclass_leaf(value, nonces)
    except Exception:
        return (_opaque(value),)


def _subclass_leaf(value: object, nonces: bool) -> tuple[bytes, ...]:
    # Decided by the real type, never by ``isinstance``, which an object whose
    # ``__class__`` lies would fool (SPEC §11). Subclasses (enums, numpy
    # float64, str subclasses) encode as their base value.
    cls = type(value)
    if issubclass(cls, str):
        text = str.__str__(value)
        return _str_parts(_normalised(text) if nonces and cls is not Verbatim else text)
    if issubclass(cls, int):
        return (_int(int.__index__(value)),)  # type: ignore[arg-type]
    if issubclass(cls, float):
        try:
            number = float(value)  # type: ignore[arg-type]
        except Exception:
            number = float.__float__(value)  # type: ignore[arg-type]  # the stored value
        return (_float(number),)
    if issubclass(cls, (bytes, bytearray)):
        return _binary_parts(bytes(value))  # type: ignore[call-overload]
    if issubclass(cls, memoryview):
        try:
            return _binary_parts(value.tobytes())  # type: ignore[attr-defined]
        except Exception:
            return (_opaque(value),)
    if issubclass(cls, BaseException):
        return (_exception(value, nonces),)  # type: ignore[arg-type]
    try:
        parts = _buffer_parts(value)
    except Exception:
        parts = None
    return (_opaque(value),) if parts is None else parts

# cython: language_level=3, freethreading_compatible=True
"""How is a Python value turned into a 64-bit fingerprint? (SPEC §2, compiled twin)

Produces the same bytes as ``_fingerprint_py`` (the reference) for every value,
so hashes agree across twins and machines. Exact ``str``, ``int``, ``float``,
``bool``, ``None``, ``bytes``, ``bytearray``, ``dict``, ``list``, ``tuple``,
``set`` and ``frozenset`` are encoded in C; every other type goes through the
reference's own helpers (``_children``, ``_leaf_parts``), which keeps subclasses,
dataclasses, ``model_dump()`` objects and hostile objects identical by
construction. Where the reference raises (a MemoryError in its fallbacks)
this twin still returns bytes.

In ``nonces`` mode (outcome hashes, SPEC §8.5) a str value is searched for the
wrapper's opening marker in C; only a str that holds one is handed to the
reference's ``_normalised`` (``_nonce.normalise``), so ordinary text costs one
``memchr`` pass. Mapping keys are never normalised.

A str or bytes payload of 1 MiB or more is hashed from its own storage while
it is written (``fingerprint`` and the C API; ``_fingerprint_stream.pxi``),
unless it lies inside a mapping or set whose entries must still be sorted:
fingerprinting a huge value costs no copy of it. ``encode`` returns every
byte, so it keeps them all.

The walk recurses in C. Depth is bounded by ``MAX_DEPTH`` before a container
is opened, so the recursion is at most 257 small frames whatever the input.
A container's children are snapshotted (owned references) when it is opened,
as the reference does with ``list(value)``, so code run while encoding (a
``__repr__``, a ``model_dump``) cannot change what is encoded, nor free what
is being read. The one exception is a small top-level dict of ASCII str keys
and scalars whose encoding runs no Python code (a typical tool call's args):
on a GIL build nothing can change it meanwhile, so it is read in place
(``enc_flat_dict``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from libc.stdint cimport uint64_t
from libc.string cimport memcpy

from . import _fingerprint_leaves as _leaves
from . import _fingerprint_py as _ref
from . import _nonce

__all__ = ["IMPLEMENTATION", "MAX_DEPTH", "encode", "fingerprint"]

IMPLEMENTATION = "cython"

#: Containers nested deeper than this encode as the depth marker.
MAX_DEPTH = 256


cdef extern from "_xxh3.h":
    uint64_t loopcore_xxh3_64(const void *data, size_t len) nogil


cdef extern from *:
    # Critical sections for the snapshot helpers in the included files: a
    # no-op before 3.13, where there is no free-threaded build.
    """
    #if PY_VERSION_HEX >= 0x030D0000
    #define LC_BEGIN_CS(op) Py_BEGIN_CRITICAL_SECTION(op)
    #define LC_END_CS() Py_END_CRITICAL_SECTION()
    #else
    #define LC_BEGIN_CS(op) {
    #define LC_END_CS() }
    #endif
    """


cdef extern from "Python.h":
    Py_ssize_t PY_SSIZE_T_MAX


cdef enum:
    _MAX_DEPTH = 256


if _ref.MAX_DEPTH != _MAX_DEPTH or MAX_DEPTH != _MAX_DEPTH:
    # A silent difference would split every deep value's hash between twins.
    raise ImportError("loopcore._fingerprint_c: MAX_DEPTH differs from the reference")


# ---- output buffer ----------------------------------------------------------

cdef void enc_init(Encoder *enc) noexcept:
    enc_reset(enc)


cdef void enc_free(Encoder *enc) noexcept:
    if enc.data != enc.inline:
        PyMem_Free(enc.data)
    enc_init(enc)


cdef int _grow(Encoder *enc, Py_ssize_t extra) except -1:
    cdef Py_ssize_t need, cap
    cdef unsigned char *data
    if extra > PY_SSIZE_T_MAX - enc.size:
        raise MemoryError()
    need = enc.size + extra
    cap = enc.capacity
    while cap < need:
        cap = cap * 2 if cap <= PY_SSIZE_T_MAX // 2 else need
    if enc.data == enc.inline:
        data = <unsigned char *>PyMem_Malloc(<size_t>cap)
        if data == NULL:
            raise MemoryError()
        memcpy(data, enc.data, <size_t>enc.size)
    else:
        data = <unsigned char *>PyMem_Realloc(enc.data, <size_t>cap)
        if data == NULL:
            raise MemoryError()
    enc.data = data
    enc.capacity = cap
    return 0


cdef inline int _reserve(Encoder *enc, Py_ssize_t extra) except -1:
    if enc.capacity - enc.size < extra:
        return _grow(enc, extra)
    return 0


cdef extern from *:
    """
    /* Little-endian on every host: one store where the host is little-endian
       (GCC rebuilds the value from its bytes before storing it otherwise, some
       30 instructions for each length and count), byte by byte elsewhere. */
    static inline void lc_put_u64(unsigned char *p, uint64_t v) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        memcpy(p, &v, 8);
    #else
        int i;
        for (i = 0; i < 8; i++)
            p[i] = (unsigned char)(v >> (8 * i));
    #endif
    }
    """
    void _put_u64 "lc_put_u64" (unsigned char *p, uint64_t v) noexcept nogil


cdef inline int _put_tag(Encoder *enc, unsigned char tag) except -1:
    _reserve(enc, 1)
    enc.data[enc.size] = tag
    enc.size += 1
    return 0


cdef inline int _put_head(Encoder *enc, unsigned char tag, uint64_t n) except -1:
    # A tag and its 8-byte length or count.
    _reserve(enc, 9)
    enc.data[enc.size] = tag
    _put_u64(enc.data + enc.size + 1, n)
    enc.size += 9
    return 0


cdef int enc_raw(Encoder *enc, const void *data, Py_ssize_t size) except -1:
    if size <= 0:
        return 0
    _reserve(enc, size)
    memcpy(enc.data + enc.size, data, <size_t>size)
    enc.size += size
    return 0


cdef int enc_list_header(Encoder *enc, Py_ssize_t count) except -1:
    _put_head(enc, c'l', <uint64_t>count)
    # The items that follow are the list's children: one level deeper, as
    # they would be had the caller encoded the tuple itself (the depth limit
    # must fall on the same container in both twins).
    enc.depth += 1
    return 0


cdef uint64_t enc_digest(Encoder *enc) noexcept:
    if enc.hashed:
        return _digest_streamed(enc)
    return loopcore_xxh3_64(enc.data, <size_t>enc.size)


# The encoders live in include files, one question each, so the whole walk
# stays one C translation unit: the ``inline`` helpers inline across them,
# which separate modules (calls through a C API table) would not allow.
# Order matters: a file's structs must be declared before a later file uses
# them in a signature; calls may go either way.
include "_fingerprint_stream.pxi"
include "_fingerprint_scalars.pxi"
include "_fingerprint_walk.pxi"
include "_fingerprint_order.pxi"
include "_fingerprint_fallback.pxi"


# ---- C API entry points -----------------------------------------------------

cdef int enc_value(Encoder *enc, object value) except -1:
    cdef Walk w
    # Scalars and small flat dicts need no walk (what _item would write).
    cdef int kind = lc_kind(<PyObject *>value)
    if kind == LC_STR:
        if enc.nonces:
            return _put_text(enc, <PyObject *>value)
        return _put_str(enc, <PyObject *>value)
    if kind == LC_INT:
        return _put_int(enc, <PyObject *>value, True)
    if kind == LC_DICT and _encode_flat_borrowed(enc, <PyObject *>value):
        return 0
    w.enc = enc
    w.refs = w.refs_inline
    w.nrefs = 0
    w.refs_cap = _INLINE_REFS
    w.spans = w.spans_inline
    w.nspans = 0
    w.spans_cap = _INLINE_SPANS
    try:
        _item(&w, <PyObject *>value, enc.depth, NULL)
    finally:
        # On error the frames returned without popping: release it all here.
        _refs_release(&w, 0)
        if w.refs != w.refs_inline:
            PyMem_Free(w.refs)
        if w.spans != w.spans_inline:
            PyMem_Free(w.spans)
    return 0


cdef int enc_str(Encoder *enc, str text) except -1:
    if type(text) is not str:
        return enc_value(enc, text)
    if enc.nonces:
        return _put_text(enc, <PyObject *>text)
    return _put_str(enc, <PyObject *>text)


cdef uint64_t str_hash(str text) except? 0:
    cdef Encoder enc
    enc_init(&enc)
    try:
        if type(text) is str:
            _put_str(&enc, <PyObject *>text)
        else:
            enc_value(&enc, text)
        return enc_digest(&enc)
    finally:
        enc_free(&enc)


# ---- Python API -------------------------------------------------------------

def encode(value, item_filter=None, *, nonces=False):
    """The canonical byte encoding of ``value`` (SPEC §2). Never raises.

    ``nonces``: str values nonce-normalised first (SPEC §8.5, outcome hashes).
    """
    cdef Encoder enc
    if item_filter is not None:
        # The key filter serves outbound-send details only: a rare path.
        return _ref.encode(value, item_filter, nonces=nonces)
    enc_init(&enc)
    enc.stream = 0  # every byte is returned: none may be hashed away
    enc.nonces = 1 if nonces else 0
    try:
        enc_value(&enc, value)
        return PyBytes_FromStringAndSize(<char *>enc.data, enc.size)
    finally:
        enc_free(&enc)


def fingerprint(value, domain=b"", *, nonces=False):
    """xxh3-64 of ``domain`` followed by the canonical encoding of ``value``."""
    cdef Encoder enc
    if type(domain) is not bytes:
        # Whatever the reference accepts (a bytearray) or raises on.
        return _ref._xxh3(domain + encode(value, nonces=nonces))
    enc_init(&enc)
    enc.nonces = 1 if nonces else 0
    try:
        enc_raw(&enc, PyBytes_AS_STRING(domain), PyBytes_GET_SIZE(domain))
        enc_value(&enc, value)
        return enc_digest(&enc)
    finally:
        enc_free(&enc)

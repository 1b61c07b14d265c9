# cython: language_level=3, freethreading_compatible=True
"""How is a Python value turned into a 64-bit fingerprint? (SPEC §2, compiled twin)

Produces the same bytes as ``_fingerprint_py`` (the reference) for every value,
so hashes agree across twins and machines. Exact ``str``, ``int``, ``float``,
``bool``, ``None``, ``bytes``, ``bytearray``, ``dict``, ``list``, ``tuple``,
``set`` and ``frozenset`` are encoded in C; every other type goes through the
reference's own helpers (``_children``, ``_leaf``), which keeps subclasses,
dataclasses, ``model_dump()`` objects and hostile objects identical by
construction. Where the reference raises (an object faking ``__class__``, a
float subclass whose ``__float__`` raises) this twin still returns bytes.

The walk recurses in C. Depth is bounded by ``MAX_DEPTH`` before a container
is opened, so the recursion is at most 257 small frames whatever the input.
A container's children are snapshotted (owned references) when it is opened,
as the reference does with ``list(value)``, so code run while encoding (a
``__repr__``, a ``model_dump``) cannot change what is encoded, nor free what
is being read.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.number cimport PyNumber_Float
from cpython.object cimport PyObject
from libc.math cimport INFINITY, floor
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport qsort
from libc.string cimport memcmp, memcpy

from . import _fingerprint_py as _ref

__all__ = ["IMPLEMENTATION", "MAX_DEPTH", "encode", "fingerprint"]

IMPLEMENTATION = "cython"

#: Containers nested deeper than this encode as the depth marker.
MAX_DEPTH = 256


cdef extern from "_xxh3.h":
    uint64_t loopcore_xxh3_64(const void *data, size_t len) nogil


cdef extern from *:
    """
    #if PY_VERSION_HEX >= 0x030D0000
    #define LC_BEGIN_CS(op) Py_BEGIN_CRITICAL_SECTION(op)
    #define LC_END_CS() Py_END_CRITICAL_SECTION()
    #else
    #define LC_BEGIN_CS(op) {
    #define LC_END_CS() }
    #endif

    enum {
        LC_OTHER, LC_STR, LC_INT, LC_DICT, LC_LIST, LC_TUPLE, LC_FLOAT,
        LC_NONE, LC_TRUE, LC_FALSE, LC_BYTES, LC_BYTEARRAY, LC_SET
    };

    /* Exact-type dispatch: pointer compares only, no isinstance. */
    static inline int lc_kind(PyObject *o) {
        PyTypeObject *t = Py_TYPE(o);
        if (t == &PyUnicode_Type) return LC_STR;
        if (t == &PyLong_Type) return LC_INT;
        if (t == &PyDict_Type) return LC_DICT;
        if (t == &PyList_Type) return LC_LIST;
        if (t == &PyTuple_Type) return LC_TUPLE;
        if (t == &PyFloat_Type) return LC_FLOAT;
        if (o == Py_None) return LC_NONE;
        if (o == Py_True) return LC_TRUE;
        if (o == Py_False) return LC_FALSE;
        if (t == &PyBytes_Type) return LC_BYTES;
        if (t == &PyByteArray_Type) return LC_BYTEARRAY;
        if (t == &PySet_Type || t == &PyFrozenSet_Type) return LC_SET;
        return LC_OTHER;
    }

    /* New references to a dict's (key, value) pairs, or -1 when it holds more
       than ``cap`` pairs (the caller grows and retries). The critical section
       keeps a free-threaded build from seeing the dict mid-mutation. */
    static Py_ssize_t lc_dict_pairs(PyObject *d, PyObject **out, Py_ssize_t cap) {
        Py_ssize_t n = -1, pos = 0, i = 0;
        PyObject *k, *v;
        LC_BEGIN_CS(d);
        if (PyDict_GET_SIZE(d) <= cap) {
            while (i < cap && PyDict_Next(d, &pos, &k, &v)) {
                Py_INCREF(k);
                Py_INCREF(v);
                out[2 * i] = k;
                out[2 * i + 1] = v;
                i++;
            }
            n = i;
        }
        LC_END_CS();
        return n;
    }

    /* Do compact-ASCII str keys ``a`` and ``b`` encode in this order? Their
       encodings are 's', the 8-byte little-endian length, then the bytes, so
       they compare as that length's bytes, low byte first, then the text. */
    static inline int lc_ascii_key_before(PyObject *a, PyObject *b) {
        Py_ssize_t la = PyUnicode_GET_LENGTH(a), lb = PyUnicode_GET_LENGTH(b);
        if (la != lb) {
            size_t x = (size_t)la, y = (size_t)lb;
            while ((x & 0xFF) == (y & 0xFF)) {
                x >>= 8;
                y >>= 8;
            }
            return (x & 0xFF) < (y & 0xFF);
        }
        return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)la) < 0;
    }

    static inline int lc_is_ascii_str(PyObject *o) {
        return PyUnicode_CheckExact(o) && PyUnicode_IS_COMPACT_ASCII(o);
    }

    /* New references to a list's items, or -1 when it holds more than ``cap``. */
    static Py_ssize_t lc_list_items(PyObject *l, PyObject **out, Py_ssize_t cap) {
        Py_ssize_t n = -1, i;
        LC_BEGIN_CS(l);
        if (PyList_GET_SIZE(l) <= cap) {
            n = PyList_GET_SIZE(l);
            for (i = 0; i < n; i++) {
                out[i] = PyList_GET_ITEM(l, i);
                Py_INCREF(out[i]);
            }
        }
        LC_END_CS();
        return n;
    }

    /* A bytearray's bytes into ``out``, or -1 when it holds more than ``cap``:
       another thread may resize it (free-threaded build) between the size
       check and the copy. */
    static Py_ssize_t lc_bytearray_copy(PyObject *b, unsigned char *out, Py_ssize_t cap) {
        Py_ssize_t n = -1;
        LC_BEGIN_CS(b);
        if (PyByteArray_GET_SIZE(b) <= cap) {
            n = PyByteArray_GET_SIZE(b);
            if (n)
                memcpy(out, PyByteArray_AS_STRING(b), (size_t)n);
        }
        LC_END_CS();
        return n;
    }

    /* Before 3.12 a str made through the deprecated wchar APIs may not have
       its canonical (kind, data) form yet. */
    static inline int lc_unicode_ready(PyObject *s) {
    #if PY_VERSION_HEX < 0x030C0000
        return PyUnicode_READY(s);
    #else
        (void)s;
        return 0;
    #endif
    }
    """
    enum:
        LC_OTHER, LC_STR, LC_INT, LC_DICT, LC_LIST, LC_TUPLE, LC_FLOAT
        LC_NONE, LC_TRUE, LC_FALSE, LC_BYTES, LC_BYTEARRAY, LC_SET
    int lc_kind(PyObject *o) noexcept
    Py_ssize_t lc_dict_pairs(PyObject *d, PyObject **out, Py_ssize_t cap) noexcept
    bint lc_ascii_key_before(PyObject *a, PyObject *b) noexcept
    bint lc_is_ascii_str(PyObject *o) noexcept
    Py_ssize_t lc_list_items(PyObject *l, PyObject **out, Py_ssize_t cap) noexcept
    Py_ssize_t lc_bytearray_copy(PyObject *b, unsigned char *out, Py_ssize_t cap) noexcept
    int lc_unicode_ready(PyObject *s) except -1


cdef extern from "Python.h":
    # Declared on PyObject* so the hot path never makes temporary references.
    Py_ssize_t PY_SSIZE_T_MAX
    bint lc_is_str "PyUnicode_Check"(PyObject *o) noexcept
    bint lc_is_int "PyLong_Check"(PyObject *o) noexcept
    bint lc_is_float "PyFloat_Check"(PyObject *o) noexcept
    Py_ssize_t lc_ulen "PyUnicode_GET_LENGTH"(PyObject *o) noexcept
    int lc_ukind "PyUnicode_KIND"(PyObject *o) noexcept
    void *lc_udata "PyUnicode_DATA"(PyObject *o) noexcept
    bint lc_uascii "PyUnicode_IS_ASCII"(PyObject *o) noexcept
    int PyUnicode_1BYTE_KIND
    int PyUnicode_2BYTE_KIND
    long long lc_as_longlong "PyLong_AsLongLongAndOverflow"(PyObject *o, int *overflow) except? -1
    double lc_fval "PyFloat_AS_DOUBLE"(PyObject *o) noexcept
    char *lc_bytes_data "PyBytes_AS_STRING"(PyObject *o) noexcept
    Py_ssize_t lc_bytes_len "PyBytes_GET_SIZE"(PyObject *o) noexcept
    Py_ssize_t lc_bytearray_len "PyByteArray_GET_SIZE"(PyObject *o) noexcept
    Py_ssize_t lc_tuple_len "PyTuple_GET_SIZE"(PyObject *o) noexcept
    PyObject *lc_tuple_item "PyTuple_GET_ITEM"(PyObject *o, Py_ssize_t i) noexcept
    Py_ssize_t lc_dict_len "PyDict_GET_SIZE"(PyObject *o) noexcept
    Py_ssize_t lc_list_len "PyList_GET_SIZE"(PyObject *o) noexcept
    PyObject *lc_list_item "PyList_GET_ITEM"(PyObject *o, Py_ssize_t i) noexcept
    void lc_decref "Py_DECREF"(PyObject *o) noexcept
    object PyLong_FromDouble(double v)
    object PySequence_List(object o)


# The reference's helpers, for the types this module does not encode itself.
cdef object _children = _ref._children
cdef object _leaf = _ref._leaf
cdef object _opaque = _ref._opaque
cdef object _py_int = _ref._int
cdef object _int_index = int.__index__
# Used only if even the reference's ``_opaque`` raises (say a str subclass
# whose ``encode`` raises came back from ``repr``): encoding must not raise.
cdef bytes _LAST_RESORT = b"r" + _ref._str("?") + _ref._str("<repr failed>")

cdef enum:
    _MAX_DEPTH = 256
    _SEQ = 0
    _MAP = 1
    _SET = 2
    # Enough for the values a tool call carries without touching the heap.
    _INLINE_REFS = 32
    _INLINE_SPANS = 16
    # Below this, insertion sort beats qsort's call-per-compare.
    _SMALL_SORT = 16


cdef struct Span:
    # One mapping entry or set element in the output buffer.
    Py_ssize_t off
    Py_ssize_t len
    const unsigned char *p


cdef struct PathNode:
    # The containers open on the current path, linked through the C frames,
    # so the cycle check costs no allocation.
    PyObject *obj
    PathNode *up


cdef struct Walk:
    Encoder *enc
    # Stack of owned references: the snapshots of the open dicts and lists.
    PyObject **refs
    Py_ssize_t nrefs
    Py_ssize_t refs_cap
    # Stack of entry spans of the open mappings and sets.
    Span *spans
    Py_ssize_t nspans
    Py_ssize_t spans_cap
    PyObject *refs_inline[_INLINE_REFS]
    Span spans_inline[_INLINE_SPANS]


if _ref.MAX_DEPTH != _MAX_DEPTH or MAX_DEPTH != _MAX_DEPTH:
    # A silent difference would split every deep value's hash between twins.
    raise ImportError("loopcore._fingerprint_c: MAX_DEPTH differs from the reference")


# ---- output buffer ----------------------------------------------------------

cdef void enc_init(Encoder *enc) noexcept:
    enc.data = enc.inline
    enc.size = 0
    enc.capacity = sizeof(enc.inline)
    enc.depth = 0


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


cdef inline void _put_u64(unsigned char *p, uint64_t v) noexcept nogil:
    # Byte by byte so big-endian hosts write the same bytes; compilers fuse it
    # into one store on little-endian ones.
    p[0] = <unsigned char>v
    p[1] = <unsigned char>(v >> 8)
    p[2] = <unsigned char>(v >> 16)
    p[3] = <unsigned char>(v >> 24)
    p[4] = <unsigned char>(v >> 32)
    p[5] = <unsigned char>(v >> 40)
    p[6] = <unsigned char>(v >> 48)
    p[7] = <unsigned char>(v >> 56)


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
    return loopcore_xxh3_64(enc.data, <size_t>enc.size)


# ---- leaves -----------------------------------------------------------------

cdef inline int _put_bytes(Encoder *enc, const char *data, Py_ssize_t n) except -1:
    _put_head(enc, c'b', <uint64_t>n)
    return enc_raw(enc, data, n)


cdef int _put_bytearray(Encoder *enc, PyObject *v) except -1:
    cdef Py_ssize_t n
    while True:
        _reserve(enc, 9 + lc_bytearray_len(v))
        n = lc_bytearray_copy(v, enc.data + enc.size + 9, enc.capacity - enc.size - 9)
        if n >= 0:
            break
    enc.data[enc.size] = c'b'
    _put_u64(enc.data + enc.size + 1, <uint64_t>n)
    enc.size += 9 + n
    return 0


ctypedef fused code_unit:
    uint8_t
    uint16_t
    uint32_t


cdef Py_ssize_t _utf8(const code_unit *s, Py_ssize_t n, unsigned char *o) noexcept nogil:
    # One loop per storage kind (the compiler drops the branches a kind cannot
    # reach). Surrogates get the plain 3-byte form, which is what
    # "surrogatepass" gives.
    cdef Py_ssize_t i, j = 0
    cdef uint32_t c
    for i in range(n):
        c = s[i]
        if c < 0x80:
            o[j] = <unsigned char>c
            j += 1
        elif c < 0x800:
            o[j] = <unsigned char>(0xC0 | (c >> 6))
            o[j + 1] = <unsigned char>(0x80 | (c & 0x3F))
            j += 2
        elif c < 0x10000:
            o[j] = <unsigned char>(0xE0 | (c >> 12))
            o[j + 1] = <unsigned char>(0x80 | ((c >> 6) & 0x3F))
            o[j + 2] = <unsigned char>(0x80 | (c & 0x3F))
            j += 3
        else:
            o[j] = <unsigned char>(0xF0 | (c >> 18))
            o[j + 1] = <unsigned char>(0x80 | ((c >> 12) & 0x3F))
            o[j + 2] = <unsigned char>(0x80 | ((c >> 6) & 0x3F))
            o[j + 3] = <unsigned char>(0x80 | (c & 0x3F))
            j += 4
    return j


cdef int _put_str(Encoder *enc, PyObject *s) except -1:
    # UTF-8 straight from the str's own storage: no intermediate bytes, no
    # UTF-8 copy cached on the str, and lone surrogates need no error path.
    cdef Py_ssize_t n, worst, written
    cdef int kind
    cdef const void *data
    cdef unsigned char *out
    lc_unicode_ready(s)
    n = lc_ulen(s)
    data = lc_udata(s)
    if lc_uascii(s):
        _put_head(enc, c's', <uint64_t>n)
        return enc_raw(enc, data, n)
    kind = lc_ukind(s)
    worst = 2 if kind == PyUnicode_1BYTE_KIND else 3 if kind == PyUnicode_2BYTE_KIND else 4
    if n > (PY_SSIZE_T_MAX - 9) // worst:
        raise MemoryError()
    _reserve(enc, 9 + n * worst)
    out = enc.data + enc.size + 9
    if kind == PyUnicode_1BYTE_KIND:
        written = _utf8(<const uint8_t *>data, n, out)
    elif kind == PyUnicode_2BYTE_KIND:
        written = _utf8(<const uint16_t *>data, n, out)
    else:
        written = _utf8(<const uint32_t *>data, n, out)
    enc.data[enc.size] = c's'
    _put_u64(enc.data + enc.size + 1, <uint64_t>written)
    enc.size += 9 + written
    return 0


cdef int _put_big_int(Encoder *enc, object exact) except -1:
    # Rare: beyond int64. The reference's own _int gives the minimal two's
    # complement without the int-to-decimal digit limit.
    cdef bytes data = _py_int(exact)
    return enc_raw(enc, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


cdef inline int _put_i64(Encoder *enc, int64_t x) except -1:
    return _put_head(enc, c'i', <uint64_t>x)


cdef int _put_int(Encoder *enc, PyObject *v, bint exact) except -1:
    # A real int subclass (IntEnum, ...) is read from its own digits, as
    # int.__index__ does in the reference; its methods are never called.
    cdef int overflow = 0
    cdef long long x = lc_as_longlong(v, &overflow)
    if overflow == 0:
        return _put_i64(enc, <int64_t>x)
    return _put_big_int(enc, <object>v if exact else _int_index(<object>v))


cdef int _put_float(Encoder *enc, double x) except -1:
    cdef uint64_t bits
    if x != x:
        return _put_tag(enc, c'n')
    if x == INFINITY:
        return _put_tag(enc, c'+')
    if x == -INFINITY:
        return _put_tag(enc, c'-')
    if x == floor(x):
        # An integral float encodes as the int it equals; 2**63 itself is
        # outside int64, hence the half-open range.
        if -9223372036854775808.0 <= x < 9223372036854775808.0:
            return _put_i64(enc, <int64_t>x)
        return _put_big_int(enc, PyLong_FromDouble(x))
    memcpy(&bits, &x, 8)
    return _put_head(enc, c'f', bits)


cdef int _put_float_subclass(Encoder *enc, PyObject *v) except -1:
    # The reference calls float(value), which runs an overriding __float__.
    # Where that raises the reference raises too; this twin must not, so it
    # falls back to the stored value.
    cdef double x
    cdef object exact
    try:
        exact = PyNumber_Float(<object>v)
        x = lc_fval(<PyObject *>exact)
    except Exception:
        x = lc_fval(v)
    return _put_float(enc, x)


cdef int _put_leaf(Encoder *enc, object value) except -1:
    # Only for types the reference's _leaf handles beyond the fast paths
    # (memoryview, exceptions, opaque objects, bytes subclasses).
    cdef object data
    try:
        data = _leaf(value)
    except Exception:
        # The reference raises here (an object whose __class__ claims to be a
        # str, say); encode it as the opaque object it really is.
        try:
            data = _opaque(value)
        except Exception:
            data = _LAST_RESORT
    if type(data) is not bytes:
        data = _LAST_RESORT
    return enc_raw(enc, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


# ---- containers -------------------------------------------------------------

cdef inline int _refs_reserve(Walk *w, Py_ssize_t extra) except -1:
    if w.refs_cap - w.nrefs >= extra:
        return 0
    return _refs_grow(w, extra)


cdef int _refs_grow(Walk *w, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap
    cdef PyObject **refs
    if extra > PY_SSIZE_T_MAX // <Py_ssize_t>sizeof(PyObject *) - w.nrefs:
        raise MemoryError()
    cap = w.refs_cap
    while cap < w.nrefs + extra:
        cap *= 2
    if w.refs == w.refs_inline:
        refs = <PyObject **>PyMem_Malloc(<size_t>cap * sizeof(PyObject *))
        if refs == NULL:
            raise MemoryError()
        memcpy(refs, w.refs, <size_t>w.nrefs * sizeof(PyObject *))
    else:
        refs = <PyObject **>PyMem_Realloc(w.refs, <size_t>cap * sizeof(PyObject *))
        if refs == NULL:
            raise MemoryError()
    w.refs = refs
    w.refs_cap = cap
    return 0


cdef void _refs_release(Walk *w, Py_ssize_t base) noexcept:
    # Popped before the decrefs: a finaliser run by one may start another
    # (independent) encode, but must never see these slots as live.
    cdef Py_ssize_t i, top = w.nrefs
    w.nrefs = base
    for i in range(base, top):
        lc_decref(w.refs[i])


cdef inline Py_ssize_t _spans_push(Walk *w, Py_ssize_t n) except -1:
    cdef Py_ssize_t base = w.nspans
    if w.spans_cap - w.nspans < n:
        _spans_grow(w, n)
    w.nspans += n
    return base


cdef int _spans_grow(Walk *w, Py_ssize_t n) except -1:
    cdef Py_ssize_t cap
    cdef Span *spans
    if n > PY_SSIZE_T_MAX // <Py_ssize_t>sizeof(Span) - w.nspans:
        raise MemoryError()
    cap = w.spans_cap
    while cap < w.nspans + n:
        cap *= 2
    if w.spans == w.spans_inline:
        spans = <Span *>PyMem_Malloc(<size_t>cap * sizeof(Span))
        if spans == NULL:
            raise MemoryError()
        memcpy(spans, w.spans, <size_t>w.nspans * sizeof(Span))
    else:
        spans = <Span *>PyMem_Realloc(w.spans, <size_t>cap * sizeof(Span))
        if spans == NULL:
            raise MemoryError()
    w.spans = spans
    w.spans_cap = cap
    return 0


cdef inline int _span_cmp(const Span *a, const Span *b) noexcept nogil:
    # Python's bytes order: bytewise, then the shorter prefix first.
    cdef Py_ssize_t n = a.len if a.len < b.len else b.len
    cdef int r = memcmp(a.p, b.p, <size_t>n)
    if r != 0:
        return r
    return (a.len > b.len) - (a.len < b.len)


cdef int _span_qcmp(const void *a, const void *b) noexcept nogil:
    return _span_cmp(<const Span *>a, <const Span *>b)


cdef int _sort_entries(Walk *w, Py_ssize_t base, Py_ssize_t n) except -1:
    """Put the last ``n`` entries written (spans from ``base``) in byte order."""
    cdef Encoder *enc = w.enc
    cdef Span *spans = w.spans + base
    cdef Span tmp
    cdef Py_ssize_t i, j, start, end, region
    cdef unsigned char *out
    cdef bint ordered = True
    if n < 2:
        return 0
    end = enc.size
    for i in range(n):
        spans[i].len = (spans[i + 1].off if i + 1 < n else end) - spans[i].off
        spans[i].p = enc.data + spans[i].off
        if ordered and i and _span_cmp(&spans[i - 1], &spans[i]) > 0:
            ordered = False
    if ordered:
        return 0
    # The entries are sorted into the free space past the end, then moved
    # back: the buffer is the scratch space, so no other allocation.
    start = spans[0].off
    region = end - start
    _reserve(enc, region)
    for i in range(n):
        spans[i].p = enc.data + spans[i].off
    if n <= _SMALL_SORT:
        for i in range(1, n):
            tmp = spans[i]
            j = i
            while j > 0 and _span_cmp(&spans[j - 1], &tmp) > 0:
                spans[j] = spans[j - 1]
                j -= 1
            spans[j] = tmp
    else:
        qsort(spans, <size_t>n, sizeof(Span), _span_qcmp)
    out = enc.data + end
    for i in range(n):
        memcpy(out, spans[i].p, <size_t>spans[i].len)
        out += spans[i].len
    memcpy(enc.data + start, enc.data + end, <size_t>region)
    return 0


cdef inline bint _on_path(PathNode *path, PyObject *v) noexcept:
    while path != NULL:
        if path.obj == v:
            return True
        path = path.up
    return False


cdef int _encode_dict(Walk *w, PyObject *v, int depth, PathNode *path) except -1:
    cdef PathNode node
    cdef Py_ssize_t base = w.nrefs, n, i, spans
    node.obj = v
    node.up = path
    while True:
        _refs_reserve(w, 2 * lc_dict_len(v))
        n = lc_dict_pairs(v, w.refs + base, (w.refs_cap - base) // 2)
        if n >= 0:
            break
    w.nrefs = base + 2 * n
    if n <= _SMALL_SORT and _encode_ascii_keyed(w, base, n, depth, &node):
        _refs_release(w, base)
        return 0
    _put_head(w.enc, c'd', <uint64_t>n)
    spans = _spans_push(w, n)
    for i in range(n):
        # w.refs and w.spans may move while children push their own: index
        # them afresh each time.
        w.spans[spans + i].off = w.enc.size
        _item(w, w.refs[base + 2 * i], depth + 1, &node)
        _item(w, w.refs[base + 2 * i + 1], depth + 1, &node)
    _sort_entries(w, spans, n)
    w.nspans = spans
    _refs_release(w, base)
    return 0


cdef int _encode_ascii_keyed(
    Walk *w, Py_ssize_t base, Py_ssize_t n, int depth, PathNode *node
) except -1:
    """A small dict whose keys are all ASCII str: put the entries in order first.

    Distinct keys encode distinctly, so ordering the keys orders the entries,
    and they can be written in place: no spans, no copying. Returns 0 (nothing
    written) when a key is not ASCII str.
    """
    cdef int order[_SMALL_SORT]
    cdef Py_ssize_t i, j
    cdef int tmp
    cdef PyObject **refs = w.refs + base
    for i in range(n):
        if not lc_is_ascii_str(refs[2 * i]):
            return 0
        tmp = <int>i
        j = i
        while j > 0 and lc_ascii_key_before(refs[2 * tmp], refs[2 * order[j - 1]]):
            order[j] = order[j - 1]
            j -= 1
        order[j] = tmp
    _put_head(w.enc, c'd', <uint64_t>n)
    for i in range(n):
        # w.refs may move while a value pushes its own: index it afresh.
        _put_str(w.enc, w.refs[base + 2 * order[i]])
        _item(w, w.refs[base + 2 * order[i] + 1], depth + 1, node)
    return 1


cdef int _encode_list(Walk *w, PyObject *v, int depth, PathNode *path) except -1:
    cdef PathNode node
    cdef Py_ssize_t base = w.nrefs, n, i
    node.obj = v
    node.up = path
    while True:
        _refs_reserve(w, lc_list_len(v))
        n = lc_list_items(v, w.refs + base, w.refs_cap - base)
        if n >= 0:
            break
    w.nrefs = base + n
    _put_head(w.enc, c'l', <uint64_t>n)
    for i in range(n):
        _item(w, w.refs[base + i], depth + 1, &node)
    _refs_release(w, base)
    return 0


cdef int _encode_tuple(Walk *w, PyObject *v, int depth, PathNode *path) except -1:
    # Immutable, and kept alive by whoever holds it: no snapshot needed.
    cdef PathNode node
    cdef Py_ssize_t n = lc_tuple_len(v), i
    node.obj = v
    node.up = path
    _put_head(w.enc, c'l', <uint64_t>n)
    for i in range(n):
        _item(w, lc_tuple_item(v, i), depth + 1, &node)
    return 0


cdef int _encode_flat(
    Walk *w, PyObject *v, int kind, list flat, int depth, PathNode *path
) except -1:
    """A container from the reference's ``_children``: ``flat`` is its own fresh list."""
    cdef PathNode node
    cdef Py_ssize_t n = len(flat), count, i, spans
    cdef PyObject *items = <PyObject *>flat
    node.obj = v
    node.up = path
    if kind == _MAP:
        count = n // 2
        _put_head(w.enc, c'd', <uint64_t>count)
        spans = _spans_push(w, count)
        for i in range(count):
            w.spans[spans + i].off = w.enc.size
            _item(w, lc_list_item(items, 2 * i), depth + 1, &node)
            _item(w, lc_list_item(items, 2 * i + 1), depth + 1, &node)
        _sort_entries(w, spans, count)
        w.nspans = spans
        return 0
    _put_head(w.enc, c'l', <uint64_t>n)
    if kind == _SET:
        spans = _spans_push(w, n)
        for i in range(n):
            w.spans[spans + i].off = w.enc.size
            _item(w, lc_list_item(items, i), depth + 1, &node)
        _sort_entries(w, spans, n)
        w.nspans = spans
        return 0
    for i in range(n):
        _item(w, lc_list_item(items, i), depth + 1, &node)
    return 0


cdef int _encode_other(Walk *w, PyObject *v, int depth, PathNode *path) except -1:
    """Every type without an exact fast path, in the reference's order of checks."""
    cdef object value
    cdef object shape
    if lc_is_str(v):
        return _put_str(w.enc, v)
    if lc_is_int(v):
        return _put_int(w.enc, v, False)
    if lc_is_float(v):
        return _put_float_subclass(w.enc, v)
    if _on_path(path, v):
        return _put_tag(w.enc, c'C')
    value = <object>v
    try:
        shape = _children(value, None)
    except Exception:
        shape = None
    if shape is None:
        return _put_leaf(w.enc, value)
    # After _children, as in the reference: its side effects (model_dump)
    # and its failures (leaf form) happen at the limit too.
    if depth >= _MAX_DEPTH:
        return _put_tag(w.enc, c'D')
    return _encode_flat(w, v, shape[0], shape[1], depth, path)


cdef int _item(Walk *w, PyObject *v, int depth, PathNode *path) except -1:
    cdef int kind = lc_kind(v)
    if kind == LC_STR:
        return _put_str(w.enc, v)
    if kind == LC_INT:
        return _put_int(w.enc, v, True)
    if kind == LC_DICT or kind == LC_LIST or kind == LC_TUPLE or kind == LC_SET:
        if _on_path(path, v):
            return _put_tag(w.enc, c'C')
        if depth >= _MAX_DEPTH:
            return _put_tag(w.enc, c'D')
        if kind == LC_DICT:
            return _encode_dict(w, v, depth, path)
        if kind == LC_LIST:
            return _encode_list(w, v, depth, path)
        if kind == LC_TUPLE:
            return _encode_tuple(w, v, depth, path)
        return _encode_flat(w, v, _SET, PySequence_List(<object>v), depth, path)
    if kind == LC_FLOAT:
        return _put_float(w.enc, lc_fval(v))
    if kind == LC_NONE:
        return _put_tag(w.enc, c'N')
    if kind == LC_TRUE:
        return _put_tag(w.enc, c'T')
    if kind == LC_FALSE:
        return _put_tag(w.enc, c'F')
    if kind == LC_BYTES:
        return _put_bytes(w.enc, lc_bytes_data(v), lc_bytes_len(v))
    if kind == LC_BYTEARRAY:
        return _put_bytearray(w.enc, v)
    return _encode_other(w, v, depth, path)


cdef int enc_value(Encoder *enc, object value) except -1:
    cdef Walk w
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

def encode(value, item_filter=None):
    """The canonical byte encoding of ``value`` (SPEC §2). Never raises."""
    cdef Encoder enc
    if item_filter is not None:
        # The key filter serves outbound-send details only: a rare path.
        return _ref.encode(value, item_filter)
    enc_init(&enc)
    try:
        enc_value(&enc, value)
        return PyBytes_FromStringAndSize(<char *>enc.data, enc.size)
    finally:
        enc_free(&enc)


def fingerprint(value, domain=b""):
    """xxh3-64 of ``domain`` followed by the canonical encoding of ``value``."""
    cdef Encoder enc
    if type(domain) is not bytes:
        # Whatever the reference accepts (a bytearray) or raises on.
        return _ref._xxh3(domain + encode(value))
    enc_init(&enc)
    try:
        enc_raw(&enc, PyBytes_AS_STRING(domain), PyBytes_GET_SIZE(domain))
        enc_value(&enc, value)
        return enc_digest(&enc)
    finally:
        enc_free(&enc)

# How is a str, bytes, int or float written into the encoder? (included by _fingerprint_c.pyx)

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.object cimport PyTypeObject
from cpython.number cimport PyNumber_Float
from libc.math cimport INFINITY, floor
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy


cdef extern from "_wrap_start.h":
    const char *LC_WRAP_START
    bint lc_has_wrap_start(PyObject *s) noexcept


cdef extern from *:
    """
    /* A bytearray's bytes into ``out``, or -1 when it holds more than ``cap``:
       another thread may resize it (free-threaded build) between the size
       check and the copy. */
    /* Characters of the short-str path (far below the streaming threshold). */
    #define LC_SHORT_ASCII 256

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

    /* An int that fits one digit, read straight from its storage (1), else 0:
       the value PyLong_AsLongLongAndOverflow would give, without the call. */
    static inline int lc_compact_int(PyObject *v, long long *out) {
    #if PY_VERSION_HEX >= 0x030C0000
        if (!PyUnstable_Long_IsCompact((PyLongObject *)v))
            return 0;
        *out = (long long)PyUnstable_Long_CompactValue((PyLongObject *)v);
        return 1;
    #else
        Py_ssize_t size = Py_SIZE(v);
        if (size < -1 || size > 1)
            return 0;
        *out = size ? (long long)size * (long long)((PyLongObject *)v)->ob_digit[0] : 0;
        return 1;
    #endif
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

    /* The UTF-8 length of n code units of one storage kind (what _utf8 will
       write): plain loops the compiler vectorises; Latin-1 counts the bytes
       with the high bit set, eight at a time. */
    static Py_ssize_t lc_utf8_len_1(const uint8_t *s, Py_ssize_t n) {
        Py_ssize_t i = 0, extra = 0;
        uint64_t word;
        for (; i + 8 <= n; i += 8) {
            memcpy(&word, s + i, 8);
            word = (word >> 7) & 0x0101010101010101ULL;
            extra += (Py_ssize_t)((word * 0x0101010101010101ULL) >> 56);
        }
        for (; i < n; i++)
            extra += s[i] >> 7;
        return n + extra;
    }

    static Py_ssize_t lc_utf8_len_2(const uint16_t *s, Py_ssize_t n) {
        Py_ssize_t i, extra = 0;
        for (i = 0; i < n; i++)
            extra += (s[i] >= 0x80) + (s[i] >= 0x800);
        return n + extra;
    }

    static Py_ssize_t lc_utf8_len_4(const uint32_t *s, Py_ssize_t n) {
        Py_ssize_t i, extra = 0;
        for (i = 0; i < n; i++)
            extra += (s[i] >= 0x80) + (s[i] >= 0x800) + (s[i] >= 0x10000);
        return n + extra;
    }


    /* A short compact-ASCII str written whole (tag, length, bytes) when it
       fits the ``room`` left in the buffer: the bytes written, else 0. Most
       keys, names and small values take this path: one check of the room,
       no streaming test, the characters copied inline. */
    static inline Py_ssize_t lc_short_ascii(PyObject *s, unsigned char *out, Py_ssize_t room) {
        Py_ssize_t n;
        if (!PyUnicode_IS_COMPACT_ASCII(s))
            return 0;
        n = PyUnicode_GET_LENGTH(s);
        if (n > LC_SHORT_ASCII || n + 9 > room)
            return 0;
        out[0] = 's';
        lc_put_u64(out + 1, (uint64_t)n);
        lc_copy(out + 9, (const void *)(((PyASCIIObject *)s) + 1), (size_t)n);
        return n + 9;
    }
    """
    Py_ssize_t lc_short_ascii(PyObject *s, unsigned char *out, Py_ssize_t room) noexcept
    Py_ssize_t lc_bytearray_copy(PyObject *b, unsigned char *out, Py_ssize_t cap) noexcept
    int lc_unicode_ready(PyObject *s) except -1
    bint lc_compact_int(PyObject *v, long long *out) noexcept
    Py_ssize_t lc_utf8_len_1(const uint8_t *s, Py_ssize_t n) noexcept nogil
    Py_ssize_t lc_utf8_len_2(const uint16_t *s, Py_ssize_t n) noexcept nogil
    Py_ssize_t lc_utf8_len_4(const uint32_t *s, Py_ssize_t n) noexcept nogil


cdef extern from "Python.h":
    # Declared on PyObject* so the hot path never makes temporary references.
    Py_ssize_t lc_ulen "PyUnicode_GET_LENGTH"(PyObject *o) noexcept
    int lc_ukind "PyUnicode_KIND"(PyObject *o) noexcept
    void *lc_udata "PyUnicode_DATA"(PyObject *o) noexcept
    bint lc_uascii "PyUnicode_IS_ASCII"(PyObject *o) noexcept
    int PyUnicode_1BYTE_KIND
    int PyUnicode_2BYTE_KIND
    long long lc_as_longlong "PyLong_AsLongLongAndOverflow"(PyObject *o, int *overflow) except? -1
    double lc_fval "PyFloat_AS_DOUBLE"(PyObject *o) noexcept
    Py_ssize_t lc_bytearray_len "PyByteArray_GET_SIZE"(PyObject *o) noexcept
    object PyLong_FromDouble(double v)
    PyTypeObject *lc_type "Py_TYPE"(PyObject *o) noexcept
    bint lc_is_exact_str "PyUnicode_CheckExact"(PyObject *o) noexcept


# The reference's own int encoding and index protocol, for the ints that
# int64 cannot hold and for int subclasses.
cdef object _py_int = _leaves._int
cdef object _int_index = int.__index__


cdef inline int _put_bytes(Encoder *enc, const char *data, Py_ssize_t n) except -1:
    _put_head(enc, c'b', <uint64_t>n)
    return _put_payload(enc, data, n)


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


cdef Py_ssize_t _utf8_kind(
    int kind, const void *data, Py_ssize_t start, Py_ssize_t n, unsigned char *o
) noexcept nogil:
    # _utf8 of code units [start, start + n) of a str's storage; ``o`` NULL: the length.
    if kind == PyUnicode_1BYTE_KIND:
        if o == NULL:
            return lc_utf8_len_1(<const uint8_t *>data + start, n)
        return _utf8(<const uint8_t *>data + start, n, o)
    if kind == PyUnicode_2BYTE_KIND:
        if o == NULL:
            return lc_utf8_len_2(<const uint16_t *>data + start, n)
        return _utf8(<const uint16_t *>data + start, n, o)
    if o == NULL:
        return lc_utf8_len_4(<const uint32_t *>data + start, n)
    return _utf8(<const uint32_t *>data + start, n, o)


cdef enum:
    # Non-ASCII text this long, when the encoder streams, is measured first,
    # then written in pieces of _TEXT_PIECE code units, each hashed at once:
    # its UTF-8 is never held whole.
    _LONG_TEXT = 1 << 16
    _TEXT_PIECE = 1 << 16


cdef int _put_long_text(Encoder *enc, int kind, const void *data, Py_ssize_t n) except -1:
    cdef Py_ssize_t total, start = 0, piece
    with nogil:
        total = _utf8_kind(kind, data, 0, n, NULL)
    _put_head(enc, c's', <uint64_t>total)
    if total < _STREAM_MIN:
        _reserve(enc, total)
        with nogil:
            enc.size += _utf8_kind(kind, data, 0, n, enc.data + enc.size)
        return 0
    while start < n:
        piece = n - start if n - start < _TEXT_PIECE else _TEXT_PIECE
        _reserve(enc, 4 * piece)
        with nogil:
            enc.size += _utf8_kind(kind, data, start, piece, enc.data + enc.size)
            _absorb(enc)
        start += piece
    return 0


cdef inline int _put_str(Encoder *enc, PyObject *s) except -1:
    # Inline at every caller: most strs are short ASCII (keys, names, small
    # values), written in one step; a call to the general writer (whose
    # prologue alone cost more than the copy) only for the rest.
    cdef Py_ssize_t n = lc_short_ascii(s, enc.data + enc.size, enc.capacity - enc.size)
    if n:
        enc.size += n
        return 0
    return _put_str_long(enc, s)


cdef int _put_str_long(Encoder *enc, PyObject *s) except -1:
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
        return _put_payload(enc, data, n)
    kind = lc_ukind(s)
    if n >= _LONG_TEXT and _can_stream(enc):
        return _put_long_text(enc, kind, data, n)
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


# SPEC §8.5: the texts the reference's nonce normaliser may change.
cdef Py_ssize_t _MIN_WRAPPED = _nonce.MIN_WRAPPED
cdef object _normalised = _leaves._normalised
cdef object _exact_str = str.__str__
cdef type _VERBATIM = _nonce.Verbatim

if _nonce.START.encode() != <bytes>LC_WRAP_START:
    raise ImportError("loopcore._fingerprint_c: the wrapper marker differs from _nonce's")


cdef bint str_wrapped(object text) except -1:
    cdef PyObject *s = <PyObject *>text
    if not lc_is_str(s):
        return True  # not really a str (a __class__ that lies): let the reference decide
    lc_unicode_ready(s)
    return lc_ulen(s) >= _MIN_WRAPPED and lc_has_wrap_start(s)


cdef int _put_text(Encoder *enc, PyObject *s) except -1:
    """A str value in nonces mode: normalised first when it may hold a wrapper."""
    cdef object text
    if lc_type(s) == <PyTypeObject *>_VERBATIM or not str_wrapped(<object>s):
        return _put_str(enc, s)
    # Rare: a wrapper is there. The reference normalises it (an exact copy of a
    # subclass first, so none of its methods run), and never raises.
    text = <object>s if lc_is_exact_str(s) else _exact_str(<object>s)
    text = _normalised(text)
    return _put_str(enc, <PyObject *>text)


cdef int _put_big_int(Encoder *enc, object exact) except -1:
    # Rare: beyond int64. The reference's own _int gives the minimal two's
    # complement without the int-to-decimal digit limit.
    cdef bytes data = _py_int(exact)
    return enc_raw(enc, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


cdef inline int _put_i64(Encoder *enc, int64_t x) except -1:
    return _put_head(enc, c'i', <uint64_t>x)


cdef inline int _put_int(Encoder *enc, PyObject *v, bint exact) except -1:
    # Inline at every caller for the common one-digit int; the rest out of line.
    cdef long long x
    if lc_compact_int(v, &x):
        return _put_i64(enc, <int64_t>x)
    return _put_wide_int(enc, v, exact)


cdef int _put_wide_int(Encoder *enc, PyObject *v, bint exact) except -1:
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

# In what order are dict entries and set elements written? (included by _fingerprint_c.pyx)
#
# The reference sorts the encoded entries as bytes, an order that exists for
# any mix of key types; this twin sorts the same bytes, in its output buffer.

from libc.stdint cimport uint64_t
from libc.stdlib cimport qsort
from libc.string cimport memcmp, memcpy


cdef extern from "_dict_entries.h":
    int dict_entries_verify "lc_dict_entries_verify" () except -1


# The entry tables are read (lc_dict_borrow) once they read as PyDict_Next walks.
dict_entries_verify()


cdef extern from *:
    """
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

    /* Borrowed references to a dict's pairs, or -1 when it holds more than
       ``cap`` of them. GIL builds only (-1 on the others): there, a dict
       cannot change while no Python code runs. */
    static Py_ssize_t lc_dict_borrow(PyObject *d, PyObject **out, Py_ssize_t cap) {
    #ifdef Py_GIL_DISABLED
        (void)d; (void)out; (void)cap;
        return -1;
    #else
        return lc_dict_entries(d, out, cap);
    #endif
    }
    """
    bint lc_ascii_key_before(PyObject *a, PyObject *b) noexcept
    bint lc_is_ascii_str(PyObject *o) noexcept
    Py_ssize_t lc_dict_borrow(PyObject *d, PyObject **out, Py_ssize_t cap) noexcept


cdef enum:
    # Below this, insertion sort beats qsort's call-per-compare.
    _SMALL_SORT = 16


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


cdef extern from "_fingerprint_flat.h":
    Py_ssize_t lc_flat_dict(
        PyObject **items, Py_ssize_t n, Py_ssize_t min_wrapped, unsigned char *out,
        Py_ssize_t room,
    ) noexcept


cdef int enc_flat_dict(Encoder *enc, PyObject **items, Py_ssize_t n) except -1:
    """A dict's ``n`` (key, value) pairs in ``items``, ASCII str keys and scalar values.

    The bytes ``_encode_dict`` writes for such a dict, without its snapshot:
    the caller holds the references. Returns 0 (nothing written) otherwise.
    """
    if _flat_dict_at_once(enc, items, n):
        return 1
    return _flat_dict_general(enc, items, n)


cdef inline int _flat_dict_at_once(Encoder *enc, PyObject **items, Py_ssize_t n) except -1:
    """The common flat dict written in one pass (``_fingerprint_flat.h``): 1, else 0."""
    # Nonces mode: a str value long enough to hold a wrapper is declined when it does.
    cdef Py_ssize_t min_wrapped = _MIN_WRAPPED if enc.nonces else -1
    cdef Py_ssize_t wrote = lc_flat_dict(
        items, n, min_wrapped, enc.data + enc.size, enc.capacity - enc.size
    )
    if wrote < 0:  # the bytes it needs, more than the room left
        _reserve(enc, -wrote)
        wrote = lc_flat_dict(items, n, min_wrapped, enc.data + enc.size, enc.capacity - enc.size)
    if wrote <= 0:
        return 0
    enc.size += wrote
    return 1


cdef int _flat_dict_general(Encoder *enc, PyObject **items, Py_ssize_t n) except -1:
    """``enc_flat_dict`` for what the one-pass writer declines (non-ASCII text, wide ints)."""
    cdef int order[_SMALL_SORT]
    cdef Py_ssize_t i, j
    cdef int tmp, kind
    cdef PyObject *v
    if n > _SMALL_SORT:
        return 0
    for i in range(n):
        kind = lc_kind(items[2 * i + 1])
        if not lc_is_ascii_str(items[2 * i]) or not (
            kind == LC_STR or kind == LC_INT or kind == LC_FLOAT or kind == LC_NONE
            or kind == LC_TRUE or kind == LC_FALSE
        ):
            return 0
        tmp = <int>i
        j = i
        while j > 0 and lc_ascii_key_before(items[2 * tmp], items[2 * order[j - 1]]):
            order[j] = order[j - 1]
            j -= 1
        order[j] = tmp
    _put_head(enc, c'd', <uint64_t>n)
    for i in range(n):
        _put_str(enc, items[2 * order[i]])
        v = items[2 * order[i] + 1]
        kind = lc_kind(v)
        if kind == LC_STR:
            if enc.nonces:
                _put_text(enc, v)
            else:
                _put_str(enc, v)
        elif kind == LC_INT:
            _put_int(enc, v, True)
        elif kind == LC_FLOAT:
            _put_float(enc, lc_fval(v))
        elif kind == LC_NONE:
            _put_tag(enc, c'N')
        elif kind == LC_TRUE:
            _put_tag(enc, c'T')
        else:
            _put_tag(enc, c'F')
    return 1


cdef inline bint _runs_no_code(PyObject *v, int nonces) except -1:
    """Is ``v`` a scalar whose encoding runs no Python code (no big int, no wrapper)?"""
    cdef int kind = lc_kind(v)
    cdef long long x
    cdef double f
    if kind == LC_STR:
        return not nonces or not str_wrapped(<object>v)
    if kind == LC_INT:
        return lc_compact_int(v, &x)
    if kind == LC_FLOAT:
        f = lc_fval(v)
        return f != f or f != floor(f) or -9223372036854775808.0 <= f < 9223372036854775808.0
    return kind == LC_NONE or kind == LC_TRUE or kind == LC_FALSE


cdef int _encode_flat_borrowed(Encoder *enc, PyObject *d) except -1:
    """enc_flat_dict of a top-level dict straight from its own entries (1), else 0.

    Borrowed references serve because nothing it writes runs Python code: the
    dict cannot change meanwhile (``lc_dict_borrow`` says where that holds).
    """
    cdef PyObject *items[2 * _SMALL_SORT]
    cdef Py_ssize_t n, i
    if enc.depth >= _MAX_DEPTH:
        return 0
    n = lc_dict_borrow(d, items, _SMALL_SORT)
    if n < 0:
        return 0
    # The one-pass writer checks every entry itself.
    if _flat_dict_at_once(enc, items, n):
        return 1
    for i in range(n):
        if not _runs_no_code(items[2 * i + 1], enc.nonces):
            return 0
    return _flat_dict_general(enc, items, n)

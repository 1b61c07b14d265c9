# How is a container walked (snapshot, cycle and depth checks)? (included by _fingerprint_c.pyx)

from cpython.mem cimport PyMem_Malloc, PyMem_Realloc
from libc.stdint cimport uint64_t
from libc.string cimport memcpy


cdef extern from *:
    """
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
    """
    enum:
        LC_OTHER, LC_STR, LC_INT, LC_DICT, LC_LIST, LC_TUPLE, LC_FLOAT
        LC_NONE, LC_TRUE, LC_FALSE, LC_BYTES, LC_BYTEARRAY, LC_SET
    int lc_kind(PyObject *o) noexcept
    Py_ssize_t lc_dict_pairs(PyObject *d, PyObject **out, Py_ssize_t cap) noexcept
    Py_ssize_t lc_list_items(PyObject *l, PyObject **out, Py_ssize_t cap) noexcept


cdef extern from "Python.h":
    # Declared on PyObject* so the hot path never makes temporary references.
    char *lc_bytes_data "PyBytes_AS_STRING"(PyObject *o) noexcept
    Py_ssize_t lc_bytes_len "PyBytes_GET_SIZE"(PyObject *o) noexcept
    Py_ssize_t lc_tuple_len "PyTuple_GET_SIZE"(PyObject *o) noexcept
    PyObject *lc_tuple_item "PyTuple_GET_ITEM"(PyObject *o, Py_ssize_t i) noexcept
    Py_ssize_t lc_dict_len "PyDict_GET_SIZE"(PyObject *o) noexcept
    Py_ssize_t lc_list_len "PyList_GET_SIZE"(PyObject *o) noexcept
    PyObject *lc_list_item "PyList_GET_ITEM"(PyObject *o, Py_ssize_t i) noexcept
    void lc_decref "Py_DECREF"(PyObject *o) noexcept
    object PySequence_List(object o)


cdef enum:
    # Must equal the shape codes the reference's ``_children`` returns.
    _SEQ = 0
    _MAP = 1
    _SET = 2
    # Enough for the values a tool call carries without touching the heap.
    _INLINE_REFS = 32
    _INLINE_SPANS = 16


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
    # The entries are sorted where they are written: none may be hashed away.
    w.enc.sorting += 1
    for i in range(n):
        # w.refs and w.spans may move while children push their own: index
        # them afresh each time.
        w.spans[spans + i].off = w.enc.size
        _key(w, w.refs[base + 2 * i], depth + 1, &node)
        _item(w, w.refs[base + 2 * i + 1], depth + 1, &node)
    _sort_entries(w, spans, n)
    w.enc.sorting -= 1
    w.nspans = spans
    _refs_release(w, base)
    return 0


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
        w.enc.sorting += 1
        for i in range(count):
            w.spans[spans + i].off = w.enc.size
            _key(w, lc_list_item(items, 2 * i), depth + 1, &node)
            _item(w, lc_list_item(items, 2 * i + 1), depth + 1, &node)
        _sort_entries(w, spans, count)
        w.enc.sorting -= 1
        w.nspans = spans
        return 0
    _put_head(w.enc, c'l', <uint64_t>n)
    if kind == _SET:
        spans = _spans_push(w, n)
        w.enc.sorting += 1
        for i in range(n):
            w.spans[spans + i].off = w.enc.size
            _item(w, lc_list_item(items, i), depth + 1, &node)
        _sort_entries(w, spans, n)
        w.enc.sorting -= 1
        w.nspans = spans
        return 0
    for i in range(n):
        _item(w, lc_list_item(items, i), depth + 1, &node)
    return 0


cdef inline int _key(Walk *w, PyObject *v, int depth, PathNode *path) except -1:
    """A mapping key: never nonce-normalised, nor anything inside it (SPEC §8.5)."""
    cdef int saved = w.enc.nonces
    if saved == 0:
        return _item(w, v, depth, path)
    if lc_kind(v) == LC_STR:
        return _put_str(w.enc, v)
    w.enc.nonces = 0
    try:
        _item(w, v, depth, path)
    finally:
        w.enc.nonces = saved
    return 0


cdef int _item(Walk *w, PyObject *v, int depth, PathNode *path) except -1:
    cdef int kind = lc_kind(v)
    if kind == LC_STR:
        if w.enc.nonces:
            return _put_text(w.enc, v)
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

# How is a value with no exact-type fast path encoded? (included by _fingerprint_c.pyx)
#
# Dataclasses, ``model_dump()`` objects, buffers and arrays (the ``a`` tag), and
# reprs with their addresses stripped are the reference's own code, called from
# here, so they cannot drift from the Python twin; this file keeps the
# reference's order of checks and catches what the reference would raise.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE


cdef extern from "Python.h":
    # Subclass checks on the borrowed pointer, without a temporary reference.
    bint lc_is_str "PyUnicode_Check"(PyObject *o) noexcept
    bint lc_is_int "PyLong_Check"(PyObject *o) noexcept
    bint lc_is_float "PyFloat_Check"(PyObject *o) noexcept


# The reference's helpers, for the types this module does not encode itself.
cdef object _children = _ref._children
cdef object _leaf_parts = _leaves._leaf_parts
cdef object _opaque = _leaves._opaque
# Used only if even the reference's helpers raise (a MemoryError): encoding
# must not raise.
cdef bytes _LAST_RESORT = _leaves._LAST_RESORT


cdef int _put_leaf(Encoder *enc, object value) except -1:
    # Only for types the reference's _leaf_parts handles beyond the fast paths
    # (memoryview, exceptions, buffers and arrays, opaque objects, subclasses).
    # Its chunks are written in order; a large payload chunk is hashed in place.
    cdef object parts
    cdef object part
    try:
        # An exception's message is nonce-normalised too (the nonces mode).
        parts = _leaf_parts(value, enc.nonces != 0)
    except Exception:
        try:
            parts = (_opaque(value),)
        except Exception:
            parts = (_LAST_RESORT,)
    if type(parts) is not tuple:
        parts = (_LAST_RESORT,)
    for part in <tuple>parts:
        if type(part) is not bytes:
            part = _LAST_RESORT
        _put_payload(enc, PyBytes_AS_STRING(part), PyBytes_GET_SIZE(part))
    return 0


cdef int _encode_other(Walk *w, PyObject *v, int depth, PathNode *path) except -1:
    """Every type without an exact fast path, in the reference's order of checks."""
    cdef object value
    cdef object shape
    if lc_is_str(v):
        if w.enc.nonces:
            return _put_text(w.enc, v)
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

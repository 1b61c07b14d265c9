# How is the hash of a flat args dict remembered from one call to the next?
# (included by _percall_c.pyx: ``before_call`` and ``after_call`` of the same dict
# hash it once; a memo holds owned references, so identity means the same value.
# DICT_VERSIONS, dict_version, dict_entries, ref_take and ref_drop come from
# _outcome_plain.pxi, included before.)


from cpython.exc cimport PyErr_Fetch, PyErr_Restore


cdef extern from *:
    """
    /* Is ``s``, an exact str, the ASCII text ``lit`` of length ``n``? A str
       that is not compact ASCII answers -1: the caller compares it the slow way. */
    static inline int loopcore_ascii_is(PyObject *s, const char *lit, Py_ssize_t n) {
        if (!PyUnicode_IS_COMPACT_ASCII(s))
            return -1;
        return PyUnicode_GET_LENGTH(s) == n && memcmp(PyUnicode_DATA(s), lit, (size_t)n) == 0;
    }
    """
    int ascii_is "loopcore_ascii_is" (PyObject *s, const char *lit, Py_ssize_t n) noexcept


cdef struct Memo:
    # A flat args dict and its hash, with owned references to the dict, the
    # tool name and every key and value (all immutable scalars).
    PyObject *args
    PyObject *tool
    PyObject *items[2 * MEMO_ENTRIES]
    Py_ssize_t size
    uint64_t hash
    # The dict's version tag when taken (with DICT_VERSIONS).
    uint64_t version


cdef bint memo_take(Memo *memo, object tool_name, dict args) noexcept:
    """Fill ``memo`` with owned references when every entry qualifies."""
    cdef Py_ssize_t i, n = dict_entries(<PyObject*>args, memo.items, MEMO_ENTRIES)
    if n < 0:
        return False
    for i in range(n):
        if not (is_immutable_scalar(memo.items[2 * i + 1]) and PyUnicode_CheckExact(
            <object>memo.items[2 * i]
        )):
            return False
    for i in range(2 * n):
        ref_take(memo.items[i])
    Py_INCREF(args)
    Py_INCREF(tool_name)
    memo.args = <PyObject*>args
    memo.tool = <PyObject*>tool_name
    memo.size = n
    memo.hash = 0
    memo.version = dict_version(<PyObject*>args)
    return True


cdef inline bint memo_matches(Memo *memo, object tool_name, object args) noexcept:
    """Is ``args`` the remembered dict, holding the very same entries?"""
    if memo.args == NULL or <PyObject*>args != memo.args or <PyObject*>tool_name != memo.tool:
        return False
    if DICT_VERSIONS:
        return dict_version(<PyObject*>args) == memo.version
    if PyDict_Size(args) != memo.size:
        return False
    cdef Py_ssize_t pos = 0, i = 0
    cdef PyObject *key
    cdef PyObject *value
    while PyDict_Next(args, &pos, &key, &value):
        if key != memo.items[i] or value != memo.items[i + 1]:
            return False
        i += 2
    return True


cdef inline Py_ssize_t memo_put(Memo *memo, Memo *fresh, PyObject **held) noexcept:
    """Put ``fresh``'s contents (its references) in ``memo``; what ``memo`` held goes to
    ``held`` (room for ``MEMO_REFS``), for the caller to drop: their number.

    Only the entries in use are copied, not the whole struct.
    """
    cdef Py_ssize_t i, n = 0
    if memo.args != NULL:
        n = 2 * memo.size
        for i in range(n):
            held[i] = memo.items[i]
        held[n] = memo.args
        held[n + 1] = memo.tool
        n += 2
    memo.args = fresh.args
    memo.tool = fresh.tool
    memo.size = fresh.size
    memo.hash = fresh.hash
    memo.version = fresh.version
    for i in range(2 * fresh.size):
        memo.items[i] = fresh.items[i]
    return n


cdef inline void refs_drop(PyObject **held, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i
    for i in range(n):
        ref_drop(held[i])


cdef void memo_release(Memo *memo) noexcept:
    """Empty ``memo`` first, then drop its references (finalisers may re-enter)."""
    cdef PyObject *held[MEMO_REFS]
    cdef Memo empty
    empty.args = NULL
    empty.tool = NULL
    empty.size = 0
    empty.hash = 0
    empty.version = 0
    refs_drop(held, memo_put(memo, &empty, held))


cdef int memo_call_hash(Memo *memo, object tool_name, uint64_t *out) except -1:
    """``call_hash`` of the memo's dict from its entries (1), or 0 when that does not apply.

    The entries are the memo's own references, so no snapshot of the dict is
    needed; tools whose args the reference reduces first take ``call_hash``.
    """
    # Tools the reference reduces first, compared without a call into CPython.
    if type(tool_name) is not str or ascii_is(<PyObject*>tool_name, "update_plan", 11) != 0 or (
        ascii_is(<PyObject*>tool_name, "exec", 4) != 0
    ):
        return 0
    cdef Encoder enc
    cdef Py_ssize_t wrote
    enc_start(&enc, CALL_PREFIX_DATA, CALL_PREFIX_SIZE)
    try:
        # The one-pass writers compiled in here; the C API for what they decline.
        wrote = flat_value(<PyObject *>tool_name, -1, enc.data + enc.size, enc.capacity - enc.size)
        if wrote > 0:
            enc.size += wrote
        else:
            enc_str(&enc, <str>tool_name)
        wrote = flat_dict(memo.items, memo.size, -1, enc.data + enc.size, enc.capacity - enc.size)
        if wrote > 0:
            enc.size += wrote
        elif not enc_flat_dict(&enc, memo.items, memo.size):
            return 0
        out[0] = enc_hash(&enc)
        return 1
    finally:
        enc_release(&enc)


# memo_call_hash and call_hash as C sees them: a failure is left to the caller
# (``args_hash``), which releases the memo it took without a try statement per
# hash (a try saves and restores the handled exception each time). The caller
# tests each function's own error value (-1; 0 with an exception set): a change
# to either function's ``except`` clause must change that test with it.
ctypedef int (*memo_hash_view)(Memo *, object, uint64_t *) noexcept
ctypedef uint64_t (*call_hash_view)(object, object) noexcept


cdef uint64_t release_failed(Memo *memo) except? 0:
    """Release a memo taken for a hash that failed; the failure stays the one raised.

    The exception is put aside meanwhile: a finaliser the release runs must
    not find one pending.
    """
    cdef PyObject *kind
    cdef PyObject *value
    cdef PyObject *trace
    PyErr_Fetch(&kind, &value, &trace)
    memo_release(memo)
    PyErr_Restore(kind, value, trace)
    return 0

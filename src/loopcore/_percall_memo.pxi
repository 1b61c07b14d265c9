# How is the hash of a flat args dict remembered from one call to the next?
# (included by _percall_c.pyx: ``before_call`` and ``after_call`` of the same dict
# hash it once; a memo holds owned references, so identity means the same value.)


cdef struct Memo:
    # A flat args dict and its hash, with owned references to the dict, the
    # tool name and every key and value (all immutable scalars).
    PyObject *args
    PyObject *tool
    PyObject *items[2 * MEMO_ENTRIES]
    Py_ssize_t size
    uint64_t hash


cdef bint memo_take(Memo *memo, object tool_name, dict args) noexcept:
    """Fill ``memo`` with owned references when every entry qualifies."""
    cdef Py_ssize_t pos = 0, i = 0, n = PyDict_Size(args)
    cdef PyObject *key
    cdef PyObject *value
    if n > MEMO_ENTRIES:
        return False
    while PyDict_Next(args, &pos, &key, &value):
        if i >= 2 * n or not (is_immutable_scalar(value) and PyUnicode_CheckExact(<object>key)):
            return False
        memo.items[i] = key
        memo.items[i + 1] = value
        i += 2
    if i != 2 * n:
        return False
    for i in range(2 * n):
        Py_INCREF(<object>memo.items[i])
    Py_INCREF(args)
    Py_INCREF(tool_name)
    memo.args = <PyObject*>args
    memo.tool = <PyObject*>tool_name
    memo.size = n
    memo.hash = 0
    return True


cdef bint memo_matches(Memo *memo, object tool_name, object args) noexcept:
    """Is ``args`` the remembered dict, holding the very same entries?"""
    if memo.args == NULL or <PyObject*>args != memo.args or <PyObject*>tool_name != memo.tool:
        return False
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


cdef void memo_release(Memo *memo) noexcept:
    """Empty ``memo`` first, then drop its references (finalisers may re-enter)."""
    cdef Memo old = memo[0]
    memo.args = NULL
    memo.tool = NULL
    memo.size = 0
    if old.args == NULL:
        return
    cdef Py_ssize_t i
    for i in range(2 * old.size):
        Py_DECREF(<object>old.items[i])
    Py_DECREF(<object>old.args)
    Py_DECREF(<object>old.tool)

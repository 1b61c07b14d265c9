# Is a call's scope key plain, and are its names valid? (included by _percall_c.pyx:
# the checks every per-call method makes first, in C for the common values; the
# Python twin's validation for the rest, so errors read the same.)

from cpython.unicode cimport Py_UNICODE_ISSPACE, PyUnicode_GET_LENGTH, PyUnicode_READ_CHAR


cdef inline bint plain_run_id(object run_id):
    """A str run id that needs no stripping (the common case)."""
    if type(run_id) is not str:
        return False
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(run_id)
    return n > 0 and not Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(run_id, 0)) and not (
        Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(run_id, n - 1))
    )


cdef inline object make_key(object session, object run_id):
    """The scope key; odd values go through the Python twin's validation."""
    cdef type kind = type(session)
    if (run_id is None or plain_run_id(run_id)) and (
        session is None or kind is str or kind is int
    ):
        return (session, run_id)
    return _py_scope_key(session, run_id)


# (0 or an exception: no reference returned for the caller to drop.)
cdef inline int valid_tool(object tool_name) except -1:
    if type(tool_name) is not str:
        check_tool_name(tool_name)
    return 0


cdef inline int valid_call_id(object call_id) except -1:
    if call_id is not None and type(call_id) is not str:
        check_call_id(call_id)
    return 0

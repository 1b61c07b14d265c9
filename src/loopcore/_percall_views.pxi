# How does before_call reach its scan without a try statement per call?
# (included by _percall_c.pyx after _Calls: SPEC §8.2's fail-closed block needs
# the exception a scan raised, and a try statement saves and restores the
# handled exception on every call, failed or not.)


cdef object scan_verdict(
    _Calls calls, object key, int64_t key_hash, object tool_name, object args,
    uint64_t args_hash, object tool_call_id,
):
    """``before_call``'s scan (appending a quiet call), for ``verdict_view``."""
    return calls.verdict_of(key, key_hash, tool_name, args, args_hash, True, tool_call_id)


# scan_verdict as C sees it: a new reference, or NULL with an exception set
# (the error value of a cdef function returning an object; before_call tests it
# and drops the reference itself).
ctypedef PyObject *(*verdict_view)(
    _Calls, object, int64_t, object, object, uint64_t, object
) noexcept


cdef extern from *:
    """
    /* Report the exception a call through a view left pending. */
    static int lc_raise_pending(void) {
        return -1;
    }
    """
    int raise_pending "lc_raise_pending" () except -1

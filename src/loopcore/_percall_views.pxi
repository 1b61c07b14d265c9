# How does before_call reach its scan without a try statement per call, and how is a scan keyed?
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


cdef enum:
    # Room for what a verdict depends on: the scan, the call hash, one flag.
    SCAN_KEY_ROOM = 256


if sizeof(Scan) + sizeof(uint64_t) + 1 > SCAN_KEY_ROOM:
    raise ImportError("loopcore: a scan is larger than its key's buffer")


cdef inline uint64_t scan_digest(Scan *scan, uint64_t args_hash, uint8_t known_poll) noexcept:
    """The verdict cache's key: xxh3 of the scan's bytes, the call hash and the
    known-poll flag in one stack buffer (the bytes an encoder fed them holds)."""
    cdef unsigned char data[SCAN_KEY_ROOM]
    memcpy(data, scan, sizeof(Scan))
    memcpy(data + sizeof(Scan), &args_hash, sizeof(uint64_t))
    data[sizeof(Scan) + sizeof(uint64_t)] = known_poll
    return loopcore_xxh3_64(data, sizeof(Scan) + sizeof(uint64_t) + 1)

# Which C helpers does the store take from the compiler, the system clock, its lock and
# CPython?
# (included by _ring_c.pyx)

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define LOOPCORE_PREFETCH(p) __builtin_prefetch((const void *)(p))
    #define LOOPCORE_PREFETCH_WRITE(p) __builtin_prefetch((const void *)(p), 1)
    #else
    #define LOOPCORE_PREFETCH(p) ((void)(p))
    #define LOOPCORE_PREFETCH_WRITE(p) ((void)(p))
    #endif
    #ifdef Py_GIL_DISABLED
    #define LOOPCORE_GIL_DISABLED 1
    #else
    #define LOOPCORE_GIL_DISABLED 0
    #endif
    /* The UTF-8 bytes of a str: its own buffer when it is compact ASCII. */
    static const char *loopcore_ascii(PyObject *s, Py_ssize_t *size) {
        if (PyUnicode_IS_COMPACT_ASCII(s)) {
            *size = PyUnicode_GET_LENGTH(s);
            return (const char *)PyUnicode_DATA(s);
        }
        return NULL;
    }
    """
    void prefetch "LOOPCORE_PREFETCH" (const void *p) noexcept nogil
    void prefetch_write "LOOPCORE_PREFETCH_WRITE" (const void *p) noexcept nogil
    # With the GIL, a section that runs no Python code needs no lock of its own.
    const bint GIL_DISABLED "LOOPCORE_GIL_DISABLED"
    const char *ascii_bytes "loopcore_ascii" (object s, Py_ssize_t *size)

cdef extern from "_ring_pages.h":
    void *pages_alloc "loopcore_table_alloc" (size_t size) noexcept nogil
    size_t pages_release "loopcore_table_release" (
        void *block, size_t size, size_t start, size_t end
    ) noexcept nogil
    void pages_free "loopcore_table_free" (void *block, size_t size, size_t released) noexcept nogil

cdef extern from "_ring_count.h":
    int64_t count_equal "loopcore_count_equal" (
        const uint64_t *v, Py_ssize_t n, uint64_t x
    ) noexcept nogil

cdef extern from "_ring_clock.h":
    # 1 where ``clock_now`` reads the clock as time.time() does (Linux).
    const bint FAST_CLOCK "LOOPCORE_FAST_CLOCK"
    double clock_now "loopcore_wall_clock" () noexcept nogil

cdef extern from "_lock.h":
    void acquire "loopcore_lock_acquire" (loopcore_lock *lock)
    void release "loopcore_lock_release" (loopcore_lock *lock)

cdef extern from "Python.h":
    # 3.10+: switch the cyclic collector off and on; both return the previous state.
    int PyGC_Enable() noexcept
    int PyGC_Disable() noexcept


cdef inline double now_seconds() noexcept nogil:
    """A record's timestamp: time.time()'s value (``_ring_clock.h``, else CPython's)."""
    cdef double seconds
    if FAST_CLOCK:
        seconds = clock_now()
        if seconds >= 0.0:
            return seconds
    return wall_clock()

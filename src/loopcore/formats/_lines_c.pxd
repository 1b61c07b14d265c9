# cython: language_level=3, freethreading_compatible=True
"""C-level API of the compiled line source, for the compiled reading loop (batch._rows_c)."""


cdef class Lines:
    cdef object source
    cdef object readline
    cdef object read1  # the stream's ``read1`` (blocks of it), or None: ``readline`` per line
    cdef object readinto1  # with ``read1``: the stream's ``readinto1``, if it has one
    cdef Py_ssize_t limit
    cdef Py_ssize_t size
    cdef readonly long long number
    cdef bint done
    # The blocks read and not yet handed out: ``data[head:tail]``, of which
    # ``data[head:scanned]`` is known to hold no line end.
    cdef char *data
    cdef Py_ssize_t capacity
    cdef Py_ssize_t head
    cdef Py_ssize_t scanned
    cdef Py_ssize_t tail
    cdef Py_ssize_t block
    cdef bint ended  # the stream is exhausted
    cdef object held  # without read1: the bytes of the last span handed out

    # The next line as a span of the source's buffer, valid until the next call
    # (``number`` is its number): 1, or 0 once the lines are exhausted.
    cdef int next_span(self, const char **line, Py_ssize_t *n) except -1
    # The next line's bytes, or None once they are exhausted.
    cdef object next_line(self)
    cdef int finish(self) except -1
    cdef int too_long(self) except -1
    cdef int fill(self) except -1
    cdef int room(self, Py_ssize_t size) except -1
    cdef int skip(self) except -1

# cython: language_level=3, freethreading_compatible=True
"""C-level API of the compiled line source, for the compiled reading loop (batch._rows_c)."""


cdef class Lines:
    cdef object source
    cdef object readline
    cdef Py_ssize_t limit
    cdef Py_ssize_t size
    cdef readonly long long number
    cdef bint done

    # The next line's bytes (``number`` is its number), or None once they are exhausted.
    cdef object next_line(self)
    cdef int finish(self) except -1

# cython: language_level=3, freethreading_compatible=True
"""How are a stream's lines numbered and bounded, without a Python frame per line? (compiled twin)

``Lines`` iterates a ``LineSource`` (``formats._reader``) exactly as its generator
does: a bounded ``readline`` per line, a line longer than the limit reported and
streamed past, and the source's ``count`` set when the lines are exhausted (or a
report raised while reading them). The compiled reading loop (``batch._rows_c``)
takes its lines through ``next_line``, with neither a tuple nor an int per line.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

__all__ = ["IMPLEMENTATION", "Lines"]

IMPLEMENTATION = "cython"


cdef class Lines:
    """The numbered lines of a ``LineSource``, from its ``count`` on."""

    def __init__(self, source):
        self.source = source
        self.readline = source.stream.readline
        self.limit = source.limit
        self.size = self.limit + 1  # room for the line end of a line of exactly ``limit`` bytes
        self.number = source.count
        self.done = False

    def __iter__(self):
        return self

    def __next__(self):
        line = self.next_line()
        if line is None:
            raise StopIteration
        return self.number, line

    cdef object next_line(self):
        cdef Py_ssize_t n
        if self.done:
            return None
        try:
            while True:
                line = self.readline(self.size)
                n = PyBytes_GET_SIZE(line) if type(line) is bytes else len(line)
                if n == 0:
                    self.finish()
                    return None
                self.number += 1
                if n > self.limit and not ends_line(line, n):
                    self.source.report(
                        self.number, f"line longer than {self.limit} bytes (--max-line-bytes)"
                    )
                    self.source._skip()
                    continue
                return line
        except BaseException:
            self.finish()  # as the generator's ``finally`` does when it raises
            raise

    cdef int finish(self) except -1:
        self.done = True
        self.source.count = self.number
        return 0


cdef inline bint ends_line(object line, Py_ssize_t n) except -1:
    """Does the (non-empty) line end with b"\\n"?"""
    if type(line) is bytes:
        return PyBytes_AS_STRING(line)[n - 1] == 10
    return line[n - 1] == 10

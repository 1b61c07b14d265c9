# cython: language_level=3, freethreading_compatible=True
"""How are a stream's lines numbered and bounded, without a Python frame per line? (compiled twin)

``Lines`` iterates a ``LineSource`` (``formats._reader``) exactly as its generator
does: the same lines, a line longer than the limit reported and streamed past,
and the source's ``count`` set when the lines are exhausted (or a report raised
while reading them). Where the stream has ``read1`` (every stream ``load``
opens does) it reads blocks of it (into its own buffer, with ``readinto1``
where there is one) and finds the line ends in C: the compiled
reading loop (``batch._rows_c``) takes each line as a span of that buffer
(``next_span``), with no bytes object, tuple or int per line, and makes the
bytes only of a line it must decode. Other streams are read a bounded
``readline`` per line. Either way a line costs at most the limit in memory, plus
a block.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.buffer cimport PyBUF_WRITE
from libc.stdlib cimport free, realloc
from libc.string cimport memchr, memcpy, memmove

cdef extern from "Python.h":
    object PyMemoryView_FromMemory(char *mem, Py_ssize_t size, int flags)

__all__ = ["BLOCK", "IMPLEMENTATION", "Lines"]

IMPLEMENTATION = "cython"
#: Bytes asked of ``read1`` at a time: few calls, and a block that stays in cache.
BLOCK = 1 << 18


cdef class Lines:
    """The numbered lines of a ``LineSource``, from its ``count`` on."""

    def __init__(self, source, Py_ssize_t block=BLOCK):
        if block < 1:
            raise ValueError(f"block: expected a positive size, got {block}")
        self.source = source
        self.readline = source.stream.readline
        self.read1 = getattr(source.stream, "read1", None)
        self.readinto1 = (
            getattr(source.stream, "readinto1", None) if self.read1 is not None else None
        )
        self.limit = source.limit
        self.size = self.limit + 1  # room for the line end of a line of exactly ``limit`` bytes
        self.number = source.count
        self.done = False
        self.block = block

    def __dealloc__(self):
        free(self.data)

    def __iter__(self):
        return self

    def __next__(self):
        line = self.next_line()
        if line is None:
            raise StopIteration
        return self.number, line

    cdef object next_line(self):
        cdef const char *text
        cdef Py_ssize_t n
        if self.read1 is not None:
            if not self.next_span(&text, &n):
                return None
            return PyBytes_FromStringAndSize(text, n)
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
                    self.too_long()
                    self.source._skip()
                    continue
                return line
        except BaseException:
            self.finish()  # as the generator's ``finally`` does when it raises
            raise

    cdef int next_span(self, const char **line, Py_ssize_t *n) except -1:
        cdef const char *end
        cdef Py_ssize_t start
        if self.done:
            return 0
        if self.read1 is None:
            found = self.next_line()
            if found is None:
                return 0
            self.held = found  # keeps the span's bytes alive until the next line
            line[0] = PyBytes_AS_STRING(found)
            n[0] = PyBytes_GET_SIZE(found)
            return 1
        try:
            while True:
                end = <const char *>memchr(
                    self.data + self.scanned, 10, <size_t>(self.tail - self.scanned)
                ) if self.tail > self.scanned else NULL
                if end != NULL:
                    start = self.head
                    self.head = self.scanned = end - self.data + 1
                    self.number += 1
                    if end - (self.data + start) > self.limit:
                        self.too_long()  # found whole within a block: nothing left to skip
                        continue
                    line[0] = self.data + start
                    n[0] = self.head - start
                    return 1
                self.scanned = self.tail
                if self.tail - self.head > self.limit:
                    # No line end within the limit: reported, then read past.
                    self.number += 1
                    self.too_long()
                    self.skip()
                    continue
                if self.ended:
                    if self.tail == self.head:
                        self.finish()
                        return 0
                    # A last line without a line end.
                    start = self.head
                    self.head = self.scanned = self.tail
                    self.number += 1
                    line[0] = self.data + start
                    n[0] = self.tail - start
                    return 1
                self.fill()
        except BaseException:
            self.finish()
            raise

    cdef int too_long(self) except -1:
        self.source.report(self.number, f"line longer than {self.limit} bytes (--max-line-bytes)")
        return 0

    cdef int fill(self) except -1:
        """One more block appended (the lines handed out dropped first); ``ended`` at
        the end of the stream."""
        cdef Py_ssize_t kept = self.tail - self.head
        cdef Py_ssize_t got
        if self.head:
            memmove(self.data, self.data + self.head, <size_t>kept)
            self.scanned -= self.head
            self.tail = kept
            self.head = 0
        if self.readinto1 is not None:
            # Read straight into the buffer: no bytes object, no copy.
            self.room(kept + self.block)
            view = PyMemoryView_FromMemory(self.data + kept, self.block, PyBUF_WRITE)
            try:
                count = self.readinto1(view)
            finally:
                view.release()
            got = 0 if count is None else count
            if not 0 <= got <= self.block:
                raise ValueError(f"readinto1: returned {got} for a buffer of {self.block}")
        else:
            chunk = self.read1(self.block)
            if type(chunk) is not bytes:
                chunk = bytes(chunk)
            got = PyBytes_GET_SIZE(chunk)
            self.room(kept + got)
            memcpy(self.data + kept, PyBytes_AS_STRING(chunk), <size_t>got)
        if got == 0:
            self.ended = True
            return 0
        self.tail = kept + got
        return 0

    cdef int room(self, Py_ssize_t size) except -1:
        """A buffer of at least ``size`` bytes (the data in it kept)."""
        cdef Py_ssize_t wanted
        cdef char *grown
        if size > self.capacity:
            wanted = max(size, 2 * self.capacity)
            grown = <char *>realloc(self.data, <size_t>wanted)
            if grown == NULL:
                raise MemoryError
            self.data = grown
            self.capacity = wanted
        return 0

    cdef int skip(self) except -1:
        """Drop the rest of an over-long line: blocks are read until its line end."""
        cdef const char *end
        while True:
            self.head = self.scanned = self.tail  # nothing held of it
            if self.ended:
                return 0
            self.fill()
            end = <const char *>memchr(self.data, 10, <size_t>self.tail)
            if end != NULL:
                self.head = self.scanned = end - self.data + 1
                return 0

    cdef int finish(self) except -1:
        self.done = True
        self.source.count = self.number
        return 0


cdef inline bint ends_line(object line, Py_ssize_t n) except -1:
    """Does the (non-empty) line end with b"\\n"?"""
    if type(line) is bytes:
        return PyBytes_AS_STRING(line)[n - 1] == 10
    return line[n - 1] == 10

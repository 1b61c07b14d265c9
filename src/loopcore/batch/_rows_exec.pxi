# When is an exec result hashed from its JSON text, and to what? (compiled only)
#
# Included by _rows_c.pyx, for ``read_line`` (_rows_text.pxi). The exec rule of
# SPEC §2/§8.4 written a third time, for its most common cases only: a tool
# result ``{"content": ..., "details": {...}}`` whose details have the status
# "completed" or "failed", an exit code that is a plain int of at most 15
# digits, ``timedOut`` absent or a bool, and an ``aggregated`` text that is not
# blank. Its outcome is then the hash of ("exec", status, code, timedOut is
# True, out), ``out`` being ``aggregated`` stripped; the content and every other
# detail are not read (the rule reads the content's text only when
# ``aggregated`` is blank). A non-zero code without a timeout is a terminal
# failure unless ``out`` is the bare exit footer: its identity is the hash of
# ("exec", status, code, False, shape(out)), shaped in C by the outcome twin's
# own matchers (``_outcome_shape.h``), for an ASCII ``out`` only. Anything else,
# and any text a strip could treat otherwise than ``str.strip`` (non-ASCII at
# either end) or that may hold a wrapper (SPEC §8.5), is decoded and judged by
# the outcome twin. The reference stays the judge: tests/test_rows_text.py holds
# this rule to it on generated results.

from libc.stdio cimport snprintf
from libc.stdlib cimport free, malloc

cdef extern from "_outcome_shape.h":
    ctypedef unsigned int lc_ch "Py_UCS4"
    Py_ssize_t lc_shape(lc_ch *s, Py_ssize_t n, lc_ch *spare) noexcept
    Py_ssize_t LC_SHAPE_WINDOW

# Exec's outcome as ``exec_hash`` found it: no kind, or a terminal failure.
cdef enum:
    EXEC_PLAIN = 1, EXEC_TERMINAL = 2
# An exit code of at most this many digits is an int a double holds exactly: its
# footer is its decimal digits.
cdef int CODE_DIGITS = 15

cdef const char *RESULT_MEMBERS[2]
RESULT_MEMBERS[0] = "content"
RESULT_MEMBERS[1] = "details"
cdef const char *DETAIL_MEMBERS[4]
DETAIL_MEMBERS[0] = "status"
DETAIL_MEMBERS[1] = "exitCode"
DETAIL_MEMBERS[2] = "timedOut"
DETAIL_MEMBERS[3] = "aggregated"
cdef enum:
    D_STATUS, D_CODE, D_TIMED_OUT, D_AGGREGATED


cdef inline bint ascii_space(unsigned char c) noexcept:
    """``str.isspace`` of an ASCII character (tab to carriage return, 0x1c-0x1f, space)."""
    return (9 <= c <= 13) or (28 <= c <= 32)


cdef inline void put_head(unsigned char *at, unsigned char tag, uint64_t value) noexcept:
    cdef int i
    at[0] = tag
    for i in range(8):
        at[1 + i] = <unsigned char>(value >> (8 * i))


cdef bint put_text(lc_canon_buf *buf, const char *text, size_t n) noexcept:
    """``s`` + length + ``text`` appended (a str of the rule's own)."""
    cdef unsigned char *at = lc_canon_room(buf, STR_HEAD + n)
    if at == NULL:
        return False
    put_head(at, c's', n)
    memcpy(at + STR_HEAD, text, n)
    buf.size += STR_HEAD + n
    return True


cdef bint exit_code(const unsigned char *text, size_t n, long long *code) noexcept:
    """The exit code written as a plain int of at most CODE_DIGITS digits ("0",
    "-12"), into ``code``; False for any other text (the decoded path reads it)."""
    cdef size_t i = 0
    cdef long long value = 0
    if n > 0 and text[0] == c'-':
        i = 1
    if i >= n or n - i > <size_t>CODE_DIGITS:
        return False
    if text[i] == c'0':
        if n != 1:
            return False  # "-0": an int 0 to both decoders, but rare enough to decode
        code[0] = 0
        return True
    while i < n:
        if text[i] < c'0' or text[i] > c'9':
            return False
        value = value * 10 + (text[i] - c'0')
        i += 1
    code[0] = -value if text[0] == c'-' else value
    return True


cdef bint is_footer(const unsigned char *out, size_t n, long long code) noexcept:
    """Is ``out`` the line exec writes when a command printed nothing
    (``_exec_shape.exit_footer``; a code of CODE_DIGITS digits is written as them)?"""
    cdef char footer[64]
    cdef int size
    if n < 28 or n >= sizeof(footer) or out[0] != c'(' or out[n - 1] != c')':
        return False  # most outputs: no need to write the footer out
    size = snprintf(footer, sizeof(footer), "(Command exited with code %lld)", code)
    return size > 0 and <size_t>size == n and memcmp(out, footer, n) == 0


cdef bint exec_head(lc_canon_buf *buf, const unsigned char *status, size_t status_size,
                    long long code, bint timed_out) noexcept:
    """domain + [5 items: "exec", status, code, timed out, ...] into the empty ``buf``;
    the fifth item (``out``) is the caller's."""
    cdef unsigned char *at = lc_canon_room(buf, <size_t>len(RESULT_DOMAIN) + STR_HEAD)
    if at == NULL:
        return False
    memcpy(at, <char *>RESULT_DOMAIN, <size_t>len(RESULT_DOMAIN))
    put_head(at + len(RESULT_DOMAIN), c'l', 5)
    buf.size = <size_t>len(RESULT_DOMAIN) + STR_HEAD
    if not (
        put_text(buf, "exec", 4)
        and put_text(buf, <const char *>status, status_size)
    ):
        return False
    at = lc_canon_room(buf, STR_HEAD + 1)
    if at == NULL:
        return False
    put_head(at, c'i', <uint64_t>code)  # SPEC §2: an int64 as its two's complement
    at[STR_HEAD] = c'T' if timed_out else c'F'
    buf.size += STR_HEAD + 1
    return True


cdef bint shaped_hash(const unsigned char *status, size_t status_size, long long code,
                      const unsigned char *out, size_t n, uint64_t *found) noexcept:
    """The identity of a terminal failure, the hash of ("exec", status, code, False,
    shape(out)), for an ASCII ``out`` that shape reads whole; False otherwise."""
    cdef lc_ch stack[512]
    cdef lc_ch *chars = stack
    cdef Py_ssize_t length
    cdef size_t i
    cdef lc_canon_buf buf
    cdef unsigned char *at
    cdef bint done = False
    if n > <size_t>(2 * LC_SHAPE_WINDOW):
        return False  # shape reads its two ends only
    for i in range(n):
        if out[i] >= 0x80:
            return False
    if 2 * n > 512:
        chars = <lc_ch *>malloc(2 * n * sizeof(lc_ch))
        if chars == NULL:
            return False
    for i in range(n):
        chars[i] = out[i]
    length = lc_shape(chars, <Py_ssize_t>n, chars + n)  # ASCII in, ASCII out ('#')
    lc_canon_init(&buf)
    if exec_head(&buf, status, status_size, code, False):
        at = lc_canon_room(&buf, STR_HEAD + <size_t>length)
        if at != NULL:
            put_head(at, c's', <uint64_t>length)
            for i in range(<size_t>length):
                at[STR_HEAD + i] = <unsigned char>chars[i]
            buf.size += STR_HEAD + <size_t>length
            found[0] = loopcore_xxh3_64(buf.data, buf.size)
            done = True
    lc_canon_free(&buf)
    if chars != stack:
        free(chars)
    return done


cdef int exec_hash(const unsigned char *text, size_t n, lc_event_details *details,
                   uint64_t *found, uint64_t *identity) noexcept:
    """The outcome of an exec result given as its JSON text, for the cases above:
    EXEC_PLAIN (``found`` its hash) or EXEC_TERMINAL (``identity`` too); 0 when it
    is not one of them (or not sure). The text is a span of a line
    ``lc_event_scan`` took: checked JSON that both decoders read alike; ``details``
    what that scan found of its members (when ``found``: not looked for again)."""
    cdef lc_canon_buf buf
    cdef const unsigned char *member[4]
    cdef size_t size[4]
    cdef unsigned int present = 0
    cdef int done = 0
    cdef const unsigned char *status
    cdef size_t status_size, head, first, last
    cdef long long code = 0
    cdef bint timed_out = False
    cdef int i
    if n == 0 or text[0] != c'{':
        return 0
    lc_canon_init(&buf)
    try:
        if details.found:
            for i in range(4):
                member[i] = details.start[i]
                size[i] = details.size[i]
            present = details.present
        else:
            if lc_event_object(
                text, n, RESULT_MEMBERS, 2, 0, 0, member, size, &present, NULL
            ) != LC_EVENT_OK:
                return 0
            if not (present >> 1) & 1 or size[1] == 0 or member[1][0] != c'{':
                return 0
            if lc_event_object(
                member[1], size[1], DETAIL_MEMBERS, 4, 1, 0, member, size, &present, NULL
            ) != LC_EVENT_OK:
                return 0
        if (present & 0b1011) != 0b1011:  # status, exitCode and aggregated
            return 0
        status = member[D_STATUS]
        status_size = size[D_STATUS]
        if lc_event_is(status, status_size, b'"completed"'):
            status = <const unsigned char *>"completed"
            status_size = 9
        elif lc_event_is(status, status_size, b'"failed"'):
            status = <const unsigned char *>"failed"
            status_size = 6
        else:
            return 0
        if not exit_code(member[D_CODE], size[D_CODE], &code):
            return 0
        if (present >> D_TIMED_OUT) & 1:
            if lc_event_is(member[D_TIMED_OUT], size[D_TIMED_OUT], b"true"):
                timed_out = True
            elif not lc_event_is(member[D_TIMED_OUT], size[D_TIMED_OUT], b"false"):
                return 0
        if not exec_head(&buf, status, status_size, code, timed_out):
            return 0
        head = buf.size
        if not read_string(member[D_AGGREGATED], size[D_AGGREGATED], &buf):
            return 0
        # ``out``: aggregated stripped, as str.strip does for ASCII white space.
        first = head + STR_HEAD
        last = buf.size
        while first < last and ascii_space(buf.data[first]):
            first += 1
        while last > first and ascii_space(buf.data[last - 1]):
            last -= 1
        if first == last:
            return 0  # blank: the rule takes the content's text instead
        if buf.data[first] >= 0x80 or buf.data[last - 1] >= 0x80:
            return 0  # maybe a non-ASCII space, which str.strip would take off
        if may_wrap(buf.data + first, last - first):
            return 0
        memmove(buf.data + head + STR_HEAD, buf.data + first, last - first)
        put_head(buf.data + head, c's', last - first)
        buf.size = head + STR_HEAD + (last - first)
        # _exec_shape.is_terminal: a non-zero code, no timeout, some output other
        # than the bare footer (``out`` is not blank here).
        if code == 0 or timed_out or is_footer(
            buf.data + head + STR_HEAD, last - first, code
        ):
            found[0] = loopcore_xxh3_64(buf.data, buf.size)
            done = EXEC_PLAIN
        elif shaped_hash(
            status, status_size, code, buf.data + head + STR_HEAD, last - first, identity
        ):
            found[0] = loopcore_xxh3_64(buf.data, buf.size)
            done = EXEC_TERMINAL
    finally:
        lc_canon_free(&buf)
    return done

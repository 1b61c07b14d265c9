# When is an exec result hashed from its JSON text, and to what? (compiled only)
#
# Included by _rows_c.pyx, for ``read_line`` (_rows_text.pxi). The exec rule of
# SPEC §2/§8.4 written a third time, for its most common case only: a tool
# result ``{"content": ..., "details": {...}}`` whose details have the status
# "completed" or "failed", the exit code 0 (so never a terminal failure),
# ``timedOut`` absent or a bool, and an ``aggregated`` text that is not blank.
# Its outcome is then the hash of ("exec", status, 0, timedOut is True, out),
# ``out`` being ``aggregated`` stripped; the content and every other detail are
# not read (the rule reads the content's text only when ``aggregated`` is
# blank). Anything else, and any text a strip could treat otherwise than
# ``str.strip`` (non-ASCII at either end) or that may hold a wrapper (SPEC
# §8.5), is decoded and judged by the outcome twin. The reference stays the
# judge: tests/test_rows_text.py holds this rule to it on generated results.

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


cdef bint exec_hash(const unsigned char *text, size_t n, uint64_t *found) noexcept:
    """The outcome hash of an exec result given as its JSON text, for the case above;
    False when it is not that case (or not sure). The text is a span of a line
    ``lc_event_scan`` took: checked JSON that both decoders read alike."""
    cdef lc_canon_buf buf
    cdef const unsigned char *member[4]
    cdef size_t size[4]
    cdef unsigned int present = 0
    cdef bint done = False
    cdef const unsigned char *status
    cdef size_t status_size, head, first, last
    cdef unsigned char *at
    cdef bint timed_out = False
    if n == 0 or text[0] != c'{':
        return False
    lc_canon_init(&buf)
    try:
        if lc_event_object(
            text, n, RESULT_MEMBERS, 2, 0, 0, member, size, &present
        ) != LC_EVENT_OK:
            return False
        if not (present >> 1) & 1 or size[1] == 0 or member[1][0] != c'{':
            return False
        if lc_event_object(
            member[1], size[1], DETAIL_MEMBERS, 4, 1, 0, member, size, &present
        ) != LC_EVENT_OK:
            return False
        if (present & 0b1011) != 0b1011:  # status, exitCode and aggregated
            return False
        status = member[D_STATUS]
        status_size = size[D_STATUS]
        if lc_event_is(status, status_size, b'"completed"'):
            status = <const unsigned char *>"completed"
            status_size = 9
        elif lc_event_is(status, status_size, b'"failed"'):
            status = <const unsigned char *>"failed"
            status_size = 6
        else:
            return False
        if not lc_event_is(member[D_CODE], size[D_CODE], b"0"):
            return False
        if (present >> D_TIMED_OUT) & 1:
            if lc_event_is(member[D_TIMED_OUT], size[D_TIMED_OUT], b"true"):
                timed_out = True
            elif not lc_event_is(member[D_TIMED_OUT], size[D_TIMED_OUT], b"false"):
                return False
        # domain + [5 items: "exec", status, 0, timed out, out]
        at = lc_canon_room(&buf, <size_t>len(RESULT_DOMAIN) + STR_HEAD)
        if at == NULL:
            return False
        memcpy(at, <char *>RESULT_DOMAIN, <size_t>len(RESULT_DOMAIN))
        put_head(at + len(RESULT_DOMAIN), c'l', 5)
        buf.size = <size_t>len(RESULT_DOMAIN) + STR_HEAD
        if not (
            put_text(&buf, "exec", 4)
            and put_text(&buf, <const char *>status, status_size)
        ):
            return False
        at = lc_canon_room(&buf, STR_HEAD + 1)
        if at == NULL:
            return False
        put_head(at, c'i', 0)
        at[STR_HEAD] = c'T' if timed_out else c'F'
        buf.size += STR_HEAD + 1
        head = buf.size
        if not read_string(member[D_AGGREGATED], size[D_AGGREGATED], &buf):
            return False
        # ``out``: aggregated stripped, as str.strip does for ASCII white space.
        first = head + STR_HEAD
        last = buf.size
        while first < last and ascii_space(buf.data[first]):
            first += 1
        while last > first and ascii_space(buf.data[last - 1]):
            last -= 1
        if first == last:
            return False  # blank: the rule takes the content's text instead
        if buf.data[first] >= 0x80 or buf.data[last - 1] >= 0x80:
            return False  # maybe a non-ASCII space, which str.strip would take off
        if may_wrap(buf.data + first, last - first):
            return False
        memmove(buf.data + head + STR_HEAD, buf.data + first, last - first)
        put_head(buf.data + head, c's', last - first)
        buf.size = head + STR_HEAD + (last - first)
        found[0] = loopcore_xxh3_64(buf.data, buf.size)
        done = True
    finally:
        lc_canon_free(&buf)
    return done

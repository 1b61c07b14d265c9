# How does a common event line become a row without decoding the whole line? (compiled only)
#
# Included by _rows_c.pyx. ``Rows.read_line`` finds the fields of a line in C
# (_json_event.h) and makes only the str values a row needs (the tool name, the
# session and run id, each kept while the next lines repeat it); the args are
# hashed from their JSON text (_json_canon.h), and so is a plain str result of a
# tool with no special rule (hashed whole, SPEC §2). Whatever else a row needs
# (args a rule reads, a result that is not a str) is decoded from its own span,
# as the whole line's decode would have made it. Any line it is not sure of,
# and any span that does not read, goes to the msgspec path, which judges the
# line as it did before: this reader only takes the lines whose row it is sure
# to make the same.

from cpython.bytes cimport PyBytes_FromStringAndSize

cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char *data, Py_ssize_t size, const char *errors)

cdef extern from "_json_event.h":
    int LC_EVENT_OK
    enum:
        LC_EV_TYPE, LC_EV_TOOL, LC_EV_ARGS, LC_EV_RESULT, LC_EV_ERROR, LC_EV_CALL_ID,
        LC_EV_SESSION, LC_EV_RUN_ID, LC_EV_TS, LC_EV_COUNT
    ctypedef struct lc_event_details:
        const unsigned char *start[4]
        size_t size[4]
        unsigned int present
        int found
    ctypedef struct lc_event:
        const unsigned char *start[9]
        size_t size[9]
        unsigned int present
        lc_event_details details
    int lc_event_scan(const unsigned char *line, size_t n, lc_event *ev) noexcept
    int lc_event_object(const unsigned char *text, size_t n, const char *const *names,
                        int count, int others, int check, const unsigned char **start,
                        size_t *size, unsigned int *present,
                        lc_event_details *details) noexcept
    int lc_event_is(const unsigned char *text, size_t n, const char *word) noexcept
    int lc_event_plain_number(const unsigned char *p, size_t n) noexcept


from .._outcome_py import RESULT_DOMAIN as _RESULT_DOMAIN
from .._outcome_py import SPECIAL_OUTCOME_TOOLS as _SPECIAL

cdef bytes RESULT_DOMAIN = _RESULT_DOMAIN
cdef frozenset SPECIAL = _SPECIAL
# What a field answers when this reader is not sure of it (the line goes the msgspec way).
cdef object NOT_SURE = object()
# The canonical encoding of a str starts with its tag and length (9 bytes).
cdef size_t STR_HEAD = 9
# Tool names kept by their JSON text: a trace has few tools.
cdef enum:
    TOOL_CACHE = 16
# Which results of a tool are hashed from their text: none, a str one of a tool
# with no special rule (hashed whole), exec's common one (_rows_exec.pxi). A send
# tool's or one with a host normaliser never are.
cdef enum:
    BY_TEXT_NONE, BY_TEXT_PLAIN, BY_TEXT_EXEC


cdef struct Known:
    # What ``read_line`` knows of a row from its line's text, for ``Rows.append``.
    int outcome  # 0 (not known), EXEC_PLAIN or EXEC_TERMINAL: the result's ``hash``
    uint64_t hash
    uint64_t identity  # EXEC_TERMINAL: the failure's identity
    int tool  # the tool name's entry in the tool cache (``Rows.tool_texts``), or -1
    int poll  # the known-poll flag, or -1: ``known_poll`` reads the args


cdef inline bint has_field(lc_event *ev, int field) noexcept:
    return (ev.present >> field) & 1


cdef int read_string(const unsigned char *text, size_t n, lc_canon_buf *buf) noexcept:
    """The JSON string that is exactly ``text[0:n]``, appended to ``buf`` as its
    canonical encoding; 0 when it is not one (or the reader is not sure of it)."""
    cdef lc_canon_reader r
    if n < 2 or text[0] != c'"':
        return 0
    r.p = text
    r.end = text + n
    r.start = text
    r.out = buf
    r.untitled = 0
    if lc_canon_string(&r) != LC_CANON_OK:
        return 0
    return r.p == r.end


cdef bint may_wrap(const unsigned char *text, size_t n) noexcept:
    """May this UTF-8 text hold a wrapper? Its marker starts "<<<" (SPEC §8.5)."""
    cdef const unsigned char *at = text
    cdef const unsigned char *end = text + n
    while True:
        at = <const unsigned char *>memchr(at, c'<', <size_t>(end - at))
        if at == NULL or end - at < 3:
            return False
        if at[1] == c'<' and at[2] == c'<':
            return True
        at += 1


cdef object text_value(const unsigned char *text, size_t n):
    """The str of the JSON string ``text[0:n]``, or NOT_SURE."""
    cdef lc_canon_buf buf
    lc_canon_init(&buf)
    try:
        if not read_string(text, n, &buf):
            return NOT_SURE
        # Valid UTF-8 without surrogates (the reader gave up on any other): it decodes.
        return PyUnicode_DecodeUTF8(<char *>buf.data + STR_HEAD, buf.size - STR_HEAD, NULL)
    finally:
        lc_canon_free(&buf)


cdef bint is_string(const unsigned char *text, size_t n) noexcept:
    """Is ``text[0:n]`` a JSON string both decoders read (to a str nobody keeps)?"""
    cdef lc_canon_buf buf
    cdef bint found
    lc_canon_init(&buf)
    found = read_string(text, n, &buf)
    lc_canon_free(&buf)
    return found


cdef bint text_hash(const unsigned char *text, size_t n, uint64_t *found) noexcept:
    """The outcome hash of a plain str result given as its JSON text (SPEC §2: the
    value hashed whole); False when not sure. A text that may hold a wrapper
    (SPEC §8.5: its nonces are normalised first) is left to the decoded path."""
    cdef lc_canon_buf buf
    cdef unsigned char *at
    cdef bint done = False
    cdef size_t head = <size_t>len(RESULT_DOMAIN) + STR_HEAD
    lc_canon_init(&buf)
    at = lc_canon_room(&buf, <size_t>len(RESULT_DOMAIN))
    if at != NULL:
        memcpy(at, <char *>RESULT_DOMAIN, <size_t>len(RESULT_DOMAIN))
        buf.size = <size_t>len(RESULT_DOMAIN)
        if read_string(text, n, &buf) and not may_wrap(buf.data + head, buf.size - head):
            found[0] = loopcore_xxh3_64(buf.data, buf.size)
            done = True
    lc_canon_free(&buf)
    return done


cdef inline object null_or_text(lc_event *ev, int field):
    """A field that is a str or null: its value (None when absent), or NOT_SURE."""
    if not has_field(ev, field) or lc_event_is(ev.start[field], ev.size[field], "null"):
        return None
    return text_value(ev.start[field], ev.size[field])


cdef inline bint same_text(bytes kept, const unsigned char *text, size_t n) noexcept:
    return (
        kept is not None
        and <size_t>PyBytes_GET_SIZE(kept) == n
        and memcmp(PyBytes_AS_STRING(kept), text, n) == 0
    )


cdef inline object span(lc_event *ev, int field):
    return PyBytes_FromStringAndSize(<const char *>ev.start[field], <Py_ssize_t>ev.size[field])

# Which of a row's hashes and flags follow from a call's name and the JSON text
# of its args, without decoding them? (included by _rows_c.pyx; the reading loop
# and the line reader, _rows_text.pxi, ask these)


cdef inline bint named(const char *name, Py_ssize_t size, const char *word,
                       Py_ssize_t n) noexcept:
    return size == n and memcmp(name, word, <size_t>n) == 0


cdef int raw_call_hash(str tool, object raw, object normalizers, uint64_t *found) except -1:
    """``hash_call(tool, json.loads(raw))`` from the JSON text; 1 when hashed, 0:
    decode it instead (see ``text_call_hash``)."""
    cdef Py_buffer view
    cdef int status
    PyObject_GetBuffer(raw, &view, PyBUF_SIMPLE)
    try:
        status = text_call_hash(
            tool, <const unsigned char *>view.buf, <size_t>view.len, normalizers, found
        )
    finally:
        PyBuffer_Release(&view)
    return status


cdef int text_call_hash(str tool, const unsigned char *args, size_t size, object normalizers,
                        uint64_t *found) except -1:
    """``hash_call(tool, json.loads(args[0:size]))``; 1 when hashed, 0: decode them instead.

    Also 0 for a tool whose rules read its args: ``hash_call`` reduces
    update_plan's, ``is_known_poll`` and the process rule read a process call's
    ``action``, ``is_send`` a message's, a host's normaliser gets them. Exec's
    ``title`` is left out of the hash by the C reader giving up on it.
    """
    cdef Py_ssize_t name_size
    cdef const char *name
    try:
        name = PyUnicode_AsUTF8AndSize(tool, &name_size)
    except UnicodeEncodeError:
        return 0  # a lone surrogate: the encoder's surrogatepass bytes
    if (
        named(name, name_size, "process", 7)
        or named(name, name_size, "message", 7)
        or named(name, name_size, "update_plan", 11)
        or (normalizers and tool in normalizers)
    ):
        return 0
    return lc_canon_call_hash(
        <const unsigned char *><char *>CALL_DOMAIN, CALL_DOMAIN_SIZE,
        <const unsigned char *>name, name_size, args, size,
        named(name, name_size, "exec", 4), found,
    ) == LC_CANON_OK


cdef inline int tool_poll(str tool) noexcept:
    """``known_poll`` of an exact str name, or -1 for a process call (its args tell)."""
    cdef Py_ssize_t size = len(tool)
    if size == 4 or size == 7 or size == 14:
        if tool == "wait" or tool == "command_status":
            return 1
        if tool == "process":
            return -1
    return 0


cdef inline bint known_poll(object tool_name, object args) except -1:
    """``is_known_poll`` for an exact str name; the reference's own code for anything else."""
    if type(tool_name) is not str:
        return _is_known_poll(tool_name, args)
    cdef int by_name = tool_poll(<str>tool_name)
    if by_name >= 0:
        return by_name
    if type(args) is dict:
        try:
            action = (<dict>args).get("action")
        except Exception:
            return False  # a key whose == raises: the reference says False too
        if action is None:
            return False
        if type(action) is str:
            return action == "poll" or action == "log"
    # Any other mapping, or an action of another type (its == may run code).
    return _is_known_poll(tool_name, args)


def call_hash_of_json(str tool, data):
    """The call hash of ``tool`` and the args whose JSON text is ``data``, read in C; None
    where the C reader gives up (the reading loop then decodes the text). For tests."""
    cdef uint64_t found = 0
    if raw_call_hash(tool, data, None, &found) != 0:
        return found
    return None

# How does a common event line become a row without decoding the whole line? (compiled only)
#
# Included at the end of _rows_c.pyx (its helpers are in _rows_line.pxi): the
# reading loop tries ``read_line`` on each line before decoding it.

cdef object line_tool(Rows rows, lc_event *ev, int *rule, Known *known):
    """The tool name of a line (a str), or NOT_SURE; ``rule``: which of its results
    may be hashed from their text (``BY_TEXT_*``); ``known``: its tool cache entry
    and known-poll flag."""
    cdef const unsigned char *text = ev.start[LC_EV_TOOL]
    cdef size_t n = ev.size[LC_EV_TOOL]
    cdef Py_ssize_t i
    for i in range(len(rows.tool_texts)):
        if same_text(<bytes>rows.tool_texts[i], text, n):
            rule[0] = <int>rows.tool_rules[i]
            tool = rows.tool_values[i]
            known.tool = <int>i
            known.poll = rows.tool_polls[i]
            return tool
    tool = text_value(text, n)
    if tool is NOT_SURE:
        return tool
    known.poll = tool_poll(<str>tool)
    rule[0] = BY_TEXT_NONE
    if not (
        (rows.send_tools and tool in rows.send_tools)
        or (rows.normalizers and tool in rows.normalizers)
    ):
        if tool not in SPECIAL:
            rule[0] = BY_TEXT_PLAIN
        elif tool == "exec":
            rule[0] = BY_TEXT_EXEC
    if len(rows.tool_texts) < TOOL_CACHE:
        known.tool = <int>len(rows.tool_texts)
        rows.tool_named[known.tool] = False
        rows.tool_polls[known.tool] = known.poll
        rows.tool_texts.append(span(ev, LC_EV_TOOL))
        rows.tool_values.append(tool)
        rows.tool_rules.append(rule[0])
    return tool


cdef object line_text(Rows rows, lc_event *ev, int field):
    """A str-or-null field of a line (None when absent), or NOT_SURE; the value of
    the last line is kept while the lines repeat its text (a run's session)."""
    if not has_field(ev, field):
        return None
    if same_text(<bytes>rows.field_texts[field], ev.start[field], ev.size[field]):
        return rows.field_values[field]
    value = null_or_text(ev, field)
    if value is not NOT_SURE:
        rows.field_texts[field] = span(ev, field)
        rows.field_values[field] = value
    return value


cdef int read_line(Rows rows, const unsigned char *line, size_t size, object decode_value,
                   object errors, object unset) except -1:
    """Make the row of a common event line (``line[0:size]``) from its JSON text; 1
    when made, 0 when the line is to go the msgspec way (nothing was added)."""
    cdef lc_event ev
    cdef uint64_t args_hash = 0
    cdef Known known
    cdef int hashed
    cdef int rule = BY_TEXT_NONE
    cdef const unsigned char *text
    cdef size_t n
    if lc_event_scan(line, size, &ev) != LC_EVENT_OK:
        return 0
    if not (has_field(&ev, LC_EV_TOOL) and has_field(&ev, LC_EV_ARGS)):
        return 0
    if has_field(&ev, LC_EV_TYPE) and not lc_event_is(
        ev.start[LC_EV_TYPE], ev.size[LC_EV_TYPE], b'"call"'
    ):
        return 0
    if has_field(&ev, LC_EV_ERROR) and not lc_event_is(
        ev.start[LC_EV_ERROR], ev.size[LC_EV_ERROR], b"null"
    ):
        return 0  # errors are rare: their rules read the decoded value
    if has_field(&ev, LC_EV_TS):
        text = ev.start[LC_EV_TS]
        n = ev.size[LC_EV_TS]
        if not (
            lc_event_is(text, n, b"null") or lc_event_plain_number(text, n)
            or is_string(text, n)
        ):
            return 0
    if has_field(&ev, LC_EV_CALL_ID):
        text = ev.start[LC_EV_CALL_ID]
        n = ev.size[LC_EV_CALL_ID]
        if not (lc_event_is(text, n, b"null") or is_string(text, n)):
            return 0
    known.outcome = 0
    known.tool = -1
    tool = line_tool(rows, &ev, &rule, &known)
    session = line_text(rows, &ev, LC_EV_SESSION)
    run_id = line_text(rows, &ev, LC_EV_RUN_ID)
    if tool is NOT_SURE or session is NOT_SURE or run_id is NOT_SURE:
        return 0
    hashed = text_call_hash(
        <str>tool, ev.start[LC_EV_ARGS], ev.size[LC_EV_ARGS], rows.normalizers, &args_hash
    )
    args = None
    if not hashed:
        try:
            args = decode_value(span(&ev, LC_EV_ARGS))  # as the line's decode reads them
        except errors:
            return 0
    result = unset
    if has_field(&ev, LC_EV_RESULT):
        text = ev.start[LC_EV_RESULT]
        n = ev.size[LC_EV_RESULT]
        if rule == BY_TEXT_PLAIN and text[0] == c'"' and text_hash(text, n, &known.hash):
            known.outcome = EXEC_PLAIN
        elif rule == BY_TEXT_EXEC:
            known.outcome = exec_hash(text, n, &ev.details, &known.hash, &known.identity)
        if known.outcome:
            result = None
        else:
            try:
                result = decode_value(span(&ev, LC_EV_RESULT))
            except errors:
                return 0
    error = None if has_field(&ev, LC_EV_ERROR) else unset
    try:
        rows.add(
            tool, args, result, error, session, run_id, hashed, args_hash, &known
        )
    except READ_ERRORS:
        return 0
    rows.lines_read += 1
    rows.results_read += known.outcome != 0
    return 1

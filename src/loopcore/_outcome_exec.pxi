# Which special outcomes are hashed in C, and how? (exec, process polls, write no-ops)
#
# Included by _outcome_c.pyx after _outcome_plain.pxi (whose helpers it uses):
# SPEC §2's exec and process poll/log branches, §8.4's terminal exec failures
# (shape() in C, _outcome_shape.h) and §8.6's write no-ops, for plain dicts of
# plain values. special_outcome answers the reference's exact tuple, or None for
# anything it does not read in full (a subclass, a mapping that is not a dict, a
# value whose type could lie about itself, a wrapper marker, an error, a send or
# update_plan result): outcome_of then runs the reference rules, so correctness
# never depends on this path.

from libc.math cimport isfinite

from ._fingerprint_c cimport str_wrapped

from ._exec_shape import exit_footer as _exit_footer
from ._outcome_py import _UNCHANGED
from ._records import KIND_TERMINAL_EXEC as _KIND_TERMINAL_EXEC

cdef extern from "_outcome_shape.h":
    object lc_shape_str(object text)

cdef str EXEC_TAG = "exec"
cdef str PROCESS_TAG = "process"
cdef str FOOTER_HEAD = "(Command exited with code "
cdef object UNCHANGED = _UNCHANGED
cdef int KIND_TERMINAL = _KIND_TERMINAL_EXEC
cdef tuple POLL_FIELDS = ("status", "exitCode", "exitSignal", "aggregated")
cdef tuple LOG_FIELDS = (
    "status", "totalLines", "totalChars", "truncated", "exitCode", "exitSignal"
)


cdef inline bint inert(object value):
    """A value whose truth and ``==`` run no code of its own (exact builtin types)."""
    return is_plain_leaf(value) or type(value) is dict


cdef inline str stripped_text(str text):
    """``text.strip()``, without the method call when neither end is white space."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    if n and not (
        Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(text, 0))
        or Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(text, n - 1))
    ):
        return text  # what str.strip returns for an exact str it leaves unchanged
    return text.strip()


cdef uint64_t hash_exec(str status, object code, bint timed_out, object out) except? 0:
    """The hash of ("exec", status, code, timed_out, out) (SPEC §2, §8.4).

    ``out`` holds no wrapper the encoder could normalise (the caller checked),
    or is the joined content text, which the reference marks Verbatim: it is
    written as it is either way.
    """
    cdef Encoder enc
    enc_init(&enc)
    enc.nonces = 1
    try:
        enc_raw(&enc, <char*>C_RESULT_DOMAIN, len(C_RESULT_DOMAIN))
        enc_list_header(&enc, 5)
        enc_value(&enc, EXEC_TAG)
        enc_value(&enc, status)
        enc_value(&enc, code)
        enc_value(&enc, True if timed_out else False)
        enc.nonces = 0
        enc_value(&enc, out)
        return enc_digest(&enc)
    finally:
        enc_free(&enc)


cdef uint64_t hash_process(str action, dict details, tuple fields, str text) except? 0:
    """The hash of ("process", action, *fields of details, text) (SPEC §2)."""
    # Every field read before any is encoded, as the reference builds its tuple:
    # a value whose repr() edits the details must not change what was read.
    values = [details.get(name) for name in fields]
    cdef Encoder enc
    enc_init(&enc)
    enc.nonces = 1
    try:
        enc_raw(&enc, <char*>C_RESULT_DOMAIN, len(C_RESULT_DOMAIN))
        enc_list_header(&enc, 3 + len(fields))
        enc_value(&enc, PROCESS_TAG)
        enc_value(&enc, action)
        for value in values:
            enc_value(&enc, value)
        enc.nonces = 0  # the joined content text: see hash_generic
        enc_value(&enc, text)
        return enc_digest(&enc)
    finally:
        enc_free(&enc)


cdef bint exec_terminal(object code, bint timed_out, str out) except -1:
    """_exec_shape.is_terminal for an exact int or float code (or None)."""
    cdef double number
    if timed_out or code is None or not out:
        return False
    if type(code) is float:
        number = code
    else:
        try:
            number = float(code)
        except OverflowError:
            return False  # past a double: infinite, as JSON would parse it
    if not isfinite(number) or number == 0:
        return False
    # Only a text that starts like the footer can be it: the rare case asks Python.
    return not out.startswith(FOOTER_HEAD) or out != _exit_footer(number)


cdef object exec_finished(dict details, str status, str text):
    """A completed/failed exec's outcome (SPEC §2, §8.4), or None: ask the reference."""
    aggregated = details.get("aggregated")
    out = text
    if type(aggregated) is str:
        stripped = stripped_text(<str>aggregated)
        if stripped:
            if str_wrapped(stripped):
                return None  # normalised before it is shaped: the reference's job
            out = stripped
    elif not inert(aggregated):
        return None
    code = details.get("exitCode")
    if type(code) is not int and type(code) is not float:
        if not inert(code):
            return None
        code = None  # not a number (a bool included)
    cdef bint timed_out = details.get("timedOut") is True
    found = hash_exec(status, code, timed_out, out)
    if not exec_terminal(code, timed_out, out):
        return found, None, 0, None, False
    # The same failure with drifting timestamps, counters and pids (§8.4).
    identity = hash_exec(status, code, False, lc_shape_str(out))
    return found, None, KIND_TERMINAL, identity, False


cdef object exec_outcome(dict details, str status, str text):
    """The exec branch of SPEC §2 for a string status; None: ask the reference."""
    if status == "completed" or status == "failed":
        return exec_finished(details, status, text)
    if status == "running":
        tail = details.get("tail")
        if not inert(tail):
            return None
        return hash_whole((EXEC_TAG, status, tail or "")), None, 0, None, False
    if status == "approval-pending" or status == "approval-unavailable":
        get = details.get
        value = (EXEC_TAG, status, get("reason"), get("host"), get("command"), get("warningText"))
        return hash_whole(value), None, 0, None, False
    return hash_generic(details, text, NULL, -1, 0), None, 0, None, False


cdef object process_outcome(object args, dict details, str text):
    """A process poll/log outcome (SPEC §2), the generic one, or None: ask the reference."""
    if type(args) is dict:
        action = (<dict>args).get("action")
        if type(action) is str:
            if action == "poll":
                return hash_process(action, details, POLL_FIELDS, text), None, 0, None, False
            if action == "log":
                return hash_process(action, details, LOG_FIELDS, text), None, 0, None, False
        elif not inert(action):
            return None
    elif not is_plain_leaf(args):
        return None
    return hash_generic(details, text, NULL, -1, 0), None, 0, None, False


cdef object special_result(str tool, object args, object result):
    if tool != "exec" and tool != "wait" and tool != "process" and tool != "write":
        return None  # sends and update_plan: the reference's
    if type(result) is not dict:
        if is_plain_leaf(result):
            return hash_whole(result), None, 0, None, False
        return None
    content = (<dict>result).get("content", MISSING)
    details = (<dict>result).get("details", MISSING)
    if content is MISSING and details is MISSING:
        # A string status makes it a Code Mode receipt of exec/wait (§8.13).
        status = (<dict>result).get("status", MISSING)
        if tool == "process" or tool == "write" or status is MISSING or (
            is_plain_leaf(status) and type(status) is not str
        ):
            return hash_whole(result), None, 0, None, False
        return None
    status = None
    if type(details) is dict:
        status = (<dict>details).get("status")
        if status is not None and (type(status) is not str or status == "blocked"):
            return None  # a loop veto, maybe: the reference decides
    elif details is MISSING or is_plain_leaf(details):
        details = EMPTY_DETAILS
    else:
        return None
    text = content_text(None if content is MISSING else content)
    if text is None:
        return None
    if tool == "exec":
        if status is not None:
            return exec_outcome(<dict>details, <str>status, <str>text)
    elif tool == "write":
        if (<dict>details).get("changed") is False:
            return UNCHANGED, None, 0, None, True
    elif tool == "process":
        return process_outcome(args, <dict>details, <str>text)
    return hash_generic(details, text, NULL, -1, 0), None, 0, None, False


cdef object special_outcome(object tool_name, object args, object result, object error):
    """The outcome of a special tool's result read in C, or None: ask the reference."""
    if type(tool_name) is not str or result is _UNSET:
        return None
    if error is not _UNSET and error is not None:
        return None
    try:
        return special_result(<str>tool_name, args, result)
    except Exception:
        # A key whose == raises, say: the reference reads the result safely.
        return None

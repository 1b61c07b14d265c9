# cython: language_level=3, freethreading_compatible=True
"""How does one call become a row of a ``CallTable``? (compiled twin of the row builder)

The same rows as ``_rows_py`` (the reference), appended to the builder's packed
columns from C: the call and outcome hashes come from the compiled outcome
twin's C entry points (no Python call per hash), the known-poll flag and the
scope and name look-ups are read in C, and the row goes into the ``array``
columns without a tuple. The msgspec reading loop runs here too, so a common
line costs its decode, a few field reads and the hashing. Most tools' args are
only hashed: they stay JSON text (``formats._fast._RawEvent``) and are hashed
from it in C (``_json_canon.h``), never built. Before any of that, the loop
tries to read the line from its JSON text alone (``_rows_text.pxi``): the
fields found in C, the few str a row needs made, a plain str result hashed
from its text too; a line it is not sure of is decoded. Whatever C does not
read in full (a ``str`` subclass for a name, a hostile mapping, an outcome the
compiled twin is unsure of) runs the same Python code the reference does.
"""

from cpython cimport array
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.object cimport PyObject, PyTypeObject
from libc.stdint cimport uint64_t
from libc.string cimport memchr, memcmp, memcpy, memmove

from .._outcome_c cimport row_call_hash, row_outcome
from ..formats._lines_c cimport Lines

from .._outcome_py import is_known_poll as _is_known_poll
from .._scopes import scope_key as _scope_key
from ._rows_py import name_hash as _name_hash
from ._rows_py import read_events as _read_events
from .._records import KIND_TERMINAL_EXEC as _KIND_TERMINAL_EXEC
from .._records import KIND_VETO as _KIND_VETO
from .._outcome_py import CALL_DOMAIN as _CALL_DOMAIN

__all__ = ["IMPLEMENTATION", "Rows", "call_hash_of_json"]

IMPLEMENTATION = "cython"

cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        int type
        Py_ssize_t offset
    ctypedef struct PyMemberDescrObject:
        PyMemberDef *d_member
    PyTypeObject PyMemberDescr_Type

cdef extern from "structmember.h":
    int T_OBJECT_EX

cdef extern from "Python.h":
    const char *PyUnicode_AsUTF8AndSize(object text, Py_ssize_t *size) except NULL

cdef extern from "_json_canon.h":
    int LC_CANON_OK
    int lc_canon_call_hash(
        const unsigned char *domain, size_t domain_size, const unsigned char *name,
        size_t name_size, const unsigned char *args, size_t args_size, int untitled,
        uint64_t *hash,
    ) noexcept
    # The reader's buffer and string step, for a line read from its text (_rows_line.pxi).
    ctypedef struct lc_canon_buf:
        unsigned char *data
        size_t size
    ctypedef struct lc_canon_reader:
        const unsigned char *p
        const unsigned char *end
        const unsigned char *start
        lc_canon_buf *out
        int untitled
    void lc_canon_init(lc_canon_buf *b) noexcept
    void lc_canon_free(lc_canon_buf *b) noexcept
    unsigned char *lc_canon_room(lc_canon_buf *b, size_t n) noexcept
    int lc_canon_string(lc_canon_reader *r) noexcept
    uint64_t loopcore_xxh3_64(const void *data, size_t size) noexcept

include "_rows_line.pxi"
include "_rows_exec.pxi"


# The fields of an event (formats._fast._Event), in the order they are read.
cdef tuple EVENT_FIELDS = (
    "type", "tool", "args", "result", "error", "tool_call_id", "session", "run_id", "ts"
)
cdef enum:
    F_TYPE, F_TOOL, F_ARGS, F_RESULT, F_ERROR, F_CALL_ID, F_SESSION, F_RUN_ID, F_TS, F_COUNT

cdef object KIND_VETO = _KIND_VETO
cdef object KIND_TERMINAL = _KIND_TERMINAL_EXEC
cdef tuple READ_ERRORS = (TypeError, ValueError)
cdef bytes CALL_DOMAIN = _CALL_DOMAIN
cdef Py_ssize_t CALL_DOMAIN_SIZE = len(CALL_DOMAIN)


include "_rows_rules.pxi"


cdef bint field_offsets(object kind, Py_ssize_t *offsets) except -1:
    """Where each event field lives in an instance of ``kind``; False: read them by name.

    A msgspec struct keeps its fields as member slots (``T_OBJECT_EX``): read at
    their offsets they cost a load each instead of an attribute look-up. A
    subclass that retypes a field keeps its base's slot, so the descriptor is
    looked up along the MRO, as attribute access finds it.
    """
    cdef PyMemberDef *member
    for i, name in enumerate(EVENT_FIELDS):
        descriptor = None
        for klass in getattr(kind, "__mro__", ()):
            descriptor = getattr(klass, "__dict__", {}).get(name)
            if descriptor is not None:
                break
        if descriptor is None or type(descriptor) is not <object>&PyMemberDescr_Type:
            return False
        member = (<PyMemberDescrObject *><PyObject *>descriptor).d_member
        if member.type != T_OBJECT_EX or member.offset <= 0:
            return False
        offsets[i] = member.offset
    return True


cdef inline object slot(object event, Py_ssize_t offset, str name):
    """One field of an event, at its offset (by name when unset: its AttributeError)."""
    cdef PyObject *value = (<PyObject **>(<char *><PyObject *>event + offset))[0]
    if value is NULL:
        return getattr(event, name)
    return <object>value


cdef class Rows:
    """The rows of one builder: its columns, scopes and names, appended to call by call.

    It holds the builder's containers, not the builder (which holds it): no cycle.
    """

    cdef array.array scope_column
    cdef array.array hashes
    cdef array.array flags
    cdef dict seen
    cdef dict scope_ids
    cdef dict names
    cdef dict tool_hashes
    cdef set pending
    cdef object normalizers
    cdef object send_tools
    # The scope of the last call added by ``add``: a trace's calls come in runs of one scope.
    cdef object last_session
    cdef object last_run
    cdef object last_scope
    # For ``read_line``: tool names by their JSON text, with which of their results
    # are hashed from their text (``BY_TEXT_*``); each field's last JSON text and value.
    cdef list tool_texts
    cdef list tool_values
    cdef list tool_rules
    # Each cached tool's name hash, once ``append`` has asked ``name_of`` for it.
    cdef uint64_t tool_name_hashes[TOOL_CACHE]
    cdef bint tool_named[TOOL_CACHE]
    cdef int tool_polls[TOOL_CACHE]  # ``tool_poll`` of each
    cdef list field_texts
    cdef list field_values
    # How many lines ``read_line`` made rows of, and of how many it hashed the result
    # from its text (the tests read them).
    cdef readonly long long lines_read
    cdef readonly long long results_read

    def __init__(self, builder):
        # The builder never rebinds these (it grows them in place): they are held here.
        self.scope_column = builder._scope_column
        self.hashes = builder._hashes
        self.flags = builder._flags
        self.seen = builder._seen
        self.scope_ids = builder._scope_ids
        self.names = builder._names
        self.tool_hashes = builder._tool_hashes
        self.pending = builder._pending
        self.normalizers = builder._normalizers
        self.send_tools = builder._send_tools
        self.tool_texts = []
        self.tool_values = []
        self.tool_rules = []
        self.field_texts = [None] * LC_EV_COUNT
        self.field_values = [None] * LC_EV_COUNT

    def scope(self, session, run_id):
        """The id of the scope ``(session, run_id)``, numbered in order of first appearance."""
        key = _scope_key(session, run_id)
        scope = self.scope_ids.get(key)
        if scope is None:
            scope = self.scope_ids[key] = len(self.scope_ids)
        return scope

    def name(self, name):
        """The hash of a tool name, kept with the name for messages."""
        found = self.tool_hashes.get(name)
        if found is None:
            found = self.tool_hashes[name] = _name_hash(name)
            self.names.setdefault(found, name)
        return found

    cdef inline uint64_t name_of(self, object name) except? 0:
        cdef PyObject *found
        if type(name) is not str:
            return self.name(name)  # its own __hash__ and __eq__ run, as they do there
        found = PyDict_GetItem(self.tool_hashes, name)
        if found is NULL:
            return self.name(name)
        return <object>found

    cdef inline uint64_t known_name(self, object name, int tool) except? 0:
        """``name_of`` a name, kept in its tool cache entry ``tool`` (-1: none)."""
        if tool < 0:
            return self.name_of(name)
        if not self.tool_named[tool]:
            self.tool_name_hashes[tool] = self.name_of(name)
            self.tool_named[tool] = True
        return self.tool_name_hashes[tool]

    cdef Py_ssize_t add(self, object tool_name, object args, object result, object error,
                        object session, object run_id, int hashed=0,
                        uint64_t args_hash=0, Known *known=NULL) except -1:
        cdef bint cached = (
            (session is None or type(session) is str or type(session) is int)
            and (run_id is None or type(run_id) is str)
        )
        cdef PyObject *found = NULL
        if cached and self.last_scope is not None and (
            type(session) is type(self.last_session)
            and type(run_id) is type(self.last_run)
            and session == self.last_session
            and run_id == self.last_run
        ):
            # The key of the last call (same exact types, equal values): its dict entry.
            return self.append(
                self.last_scope, tool_name, args, result, error, hashed, args_hash, known
            )
        key = None
        if cached:
            key = (session, run_id)
            found = PyDict_GetItem(self.seen, key)
        if found is not NULL:
            scope = <object>found
        else:
            scope = self.scope(session, run_id)
            if cached:
                PyDict_SetItem(self.seen, key, scope)
        if cached:
            self.last_session = session
            self.last_run = run_id
            self.last_scope = scope
        return self.append(scope, tool_name, args, result, error, hashed, args_hash, known)

    cdef Py_ssize_t append(self, object scope, object tool_name, object args, object result,
                           object error, int hashed=0, uint64_t args_hash=0,
                           Known *known=NULL) except -1:
        # ``hashed`` (``raw_call_hash``'s answer): ``args_hash`` is the call hash,
        # read from the args' JSON text, and ``args`` None (no rule of this tool reads
        # them, and a tool whose known-poll flag does is never hashed so).
        # ``known`` (``read_line``): what the line's text told. An outcome: the hash
        # of a result read from its JSON text, with no unknown tool; EXEC_PLAIN: no
        # kind, no identity; EXEC_TERMINAL: a terminal exec failure and its identity.
        # A cached tool: its name hash kept there, once asked of ``name_of``.
        cdef uint64_t row_hashes[5]
        cdef unsigned char row_flags[8]
        cdef long long scope_id = scope
        cdef int outcome = 0 if known == NULL else known.outcome
        if not hashed:
            args_hash = row_call_hash(tool_name, args)
        if outcome:
            row_hashes[0] = self.known_name(tool_name, known.tool)
            row_hashes[2] = known.hash
            row_hashes[3] = 0
            row_hashes[4] = known.identity if outcome == EXEC_TERMINAL else 0
            row_flags[0] = 1
            row_flags[1] = 0
            row_flags[4] = 0
            row_flags[5] = outcome == EXEC_TERMINAL
            row_flags[6] = 0
        else:
            result_hash, unknown, kind, identity, no_progress = row_outcome(
                tool_name, args, result, error, self.normalizers, self.send_tools
            )
            row_hashes[0] = (
                self.name_of(tool_name) if known == NULL else self.known_name(tool_name, known.tool)
            )
            row_hashes[2] = 0 if result_hash is None else <uint64_t>result_hash
            row_hashes[3] = 0 if unknown is None else self.name_of(unknown)
            row_hashes[4] = 0 if identity is None else <uint64_t>identity
            row_flags[0] = result_hash is not None
            row_flags[1] = unknown is not None
            row_flags[4] = kind == KIND_VETO
            row_flags[5] = kind == KIND_TERMINAL
            row_flags[6] = bool(no_progress)
        row_hashes[1] = args_hash
        if known != NULL and known.poll >= 0:
            row_flags[2] = known.poll
        else:
            row_flags[2] = known_poll(tool_name, args)
        row_flags[3] = bool(self.pending) and scope in self.pending
        row_flags[7] = 0
        # Everything that could fail has run: the three columns grow together.
        if row_flags[3]:
            self.pending.discard(scope)
        array.extend_buffer(self.scope_column, <char *>&scope_id, 1)
        array.extend_buffer(self.hashes, <char *>row_hashes, 5)
        array.extend_buffer(self.flags, <char *>row_flags, 8)
        return len(self.scope_column) - 1

    def add_checked(self, tool_name, args, result, error, session, run_id):
        """``CallTableBuilder.add`` once ``tool_name`` is known to be a ``str``."""
        self.add(tool_name, args, result, error, session, run_id)

    def row(self, scope, tool_name, args, result, error):
        """Fingerprint one call and its outcome into a new row of ``scope``; its index."""
        return self.append(scope, tool_name, args, result, error)

    def read(self, lines, tick, array.array row_lines, slow, tuple decoder):
        """The msgspec reading loop (see ``_rows_py.Rows.read``); the last line's number."""
        decode, errors, missing, unset, every_, event_type = decoder[:6]
        cdef long long every = every_
        cdef long long number = 0
        cdef long long kept
        cdef Py_ssize_t at[F_COUNT]
        cdef uint64_t args_hash = 0
        cdef int hashed
        cdef bint read
        cdef const char *text
        cdef Py_ssize_t size
        cdef bint raw_args = len(decoder) > 6 and decoder[6] is not None
        # Lines read from their JSON text first (``read_line``), unless turned off.
        cdef bint by_text = raw_args and (len(decoder) <= 7 or bool(decoder[7]))
        decode_args = None
        if raw_args:
            decode, event_type, decode_args = decoder[6]
        if not field_offsets(event_type, at):
            # Fields not at plain slots: the reference loop reads them by name (and
            # decodes whole events).
            return _read_events(self.add_checked, lines, tick, row_lines, slow, decoder[:6])
        # A compiled line source hands its lines over without a tuple or an int each.
        cdef Lines source = <Lines>lines if type(lines) is Lines else None
        iterator = iter(lines) if source is None else None
        while True:
            if source is not None:
                # A span of the source's buffer: bytes are made only of a line decoded.
                if not source.next_span(&text, &size):
                    break
                number = source.number
                read = by_text and read_line(
                    self, <const unsigned char *>text, <size_t>size, decode_args, errors, unset
                )
                if not read:
                    line = PyBytes_FromStringAndSize(text, size)
            else:
                item = next(iterator, None)
                if item is None:
                    break
                number_, line = item
                number = number_
                read = by_text and type(line) is bytes and read_line(
                    self, <const unsigned char *>PyBytes_AS_STRING(line),
                    <size_t>PyBytes_GET_SIZE(line), decode_args, errors, unset
                )
            if read:
                kept = number
                array.extend_buffer(row_lines, <char *>&kept, 1)
                if number % every == 0:
                    tick()
                continue
            try:
                event = decode(line)
            except errors:
                slow(number, line)
                continue
            if type(event) is not event_type:
                raise TypeError(f"decoder: expected a {event_type.__name__}")
            kind = slot(event, at[F_TYPE], "type")
            tool = slot(event, at[F_TOOL], "tool")
            args = slot(event, at[F_ARGS], "args")
            ts = slot(event, at[F_TS], "ts")
            call_id = slot(event, at[F_CALL_ID], "tool_call_id")
            session = slot(event, at[F_SESSION], "session")
            if (
                type(kind) is not str
                or kind != "call"
                or type(tool) is not str
                or args is missing
                or not (ts is None or type(ts) is int or type(ts) is float or type(ts) is str)
                or not (call_id is None or type(call_id) is str)
                or (type(session) is float and session != session)
            ):
                slow(number, line)  # rare shapes: the reference judges them
                continue
            hashed = 0
            if raw_args:
                hashed = raw_call_hash(<str>tool, args, self.normalizers, &args_hash)
                if hashed:
                    args = None
                else:
                    try:
                        args = decode_args(args)  # as the whole line's decode reads them
                    except errors:
                        slow(number, line)
                        continue
            result = slot(event, at[F_RESULT], "result")
            error = slot(event, at[F_ERROR], "error")
            try:
                self.add(
                    tool,
                    args,
                    unset if result is missing else result,
                    unset if error is missing else error,
                    session,
                    slot(event, at[F_RUN_ID], "run_id"),
                    hashed,
                    args_hash,
                )
            except READ_ERRORS:
                slow(number, line)  # e.g. a bad run_id: the reference words the report
                continue
            kept = number
            array.extend_buffer(row_lines, <char *>&kept, 1)
            if number % every == 0:
                tick()
        return number


include "_rows_text.pxi"

# cython: language_level=3, freethreading_compatible=True
"""Where are recent calls kept, and what does one scan of them yield? (SPEC §3-4, compiled twin)

Same contract as ``_history_py``, laid out for a gateway hosting many runs: one
slab of numpy-backed arrays shaped ``(capacity_scopes, history_size)`` holds
every scope's ring of 64-bit hashes (tool name, args, result, tool-call id,
unknown tool name), its timestamps and flags. A scope is a row: a dict maps
the scope key to it, a free list recycles rows, an intrusive linked list keeps
them in LRU order, and the slab doubles when it is full. The strings that must
come back out (tool names, call ids, unknown tool names) live once each in a
side table keyed by hash, swept when it outgrows what the rings still use.

The common call is one C pass: hash the args, scan the row, append, with no
Python object created. Only when a count reaches ``alarm`` does the store build
a ``ScanStats`` and ask the verdict table, whose answers it caches.
"""

cimport cython
from cpython.dict cimport PyDict_Next, PyDict_Size
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.time cimport time as wall_clock
from cpython.unicode cimport (
    Py_UNICODE_ISSPACE,
    PyUnicode_CheckExact,
    PyUnicode_GET_LENGTH,
    PyUnicode_READ_CHAR,
)
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memset

from ._fingerprint_c cimport (
    Encoder,
    enc_digest,
    enc_free,
    enc_init,
    enc_list_header,
    enc_raw,
    enc_value,
    str_hash,
)

import dataclasses

import numpy as np

from ._outcome import UNSET, check_call_id, check_tool_name, is_known_poll
from ._outcome import hash_call as _py_hash_call
from ._records import NOT_STUCK, CallRecord, ScanStats
from ._scopes import scope_key as _py_scope_key

__all__ = ["IMPLEMENTATION", "HistoryStore"]

IMPLEMENTATION = "cython"

cdef extern from *:
    """
    /* CallRecord is a frozen slots dataclass: its fields are object slots at
       fixed offsets, which its own __init__ fills through object.__setattr__.
       The record builder fills them directly (new references, empty slots). */
    #include "structmember.h"
    static Py_ssize_t loopcore_member_offset(PyObject *descr) {
        if (Py_TYPE(descr) != &PyMemberDescr_Type) return -1;
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        return member->type == T_OBJECT_EX ? member->flags == 0 ? member->offset : -1 : -1;
    }
    static PyObject *loopcore_new_instance(PyTypeObject *type) {
        return type->tp_alloc(type, 0);
    }
    static void loopcore_fill_slot(PyObject *obj, Py_ssize_t offset, PyObject *value) {
        Py_INCREF(value);
        *(PyObject **)((char *)obj + offset) = value;
    }
    """
    Py_ssize_t member_offset "loopcore_member_offset" (object descr)
    void fill_slot "loopcore_fill_slot" (object obj, Py_ssize_t offset, object value)
    object new_instance "loopcore_new_instance" (PyTypeObject *type)

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define LOOPCORE_PREFETCH(p) __builtin_prefetch((const void *)(p))
    #else
    #define LOOPCORE_PREFETCH(p) ((void)(p))
    #endif
    """
    void prefetch "LOOPCORE_PREFETCH" (const void *p) noexcept nogil

cdef extern from "_lock.h":
    ctypedef struct loopcore_lock:
        pass
    void acquire "loopcore_lock_acquire" (loopcore_lock *lock)
    void release "loopcore_lock_release" (loopcore_lock *lock)

cdef extern from *:
    """
    #ifdef Py_GIL_DISABLED
    #define LOOPCORE_GIL_DISABLED 1
    #else
    #define LOOPCORE_GIL_DISABLED 0
    #endif
    """
    # With the GIL, a section that runs no Python code needs no lock of its own.
    const bint GIL_DISABLED "LOOPCORE_GIL_DISABLED"

cdef extern from *:
    """
    /* Values whose identity fixes their encoding: nothing can change them. */
    static int loopcore_is_immutable_scalar(PyObject *v) {
        return v == Py_None || PyUnicode_CheckExact(v) || PyLong_CheckExact(v)
            || PyFloat_CheckExact(v) || PyBool_Check(v);
    }
    """
    bint is_immutable_scalar "loopcore_is_immutable_scalar" (PyObject *value) noexcept

cdef enum:
    SLOT_EMPTY = -1
    SLOT_DELETED = -2
    HAS_RESULT = 1
    HAS_UNKNOWN = 2
    HAS_CALL_ID = 4
    # Verdicts are pure functions of a scan; this many distinct ones are remembered.
    VERDICT_CACHE_SIZE = 4096
    # The name table is first swept at this size, then at twice what survived.
    MIN_SWEEP = 1024
    # Entries of a flat args dict whose hash is remembered for the next call.
    MEMO_ENTRIES = 8

cdef bytes CALL_DOMAIN = b"loopcore:call\x00"
cdef bytes RESULT_DOMAIN = b"loopcore:result\x00"
cdef str RESULT_TAG = "result"
cdef dict EMPTY_DETAILS = {}
# A key absent from a result dict (UNSET itself could be a value there).
cdef object MISSING = object()

# In make_record's order; the fast path needs them to be all of CallRecord's fields.
_RECORD_FIELDS = (
    "tool_name",
    "args_hash",
    "tool_call_id",
    "session",
    "run_id",
    "timestamp",
    "result_hash",
    "unknown_tool_name",
)
cdef Py_ssize_t RECORD_OFFSETS[8]
cdef bint FAST_RECORDS = (
    {field.name for field in dataclasses.fields(CallRecord)} == set(_RECORD_FIELDS)
    and type(CallRecord).__new__ is type.__new__
    and CallRecord.__new__ is object.__new__
)
for _index, _name in enumerate(_RECORD_FIELDS):
    RECORD_OFFSETS[_index] = member_offset(CallRecord.__dict__[_name])
    FAST_RECORDS = FAST_RECORDS and RECORD_OFFSETS[_index] > 0
cdef PyTypeObject *RECORD_TYPE = <PyTypeObject*>CallRecord


cdef object make_record(
    object tool_name,
    uint64_t args_hash,
    object call_id,
    object key,
    double timestamp,
    uint64_t result_hash,
    bint has_result,
    object unknown,
):
    cdef object result = result_hash if has_result else None
    cdef tuple key_tuple = <tuple>key
    if not FAST_RECORDS:
        return CallRecord(
            tool_name, args_hash, call_id, key_tuple[0], key_tuple[1], timestamp, result, unknown
        )
    record = new_instance(RECORD_TYPE)
    fill_slot(record, RECORD_OFFSETS[0], tool_name)
    fill_slot(record, RECORD_OFFSETS[1], args_hash)
    fill_slot(record, RECORD_OFFSETS[2], call_id)
    fill_slot(record, RECORD_OFFSETS[3], key_tuple[0])
    fill_slot(record, RECORD_OFFSETS[4], key_tuple[1])
    fill_slot(record, RECORD_OFFSETS[5], timestamp)
    fill_slot(record, RECORD_OFFSETS[6], result)
    fill_slot(record, RECORD_OFFSETS[7], unknown)
    return record


cdef inline int64_t scope_hash(tuple key) except? -1:
    """A well-mixed 64-bit hash of a scope key's parts (str hashes are cached)."""
    cdef uint64_t h = <uint64_t>hash(key[0]) * 0x9E3779B97F4A7C15ULL
    h ^= <uint64_t>hash(key[1]) + 0x632BE59BD9B4E019ULL + (h << 6) + (h >> 2)
    h ^= h >> 31
    h *= 0xBF58476D1CE4E5B9ULL
    h ^= h >> 29
    return <int64_t>(h >> 1)


cdef inline uint64_t name_hash(object name) except? 0:
    """The hash a tool name, call id or unknown tool name is kept under.

    A str subclass hashes as its base string, as it encodes.
    """
    if type(name) is str:
        return str_hash(<str>name)
    return str_hash(str.__str__(name))


cdef inline bint plain_run_id(object run_id):
    """A str run id that needs no stripping (the common case)."""
    if type(run_id) is not str:
        return False
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(run_id)
    return n > 0 and not Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(run_id, 0)) and not (
        Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(run_id, n - 1))
    )


cdef inline object make_key(object session, object run_id):
    """The scope key; odd values go through the Python twin's validation."""
    cdef type kind = type(session)
    if (run_id is None or plain_run_id(run_id)) and (
        session is None or kind is str or kind is int
    ):
        return (session, run_id)
    return _py_scope_key(session, run_id)


cdef inline object valid_tool(object tool_name):
    if type(tool_name) is not str:
        check_tool_name(tool_name)
    return tool_name


cdef inline object valid_call_id(object call_id):
    if call_id is not None and type(call_id) is not str:
        check_call_id(call_id)
    return call_id


cdef uint64_t hash_call(object tool_name, object args) except? 0:
    """``_outcome.hash_call`` without the tuple: the same bytes, encoded in place."""
    if tool_name == "update_plan":
        return _py_hash_call(tool_name, args)
    cdef Encoder enc
    enc_init(&enc)
    try:
        enc_raw(&enc, <char*>CALL_DOMAIN, len(CALL_DOMAIN))
        enc_list_header(&enc, 2)
        enc_value(&enc, tool_name)
        enc_value(&enc, args)
        return enc_digest(&enc)
    finally:
        enc_free(&enc)


cdef inline bint is_plain_leaf(object value):
    """Values that are certainly not mappings (a result that is hashed whole)."""
    cdef type kind = type(value)
    return (
        value is None
        or kind is str
        or kind is int
        or kind is float
        or kind is bool
        or kind is list
        or kind is tuple
        or kind is bytes
    )


cdef object content_text(object content):
    """``_outcome._content_text`` for plain lists of plain dicts; None means "ask Python"."""
    if type(content) is dict or (
        is_plain_leaf(content) and type(content) is not list and type(content) is not tuple
    ):
        return ""
    if type(content) is not list and type(content) is not tuple:
        return None
    # One text entry is the common case: keep it without building a list.
    first = None
    texts = None
    for entry in content:
        if type(entry) is dict:
            kind = (<dict>entry).get("type")
            text = (<dict>entry).get("text")
            if isinstance(kind, str) and isinstance(text, str):
                if first is None:
                    first = text
                elif texts is None:
                    texts = [first, text]
                else:
                    texts.append(text)
        elif not is_plain_leaf(entry):
            return None
    if first is None:
        return ""
    # str.join gives an exact str, as the Python rule's join does: a str
    # subclass's own strip() must not run.
    joined = first if texts is None and type(first) is str else "\n".join(texts or [first])
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(joined)
    if n and (
        Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(joined, 0))
        or Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(joined, n - 1))
    ):
        return joined.strip()
    return joined


cdef uint64_t hash_whole(object value) except? 0:
    cdef Encoder enc
    enc_init(&enc)
    try:
        enc_raw(&enc, <char*>RESULT_DOMAIN, len(RESULT_DOMAIN))
        enc_value(&enc, value)
        return enc_digest(&enc)
    finally:
        enc_free(&enc)


cdef uint64_t hash_generic(object details, object text) except? 0:
    """The generic rule of SPEC §2: the hash of ("result", details, text)."""
    cdef Encoder enc
    enc_init(&enc)
    try:
        enc_raw(&enc, <char*>RESULT_DOMAIN, len(RESULT_DOMAIN))
        enc_list_header(&enc, 3)
        enc_value(&enc, RESULT_TAG)
        enc_value(&enc, details)
        enc_value(&enc, text)
        return enc_digest(&enc)
    finally:
        enc_free(&enc)


cdef struct RowMeta:
    int32_t head
    int32_t fill
    int32_t older
    int32_t newer
    # The scope key's hash and parts (borrowed: row_keys holds the key), so a
    # lookup that is handed the same objects never leaves this cache line.
    int64_t key_hash
    PyObject *session
    PyObject *run_id


cdef struct Slot:
    # One entry of the open-addressing table from scope key to row: the low
    # half of the key's hash (the row's bookkeeping has all of it) and the row.
    uint32_t key_hash
    int32_t row


cdef struct Memo:
    # A flat args dict and its hash, with owned references to the dict, the
    # tool name and every key and value (all immutable scalars).
    PyObject *args
    PyObject *tool
    PyObject *items[2 * MEMO_ENTRIES]
    Py_ssize_t size
    uint64_t hash


cdef bint memo_take(Memo *memo, object tool_name, dict args) noexcept:
    """Fill ``memo`` with owned references when every entry qualifies."""
    cdef Py_ssize_t pos = 0, i = 0, n = PyDict_Size(args)
    cdef PyObject *key
    cdef PyObject *value
    if n > MEMO_ENTRIES:
        return False
    while PyDict_Next(args, &pos, &key, &value):
        if i >= 2 * n or not (is_immutable_scalar(value) and PyUnicode_CheckExact(<object>key)):
            return False
        memo.items[i] = key
        memo.items[i + 1] = value
        i += 2
    if i != 2 * n:
        return False
    for i in range(2 * n):
        Py_INCREF(<object>memo.items[i])
    Py_INCREF(args)
    Py_INCREF(tool_name)
    memo.args = <PyObject*>args
    memo.tool = <PyObject*>tool_name
    memo.size = n
    memo.hash = 0
    return True


cdef bint memo_matches(Memo *memo, object tool_name, object args) noexcept:
    """Is ``args`` the remembered dict, holding the very same entries?"""
    if memo.args == NULL or <PyObject*>args != memo.args or <PyObject*>tool_name != memo.tool:
        return False
    if PyDict_Size(args) != memo.size:
        return False
    cdef Py_ssize_t pos = 0, i = 0
    cdef PyObject *key
    cdef PyObject *value
    while PyDict_Next(args, &pos, &key, &value):
        if key != memo.items[i] or value != memo.items[i + 1]:
            return False
        i += 2
    return True


cdef void memo_release(Memo *memo) noexcept:
    """Empty ``memo`` first, then drop its references (finalisers may re-enter)."""
    cdef Memo old = memo[0]
    memo.args = NULL
    memo.tool = NULL
    memo.size = 0
    if old.args == NULL:
        return
    cdef Py_ssize_t i
    for i in range(2 * old.size):
        Py_DECREF(<object>old.items[i])
    Py_DECREF(<object>old.args)
    Py_DECREF(<object>old.tool)


cdef struct Scan:
    int64_t recent
    int64_t streak
    uint64_t reference
    int64_t has_reference
    int64_t unknown_streak
    uint64_t unknown_hash
    int64_t pingpong
    uint64_t paired_tool
    uint64_t paired_hash
    int64_t no_progress
    uint64_t tool_hash
    uint64_t args_hash
    int64_t known_poll


@cython.final
cdef class HistoryStore:
    """Per-scope rings of the last ``history_size`` records, at most ``max_scopes`` scopes."""

    cdef readonly Py_ssize_t history_size
    cdef readonly Py_ssize_t max_scopes
    cdef readonly Py_ssize_t capacity
    cdef Py_ssize_t live
    cdef int64_t alarm
    cdef int64_t unknown_alarm
    cdef object verdict_fn
    cdef object outcome_fn
    cdef frozenset exclusions

    # the slab, (capacity, history_size); the arrays own the memory the pointers see
    cdef readonly object tool_hashes, args_hashes, result_hashes, call_id_hashes
    cdef readonly object unknown_hashes, timestamps, flags
    cdef uint64_t *tool
    cdef uint64_t *args
    cdef uint64_t *result
    cdef uint64_t *call_id
    cdef uint64_t *unknown
    cdef double *ts
    cdef uint8_t *flag

    # per row, side by side so a row's bookkeeping is one cache line: next
    # write slot, records held, LRU neighbours; and the stack of free rows
    cdef object row_meta, free_list
    cdef RowMeta *meta
    cdef int32_t *free_rows
    # scope key -> row: linear probing over (hash, row) slots, so finding a
    # row costs one slot and its own bookkeeping line, not a dict's entries,
    # a key tuple and an int object
    cdef object table
    cdef Slot *slots
    cdef Py_ssize_t table_mask
    cdef Py_ssize_t table_used
    cdef Py_ssize_t free_count
    cdef int32_t oldest_row
    cdef int32_t newest_row

    cdef list row_keys
    cdef dict by_session
    cdef readonly dict names
    cdef Py_ssize_t sweep_at
    cdef dict verdicts
    cdef loopcore_lock lock

    # The last flat args dict hashed, with owned references to its keys and
    # values: a gateway hashes the same args for the check, the record and the
    # outcome, and identical immutable entries mean identical bytes.
    cdef Memo memo
    # The last scope key and tool name seen, reused while the caller passes the
    # same objects (GIL builds only: replacing them must not race).
    cdef object last_key
    cdef object last_tool
    cdef uint64_t last_tool_hash
    # The key object whose row was found last (caller holds the lock).
    cdef object found_key
    cdef Py_ssize_t found_row
    # The last tool name found to have no special outcome rule.
    cdef object plain_tool
    # The tool name interned last: interned again only after a sweep.
    cdef uint64_t interned_tool
    cdef bint has_interned_tool

    def __init__(
        self,
        Py_ssize_t history_size,
        max_scopes,
        *,
        alarm,
        unknown_alarm,
        verdict,
        outcome,
        plain_outcome_exclusions=(),
    ):
        if self.capacity:
            raise RuntimeError("HistoryStore is already initialised")
        if isinstance(max_scopes, bool) or not isinstance(max_scopes, int) or max_scopes < 1:
            raise ValueError(f"max_scopes: expected a positive integer, got {max_scopes!r}")
        if history_size < 1:
            raise ValueError(f"history_size: expected a positive integer, got {history_size}")
        if history_size * 8 > (1 << 40):
            raise ValueError(f"history_size: too large for a ring slab, got {history_size}")
        self.history_size = history_size
        self.max_scopes = min(max_scopes, 0x7FFFFFFF)
        self.alarm = alarm
        self.unknown_alarm = unknown_alarm
        self.verdict_fn = verdict
        self.outcome_fn = outcome
        self.exclusions = frozenset(plain_outcome_exclusions)
        self.row_keys = []
        self.by_session = {}
        self.names = {}
        self.sweep_at = MIN_SWEEP
        self.verdicts = {}
        self.last_key = (None, None)
        self.last_tool = None
        self.capacity = 0
        self.live = 0
        self.free_count = 0
        self.oldest_row = -1
        self.newest_row = -1
        self.grow(min(self.max_scopes, 8))
        self.resize_table(16)

    def __len__(self):
        return self.live

    def __dealloc__(self):
        memo_release(&self.memo)

    # -- internals: the args memo -----------------------------------------------------------

    cdef uint64_t args_hash(self, object tool_name, object args) except? 0:
        cdef Memo fresh, old
        cdef uint64_t found
        if GIL_DISABLED:
            acquire(&self.lock)
            try:
                if memo_matches(&self.memo, tool_name, args):
                    return self.memo.hash
            finally:
                release(&self.lock)
        elif memo_matches(&self.memo, tool_name, args):
            return self.memo.hash
        # The entries are taken before hashing and must still be there after:
        # whatever ran meanwhile (a value's repr, another thread), the hash
        # is only remembered for the contents it was computed from.
        cdef bint keep = type(args) is dict and memo_take(&fresh, tool_name, <dict>args)
        try:
            found = hash_call(tool_name, args)
        except BaseException:
            if keep:
                memo_release(&fresh)
            raise
        if not keep:
            return found
        if not memo_matches(&fresh, tool_name, args):
            memo_release(&fresh)
            return found
        fresh.hash = found
        if GIL_DISABLED:
            acquire(&self.lock)
        old = self.memo
        self.memo = fresh
        if GIL_DISABLED:
            release(&self.lock)
        # Released last: a finaliser it runs sees the new memo, never a half one.
        memo_release(&old)
        return found

    cdef object key_of(self, object session, object run_id):
        cdef tuple last
        if not GIL_DISABLED:
            last = <tuple>self.last_key
            if session is last[0] and run_id is last[1]:
                return last
        key = make_key(session, run_id)
        # Only keys whose release runs no Python code (no session finaliser).
        if not GIL_DISABLED and (<tuple>key)[0] is session and (<tuple>key)[1] is run_id and (
            session is None or type(session) is str or type(session) is int
        ):
            self.last_key = key
        return key

    cdef uint64_t tool_hash(self, object tool_name) except? 0:
        if not GIL_DISABLED and tool_name is self.last_tool:
            return self.last_tool_hash
        cdef uint64_t found = name_hash(tool_name)
        if not GIL_DISABLED and type(tool_name) is str:
            self.last_tool = tool_name
            self.last_tool_hash = found
        return found

    # -- per call ---------------------------------------------------------------------------

    cpdef object check(self, tool_name, args, session, run_id):
        """The verdict for a call about to run; records nothing."""
        key = self.key_of(session, run_id)
        valid_tool(tool_name)
        self.warm_row(key)
        cdef uint64_t args_hash = self.args_hash(tool_name, args)
        cdef uint64_t tool_hash = self.tool_hash(tool_name)
        cdef Scan scan
        cdef Py_ssize_t row
        acquire(&self.lock)
        try:
            row = self.find_row(key)
            if row < 0 or not self.scan_row(row, tool_hash, args_hash, &scan):
                return NOT_STUCK
            names = self.names_of(&scan)
        finally:
            release(&self.lock)
        return self.decide(&scan, tool_name, args, names)

    cpdef object check_and_record(self, tool_name, args, tool_call_id, session, run_id):
        """``check``, then record the call unless the verdict is critical."""
        key = self.key_of(session, run_id)
        valid_tool(tool_name)
        valid_call_id(tool_call_id)
        self.warm_row(key)
        cdef uint64_t args_hash = self.args_hash(tool_name, args)
        cdef uint64_t tool_hash = self.tool_hash(tool_name)
        cdef uint64_t call_hash = name_hash(tool_call_id) if tool_call_id is not None else 0
        cdef double now = wall_clock()
        cdef Scan scan
        cdef Py_ssize_t row
        acquire(&self.lock)
        try:
            row = self.find_row(key)
            if row < 0 or not self.scan_row(row, tool_hash, args_hash, &scan):
                self.append(
                    key, row, tool_name, tool_hash, args_hash, tool_call_id, call_hash, now,
                    0, False, None, 0,
                )
                return NOT_STUCK
            names = self.names_of(&scan)
        finally:
            release(&self.lock)
        verdict = self.decide(&scan, tool_name, args, names)
        if verdict.level != "critical":
            acquire(&self.lock)
            try:
                self.append(
                    key, self.find_row(key), tool_name, tool_hash, args_hash, tool_call_id,
                    call_hash, now, 0, False, None, 0,
                )
            finally:
                release(&self.lock)
        return verdict

    cdef void warm_row(self, object key) except *:
        """Start fetching the scope's row, so that hashing the args hides the wait.

        With many live scopes a row is rarely in cache; the scan reads its args
        column and newest slot, the append writes next to them.
        """
        cdef Py_ssize_t row, slot, index, offset
        if not GIL_DISABLED and key is self.found_key:
            return  # the row this key found last: just used, still cached
        acquire(&self.lock)
        try:
            # A lookup, not a use: the LRU order changes only when the call does.
            row = self.lookup(key)
            if row < 0:
                return
            slot = self.meta[row].head
            index = row * self.history_size + (slot - 1 if slot > 0 else self.history_size - 1)
            # The first lines of the column; the hardware prefetcher follows on.
            for offset in range(0, min(self.history_size, 256), 8):
                prefetch(&self.args[row * self.history_size + offset])
            prefetch(&self.tool[index])
            prefetch(&self.result[index])
            prefetch(&self.flag[index])
            prefetch(&self.ts[row * self.history_size + slot])
        finally:
            release(&self.lock)

    cpdef object record_call(self, tool_name, args, tool_call_id, session, run_id):
        """Append a call without outcome."""
        key = self.key_of(session, run_id)
        valid_tool(tool_name)
        cdef uint64_t args_hash = self.args_hash(tool_name, args)
        valid_call_id(tool_call_id)
        cdef uint64_t tool_hash = self.tool_hash(tool_name)
        cdef uint64_t call_hash = name_hash(tool_call_id) if tool_call_id is not None else 0
        cdef double now = wall_clock()
        acquire(&self.lock)
        try:
            self.append(
                key, self.find_row(key), tool_name, tool_hash, args_hash, tool_call_id,
                call_hash, now, 0, False, None, 0,
            )
        finally:
            release(&self.lock)

    cpdef object record_outcome(
        self, tool_name, args, result, error, tool_call_id, session, run_id
    ):
        """Fill the newest pending record of this call, or append one.

        Returns the record; with no outcome hash nothing is recorded and it is None.
        """
        key = self.key_of(session, run_id)
        valid_tool(tool_name)
        cdef uint64_t args_hash = self.args_hash(tool_name, args)
        valid_call_id(tool_call_id)
        cdef uint64_t result_hash = 0
        unknown = None
        if not self.plain_outcome(tool_name, result, error, &result_hash):
            found = self.outcome_fn(tool_name, args, result, error)
            if found[0] is None:
                return None
            result_hash = found[0]
            unknown = found[1]
        cdef uint64_t tool_hash = self.tool_hash(tool_name)
        cdef uint64_t call_hash = name_hash(tool_call_id) if tool_call_id is not None else 0
        cdef uint64_t unknown_hash = name_hash(unknown) if unknown is not None else 0
        cdef double now
        cdef Py_ssize_t row, slot, index, _n, base
        cdef int32_t h = <int32_t>self.history_size
        acquire(&self.lock)
        try:
            row = self.find_row(key)
            if row >= 0:
                base = row * self.history_size
                slot = self.meta[row].head
                for _n in range(self.meta[row].fill):
                    slot = slot - 1 if slot > 0 else h - 1
                    index = base + slot
                    if (
                        not (self.flag[index] & HAS_RESULT)
                        and self.args[index] == args_hash
                        and self.tool[index] == tool_hash
                        and (
                            tool_call_id is None
                            or (self.flag[index] & HAS_CALL_ID and self.call_id[index] == call_hash)
                        )
                    ):
                        self.result[index] = result_hash
                        self.flag[index] |= HAS_RESULT
                        if unknown is not None:
                            self.unknown[index] = unknown_hash
                            self.flag[index] |= HAS_UNKNOWN
                            self.intern(unknown_hash, unknown)
                        record = make_record(
                            tool_name, args_hash, self.name_of(index, HAS_CALL_ID), key,
                            self.ts[index], result_hash, True, unknown,
                        )
                        return record
            now = wall_clock()
            self.append(
                key, row, tool_name, tool_hash, args_hash, tool_call_id, call_hash, now,
                result_hash, True, unknown, unknown_hash,
            )
        finally:
            release(&self.lock)
        return make_record(tool_name, args_hash, tool_call_id, key, now, result_hash, True, unknown)

    def bind_gateway(self, enabled, guard, armed, allowed):
        """``before_call`` / ``after_call`` for a ``ToolLoopGuard`` (see ``GatewayCalls``)."""
        return GatewayCalls(self, enabled, guard, armed, allowed)

    def bind_detector(self, enabled, disabled_check):
        """``check`` / ``record_call`` / ``record_outcome`` for a ``LoopDetector``."""
        return DetectorCalls(self, enabled, disabled_check)

    # -- per scope --------------------------------------------------------------------------

    def history(self, session, run_id):
        """The scope's records, oldest first."""
        key = self.key_of(session, run_id)
        cdef Py_ssize_t row, slot, index, _n, count
        out = []
        acquire(&self.lock)
        try:
            row = self.find_row(key)
            if row < 0:
                return out
            count = self.meta[row].fill
            slot = self.meta[row].head - count
            if slot < 0:
                slot += self.history_size
            for _n in range(count):
                index = row * self.history_size + slot
                out.append(
                    make_record(
                        self.names[self.tool[index]],
                        self.args[index],
                        self.name_of(index, HAS_CALL_ID),
                        key,
                        self.ts[index],
                        self.result[index],
                        self.flag[index] & HAS_RESULT,
                        self.name_of(index, HAS_UNKNOWN),
                    )
                )
                slot = slot + 1 if slot + 1 < self.history_size else 0
        finally:
            release(&self.lock)
        return out

    def drop(self, session, run_id):
        key = self.key_of(session, run_id)
        cdef Py_ssize_t row
        acquire(&self.lock)
        try:
            row = self.lookup(key)
            if row < 0:
                return False
            self.release(key, row)
        finally:
            release(&self.lock)
        return True

    def drop_session(self, session):
        _py_scope_key(session, None)
        cdef Py_ssize_t dropped = 0, row
        acquire(&self.lock)
        try:
            entry = self.by_session.get(session)
            if entry is None:
                return 0
            keys = list(entry) if type(entry) is set else [entry]
            for key in keys:
                row = self.lookup(key)
                if row >= 0:  # always, unless a key's hash changed since it was stored
                    self.release(key, row)
                    dropped += 1
        finally:
            release(&self.lock)
        return dropped

    def scan(self, key, tool_name, args_hash):
        """Every SPEC §4 count for a call about to run, as a ``ScanStats`` (for tests)."""
        cdef Scan scan
        cdef Py_ssize_t row
        acquire(&self.lock)
        try:
            row = self.find_row(key)
            if row < 0:
                return ScanStats()
            self.scan_row(row, name_hash(tool_name), args_hash, &scan)
            return self.stats_of(&scan, self.names_of(&scan))
        finally:
            release(&self.lock)

    # -- internals: verdicts ----------------------------------------------------------------

    cdef object decide(self, Scan *scan, object tool_name, object args, tuple names):
        """The verdict for an alarmed scan: cached, or asked of the verdict table."""
        if tool_name == "command_status":
            scan.known_poll = 1
        elif tool_name == "process":
            scan.known_poll = 1 if is_known_poll(tool_name, args) else 0
        else:
            scan.known_poll = 0
        cdef Encoder enc
        enc_init(&enc)
        enc_raw(&enc, scan, sizeof(Scan))
        cache_key = enc_digest(&enc)
        enc_free(&enc)
        verdict = self.verdicts.get(cache_key)
        if verdict is not None:
            return verdict
        stats = self.stats_of(scan, names)
        verdict = self.verdict_fn(stats, tool_name, scan.args_hash, bool(scan.known_poll))
        if len(self.verdicts) >= VERDICT_CACHE_SIZE:
            self.verdicts.clear()
        self.verdicts[cache_key] = verdict
        return verdict

    cdef tuple names_of(self, Scan *scan):
        """The unknown tool's and the paired tool's names (caller holds the lock)."""
        return (
            self.names[scan.unknown_hash] if scan.unknown_streak else None,
            self.names[scan.paired_tool] if scan.pingpong else None,
        )

    cdef object stats_of(self, Scan *scan, tuple names):
        return ScanStats(
            recent=scan.recent,
            streak=scan.streak,
            reference=scan.reference if scan.has_reference else None,
            unknown_streak=scan.unknown_streak,
            unknown_name=names[0],
            pingpong=scan.pingpong,
            paired_tool=names[1],
            paired_hash=scan.paired_hash,
            pingpong_no_progress=bool(scan.pingpong and scan.no_progress),
        )

    cdef bint scan_row(
        self, Py_ssize_t row, uint64_t tool_hash, uint64_t args_hash, Scan *out
    ) noexcept:
        """One newest-first pass over a row (``_history_py._scan``); True when alarmed."""
        cdef Py_ssize_t h = self.history_size
        cdef Py_ssize_t base = row * h
        cdef Py_ssize_t count = self.meta[row].fill
        cdef Py_ssize_t slot = self.meta[row].head
        cdef Py_ssize_t position, index
        memset(out, 0, sizeof(Scan))
        out.tool_hash = tool_hash
        out.args_hash = args_hash
        if count == 0:
            return False
        slot = slot - 1 if slot > 0 else h - 1
        index = base + slot
        cdef uint64_t *tool = self.tool
        cdef uint64_t *args = self.args
        cdef uint64_t *result = self.result
        cdef uint64_t *unknown = self.unknown
        cdef uint8_t *flag = self.flag

        cdef uint64_t side_a = args[index], side_b = 0
        cdef bint has_b = False
        cdef Py_ssize_t tail = 1
        cdef bint tail_open = True
        cdef uint64_t result_a = result[index], result_b = 0
        cdef bint no_progress = (flag[index] & HAS_RESULT) != 0
        cdef uint64_t newest_tool = tool[index]
        cdef uint64_t unknown_hash = unknown[index]
        cdef bint unknown_open = newest_tool == tool_hash and (flag[index] & HAS_UNKNOWN) != 0
        cdef int64_t unknown_streak = 0, recent = 0, streak = 0
        cdef uint64_t reference = 0
        cdef bint has_reference = False, streak_open = True
        cdef uint64_t record_hash, record_result
        cdef bint has_result
        cdef Py_ssize_t i

        # Most calls are new: no earlier record has their hash, so there is no
        # streak, no recent count and no ping-pong (that needs h == B, an
        # earlier hash). Counting matches in memory order is one tight loop the
        # compiler vectorises; the newest-first walk is for the rest.
        if not unknown_open:
            for i in range(count):
                recent += args[base + i] == args_hash
            if recent == 0:
                out.paired_hash = side_a
                out.no_progress = no_progress
                return False
            recent = 0

        # Only the args column is read for every record; results and flags are
        # read for matches and the alternating tail, so a scan of a cold row
        # touches few cache lines.
        for position in range(count):
            record_hash = args[index]
            if record_hash == args_hash:
                recent += 1
                if streak_open and flag[index] & HAS_RESULT:
                    record_result = result[index]
                    if not has_reference:
                        reference = record_result
                        has_reference = True
                        streak = 1
                    elif record_result == reference:
                        streak += 1
                    else:
                        streak_open = False
            if unknown_open:
                if (
                    tool[index] == tool_hash
                    and (flag[index] & HAS_UNKNOWN)
                    and unknown[index] == unknown_hash
                ):
                    unknown_streak += 1
                else:
                    unknown_open = False
            if tail_open and position > 0:
                has_result = (flag[index] & HAS_RESULT) != 0
                record_result = result[index] if has_result else 0
                if position == 1:
                    if record_hash == side_a:
                        tail_open = False
                    else:
                        side_b = record_hash
                        has_b = True
                        result_b = record_result
                elif record_hash != (side_a if position % 2 == 0 else side_b):
                    tail_open = False
                if tail_open:
                    tail += 1
                    if not has_result:
                        no_progress = False
                    elif position % 2 == 0:
                        no_progress = no_progress and record_result == result_a
                    else:
                        no_progress = no_progress and record_result == result_b
            slot = slot - 1 if slot > 0 else h - 1
            index = base + slot

        out.recent = recent
        out.streak = streak
        out.reference = reference
        out.has_reference = has_reference
        out.unknown_streak = unknown_streak
        out.unknown_hash = unknown_hash if unknown_streak else 0
        out.pingpong = tail + 1 if tail >= 2 and has_b and args_hash == side_b else 0
        out.paired_tool = newest_tool if out.pingpong else 0
        out.paired_hash = side_a
        out.no_progress = no_progress
        return (
            recent >= self.alarm
            or out.pingpong >= self.alarm
            or unknown_streak >= self.unknown_alarm
        )

    # -- internals: outcomes ----------------------------------------------------------------

    cdef bint plain_outcome(
        self, object tool_name, object result, object error, uint64_t *out
    ) except -1:
        """Hash the common outcomes here; False leaves the outcome to the Python rules.

        Covers results of tools with no special rule, no normaliser and no send
        declaration: plain values hashed whole, and tool-result dicts under the
        generic rule (no loop veto in sight). Anything unusual goes to Python.
        """
        if error is not UNSET and error is not None:
            return False
        if result is UNSET:
            return False
        if GIL_DISABLED or tool_name is not self.plain_tool:
            if tool_name in self.exclusions:
                return False
            if not GIL_DISABLED and type(tool_name) is str:
                self.plain_tool = tool_name
        if type(result) is not dict:
            if is_plain_leaf(result):
                out[0] = hash_whole(result)
                return True
            return False
        content = (<dict>result).get("content", MISSING)
        details = (<dict>result).get("details", MISSING)
        if content is MISSING and details is MISSING:
            out[0] = hash_whole(result)
            return True
        if type(details) is dict:
            status = (<dict>details).get("status")
            if status is not None and (type(status) is not str or status == "blocked"):
                return False
        elif details is MISSING or is_plain_leaf(details):
            details = EMPTY_DETAILS
        else:
            return False
        text = content_text(None if content is MISSING else content)
        if text is None:
            return False
        out[0] = hash_generic(details, text)
        return True

    # -- internals: rows --------------------------------------------------------------------

    cdef Py_ssize_t find_row(self, object key) except -2:
        """The key's row, marked most recently used; -1 when the scope has none."""
        cdef Py_ssize_t row
        if key is self.found_key:
            row = self.found_row
        else:
            row = self.lookup(key)
            if row < 0:
                return -1
            # Only the stored key is remembered: a caller's equal key (and the
            # objects in it) must not outlive the call.
            if self.row_keys[row] is key:
                self.found_key = key
                self.found_row = row
        self.touch(<int32_t>row)
        return row

    cdef Py_ssize_t lookup(self, object key) except -2:
        """The key's row or -1, without touching the LRU order."""
        cdef tuple parts = <tuple>key
        cdef int64_t key_hash = scope_hash(parts)
        cdef Py_ssize_t index = <Py_ssize_t>(<uint64_t>key_hash & <uint64_t>self.table_mask)
        cdef int32_t row
        cdef RowMeta *meta
        while True:
            row = self.slots[index].row
            if row == SLOT_EMPTY:
                return -1
            if row >= 0 and self.slots[index].key_hash == <uint32_t>key_hash:
                meta = &self.meta[row]
                if (meta.session == <PyObject*>parts[0] and meta.run_id == <PyObject*>parts[1]) or (
                    self.row_keys[row] == key
                ):
                    return row
            index = (index + 1) & self.table_mask

    cdef int table_insert(self, int32_t row) except -1:
        # The caller made room: at most half the slots are in use.
        cdef int64_t key_hash = self.meta[row].key_hash
        cdef Py_ssize_t index = <Py_ssize_t>(<uint64_t>key_hash & <uint64_t>self.table_mask)
        while self.slots[index].row >= 0:
            index = (index + 1) & self.table_mask
        if self.slots[index].row == SLOT_EMPTY:
            self.table_used += 1
        self.slots[index].key_hash = <uint32_t>key_hash
        self.slots[index].row = row
        return 0

    cdef void table_delete(self, int32_t row) noexcept:
        # Tombstoned, not emptied, so that probes for keys further on go on.
        cdef int64_t key_hash = self.meta[row].key_hash
        cdef Py_ssize_t index = <Py_ssize_t>(<uint64_t>key_hash & <uint64_t>self.table_mask)
        while self.slots[index].row != row:
            index = (index + 1) & self.table_mask
        self.slots[index].row = SLOT_DELETED

    cdef int resize_table(self, Py_ssize_t wanted) except -1:
        """Rebuild the table, without tombstones, at most half full with ``wanted`` keys."""
        cdef Py_ssize_t size = 16, index
        while size < 2 * wanted:
            size *= 2
        table = np.empty(size * sizeof(Slot), dtype=np.uint8)
        cdef uint8_t[::1] view = table
        cdef Slot *slots = <Slot*>&view[0]
        for index in range(size):
            slots[index].row = SLOT_EMPTY
        cdef int32_t row = self.newest_row
        cdef int64_t key_hash
        while row >= 0:
            key_hash = self.meta[row].key_hash
            index = <Py_ssize_t>(<uint64_t>key_hash & <uint64_t>(size - 1))
            while slots[index].row != SLOT_EMPTY:
                index = (index + 1) & (size - 1)
            slots[index].key_hash = <uint32_t>key_hash
            slots[index].row = row
            row = self.meta[row].older
        self.table = table
        self.slots = slots
        self.table_mask = size - 1
        self.table_used = self.live
        return 0

    cdef int append(
        self,
        object key,
        Py_ssize_t row,
        object tool_name,
        uint64_t tool_hash,
        uint64_t args_hash,
        object call_id,
        uint64_t call_hash,
        double now,
        uint64_t result_hash,
        bint has_result,
        object unknown,
        uint64_t unknown_hash,
    ) except -1:
        if row < 0:
            row = self.new_row(key)
        cdef Py_ssize_t slot = self.meta[row].head
        cdef Py_ssize_t index = row * self.history_size + slot
        cdef uint8_t flags = 0
        self.tool[index] = tool_hash
        self.args[index] = args_hash
        self.ts[index] = now
        # Absent fields keep stale values: the flags say what is there, and
        # leaving them untouched spares a cold row three cache lines.
        if has_result:
            flags |= HAS_RESULT
            self.result[index] = result_hash
        if call_id is not None:
            flags |= HAS_CALL_ID
            self.call_id[index] = call_hash
        if unknown is not None:
            flags |= HAS_UNKNOWN
            self.unknown[index] = unknown_hash
        self.flag[index] = flags
        self.meta[row].head = <int32_t>(slot + 1 if slot + 1 < self.history_size else 0)
        if self.meta[row].fill < self.history_size:
            self.meta[row].fill += 1
        # Names are interned after the slot is written, so a sweep keeps them.
        if tool_hash != self.interned_tool or not self.has_interned_tool:
            self.intern(tool_hash, tool_name)
            self.interned_tool = tool_hash
            self.has_interned_tool = True
        if call_id is not None:
            self.intern(call_hash, call_id)
        if unknown is not None:
            self.intern(unknown_hash, unknown)
        return 0

    cdef object name_of(self, Py_ssize_t index, uint8_t which):
        if not (self.flag[index] & which):
            return None
        return self.names[self.call_id[index] if which == HAS_CALL_ID else self.unknown[index]]

    cdef int intern(self, uint64_t name_hash, object name) except -1:
        cdef dict names = self.names
        key = name_hash
        if key in names:
            return 0
        names[key] = name
        if len(names) > self.sweep_at:
            self.sweep()
        return 0

    cdef int sweep(self) except -1:
        """Forget names no record uses any more (amortised: the table must double first)."""
        cdef Py_ssize_t total = self.live * self.history_size * 3
        used = np.empty(max(total, 1), dtype=np.uint64)
        cdef uint64_t[::1] out = used
        cdef Py_ssize_t n = 0, row, slot, index
        cdef Py_ssize_t h = self.history_size
        for row in range(self.capacity):
            for slot in range(self.meta[row].fill):
                index = row * h + slot
                out[n] = self.tool[index]
                n += 1
                if self.flag[index] & HAS_CALL_ID:
                    out[n] = self.call_id[index]
                    n += 1
                if self.flag[index] & HAS_UNKNOWN:
                    out[n] = self.unknown[index]
                    n += 1
        keep = set(np.unique(used[:n]).tolist())
        self.has_interned_tool = False
        self.names = {key: name for key, name in self.names.items() if key in keep}
        self.sweep_at = max(<Py_ssize_t>MIN_SWEEP, 2 * len(self.names))
        return 0

    cdef Py_ssize_t new_row(self, object key) except -1:
        # Everything that can raise (a session's hash, growing) comes before
        # the first change, so a failure leaves the store as it was.
        cdef int64_t key_hash = scope_hash(<tuple>key)
        session = (<tuple>key)[0]
        self.by_session.get(session)
        if self.live >= self.max_scopes:
            self.release(self.row_keys[self.oldest_row], self.oldest_row)
        if self.free_count == 0:
            self.grow(min(self.max_scopes, 2 * self.capacity))
        if (self.table_used + 1) * 2 > self.table_mask + 1:
            self.resize_table(2 * (self.live + 1))
        self.free_count -= 1
        cdef int32_t row = self.free_rows[self.free_count]
        self.meta[row].head = 0
        self.meta[row].fill = 0
        self.meta[row].key_hash = key_hash
        self.meta[row].session = <PyObject*>session
        self.meta[row].run_id = <PyObject*>(<tuple>key)[1]
        self.table_insert(row)
        self.row_keys[row] = key
        entry = self.by_session.get(session)
        if entry is None:
            self.by_session[session] = key
        elif type(entry) is set:
            (<set>entry).add(key)
        else:
            self.by_session[session] = {entry, key}
        self.link_newest(row)
        self.live += 1
        return row

    cdef int release(self, object key, Py_ssize_t row) except -1:
        self.table_delete(<int32_t>row)
        self.meta[row].session = NULL
        self.meta[row].run_id = NULL
        self.found_key = None
        self.row_keys[row] = None
        session = (<tuple>key)[0]
        entry = self.by_session.get(session)
        if type(entry) is set:
            (<set>entry).discard(key)
            if not entry:
                del self.by_session[session]
        elif entry is not None:
            del self.by_session[session]
        self.unlink(<int32_t>row)
        self.meta[row].fill = 0
        self.meta[row].head = 0
        self.free_rows[self.free_count] = <int32_t>row
        self.free_count += 1
        self.live -= 1
        return 0

    cdef void link_newest(self, int32_t row) noexcept:
        self.meta[row].older = self.newest_row
        self.meta[row].newer = -1
        if self.newest_row >= 0:
            self.meta[self.newest_row].newer = row
        else:
            self.oldest_row = row
        self.newest_row = row

    cdef void unlink(self, int32_t row) noexcept:
        cdef int32_t before = self.meta[row].older, after = self.meta[row].newer
        if before >= 0:
            self.meta[before].newer = after
        else:
            self.oldest_row = after
        if after >= 0:
            self.meta[after].older = before
        else:
            self.newest_row = before

    cdef void touch(self, int32_t row) noexcept:
        if row != self.newest_row:
            self.unlink(row)
            self.link_newest(row)

    cdef int grow(self, Py_ssize_t capacity) except -1:
        """Reallocate the slab for ``capacity`` rows, keeping every row where it is."""
        cdef Py_ssize_t old = self.capacity
        cdef Py_ssize_t h = self.history_size
        shape = (capacity, h)
        arrays = []
        for name, dtype in (
            ("tool_hashes", np.uint64),
            ("args_hashes", np.uint64),
            ("result_hashes", np.uint64),
            ("call_id_hashes", np.uint64),
            ("unknown_hashes", np.uint64),
            ("timestamps", np.float64),
            ("flags", np.uint8),
        ):
            fresh = np.zeros(shape, dtype=dtype)
            if old:
                fresh[:old] = getattr(self, name)
            arrays.append(fresh)
        meta = np.zeros(capacity * sizeof(RowMeta), dtype=np.uint8)
        free_list = np.zeros(capacity, dtype=np.int32)
        if old:
            meta[: old * sizeof(RowMeta)] = self.row_meta
            free_list[:old] = self.free_list
        (
            self.tool_hashes,
            self.args_hashes,
            self.result_hashes,
            self.call_id_hashes,
            self.unknown_hashes,
            self.timestamps,
            self.flags,
        ) = arrays
        self.row_meta = meta
        self.free_list = free_list
        cdef uint64_t[:, ::1] view
        view = self.tool_hashes
        self.tool = &view[0, 0]
        view = self.args_hashes
        self.args = &view[0, 0]
        view = self.result_hashes
        self.result = &view[0, 0]
        view = self.call_id_hashes
        self.call_id = &view[0, 0]
        view = self.unknown_hashes
        self.unknown = &view[0, 0]
        cdef double[:, ::1] ts_view = self.timestamps
        self.ts = &ts_view[0, 0]
        cdef uint8_t[:, ::1] flag_view = self.flags
        self.flag = &flag_view[0, 0]
        cdef uint8_t[::1] meta_view = meta
        self.meta = <RowMeta*>&meta_view[0]
        cdef int32_t[::1] free_view = free_list
        self.free_rows = &free_view[0]
        # Free rows are popped from the end: push the new ones highest first.
        cdef Py_ssize_t row
        for row in range(capacity - 1, old - 1, -1):
            self.free_rows[self.free_count] = <int32_t>row
            self.free_count += 1
        self.row_keys.extend([None] * (capacity - old))
        self.capacity = capacity
        return 0


@cython.final
cdef class GatewayCalls:
    """``ToolLoopGuard.before_call`` / ``after_call`` with their common path in C.

    The guard binds these over its own methods when its store is the compiled
    one; anything but "not stuck" and "no guard armed" goes back to the guard's
    Python slow paths, so the policy stays in ``_hook``.
    """

    cdef HistoryStore store
    cdef bint enabled
    # The guard itself, as a bound method would hold it (a cycle the GC collects).
    cdef object guard
    cdef dict armed
    cdef object allowed

    def __init__(self, HistoryStore store, bint enabled, guard, dict armed, allowed):
        self.store = store
        self.enabled = enabled
        self.guard = guard
        self.armed = armed
        self.allowed = allowed

    def before_call(self, tool_name, args, *, tool_call_id=None, session=None, run_id=None):
        """Check a call about to run; record it unless it is blocked."""
        if not self.enabled:
            self.store.record_call(tool_name, args, tool_call_id, session, run_id)
            return self.allowed
        verdict = self.store.check_and_record(tool_name, args, tool_call_id, session, run_id)
        if verdict is NOT_STUCK:
            return self.allowed
        return self.guard._decide(verdict, tool_name, session, run_id)

    def after_call(
        self,
        tool_name,
        args,
        *,
        result=UNSET,
        error=UNSET,
        tool_call_id=None,
        session=None,
        run_id=None,
    ):
        """Record a call's outcome; raises CompactionLoopPersisted when the guard trips."""
        record = self.store.record_outcome(
            tool_name, args, result, error, tool_call_id, session, run_id
        )
        if not self.armed:
            return record
        return self.guard._observe(record, tool_name, args, session, run_id)


@cython.final
cdef class DetectorCalls:
    """``LoopDetector``'s per-call methods, same signatures, without a Python frame."""

    cdef HistoryStore store
    cdef bint enabled
    cdef object disabled_check

    def __init__(self, HistoryStore store, bint enabled, disabled_check):
        self.store = store
        self.enabled = enabled
        self.disabled_check = disabled_check

    def check(self, tool_name, args, *, session=None, run_id=None):
        """The verdict for a call about to run, against its scope's history."""
        if self.enabled:
            return self.store.check(tool_name, args, session, run_id)
        return self.disabled_check(tool_name, session, run_id)

    def record_call(self, tool_name, args, tool_call_id=None, *, session=None, run_id=None):
        """Append a call (without outcome) to its scope's history."""
        self.store.record_call(tool_name, args, tool_call_id, session, run_id)

    def record_outcome(
        self,
        tool_name,
        args,
        *,
        result=UNSET,
        error=UNSET,
        tool_call_id=None,
        session=None,
        run_id=None,
    ):
        """Attach an outcome to the newest pending matching call, or append one."""
        return self.store.record_outcome(
            tool_name, args, result, error, tool_call_id, session, run_id
        )

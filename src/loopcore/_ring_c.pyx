# cython: language_level=3, freethreading_compatible=True
"""Where are a scope's recent calls kept, and what does one scan count? (SPEC §3-4, compiled twin)

Same contract as ``_ring_py``, laid out for a gateway hosting many runs: one
slab of C arrays holds every scope's ring, a row of ``history_size`` records
per scope, column by column (args, result and call-id hashes, timestamps, tool
and unknown-tool name indices, flags, and the call id itself, inline). A dict-
free open-addressing table maps a scope key to its row, a free list recycles
rows, an intrusive linked list keeps them in LRU order, and the slab doubles
when it is full.

Tool names are kept once each in a name table, referenced by index and counted,
so a name is forgotten with its last record: nothing ever sweeps. A call id of
up to 32 UTF-8 bytes lives inline in its slot (a longer one in a side dict by
slot), matched by its 64-bit hash: no Python object per record.

The common call is one C pass under the store's lock: find the row, scan it,
append. Only when a count reaches the caller's alarm does a ``ScanStats`` get
built; the store never hashes values or decides verdicts.
"""

cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject, PyTypeObject
from cpython.time cimport time as wall_clock
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from ._fingerprint_c cimport str_hash

import dataclasses

from ._records import CallRecord, ScanStats

__all__ = ["IMPLEMENTATION", "RingStore", "scan_window"]

IMPLEMENTATION = "cython"

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define LOOPCORE_PREFETCH(p) __builtin_prefetch((const void *)(p))
    #else
    #define LOOPCORE_PREFETCH(p) ((void)(p))
    #endif
    #ifdef Py_GIL_DISABLED
    #define LOOPCORE_GIL_DISABLED 1
    #else
    #define LOOPCORE_GIL_DISABLED 0
    #endif
    /* The UTF-8 bytes of a str: its own buffer when it is compact ASCII. */
    static const char *loopcore_ascii(PyObject *s, Py_ssize_t *size) {
        if (PyUnicode_IS_COMPACT_ASCII(s)) {
            *size = PyUnicode_GET_LENGTH(s);
            return (const char *)PyUnicode_DATA(s);
        }
        return NULL;
    }
    """
    void prefetch "LOOPCORE_PREFETCH" (const void *p) noexcept nogil
    # With the GIL, a section that runs no Python code needs no lock of its own.
    const bint GIL_DISABLED "LOOPCORE_GIL_DISABLED"
    const char *ascii_bytes "loopcore_ascii" (object s, Py_ssize_t *size)

cdef extern from "_lock.h":
    void acquire "loopcore_lock_acquire" (loopcore_lock *lock)
    void release "loopcore_lock_release" (loopcore_lock *lock)

# The reference scan over a Python list of records: the Python twin's.
from ._ring_py import scan_window

cdef enum:
    SLOT_EMPTY = -1
    SLOT_DELETED = -2
    HAS_RESULT = 1
    HAS_UNKNOWN = 2
    HAS_CALL_ID = 4
    # The call id is in ``long_ids``, not inline.
    LONG_ID = 8
    # Inline bytes of a call id: OpenAI's and Anthropic's ids fit.
    ID_BYTES = 32
    NO_NAME = 0xFFFFFFFF

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



cdef inline object exact(object name):
    """A name as the exact str it equals: a str subclass's own methods never run here."""
    if name is None or type(name) is str:
        return name
    return str.__str__(name)


cdef struct Scan:
    int64_t recent
    int64_t streak
    uint64_t reference
    int64_t has_reference
    int64_t unknown_streak
    uint32_t unknown_name
    int64_t pingpong
    uint32_t paired_tool
    uint64_t paired_hash
    int64_t no_progress


cdef void *checked_realloc(void *old, size_t count, size_t size) except NULL:
    if size and count > (<size_t>-1) // size // 2:
        raise MemoryError()
    cdef void *fresh = PyMem_Realloc(old, count * size if count else 1)
    if fresh == NULL:
        raise MemoryError()
    return fresh


@cython.final
cdef class RingStore:
    """Per-scope rings of the last ``history_size`` records, at most ``max_scopes`` scopes."""

    def __cinit__(self):
        self.row_keys = []
        self.by_session = {}
        self.long_ids = {}
        self.names = []
        self.name_index = {}
        self.free_names = []
        self.oldest_row = -1
        self.newest_row = -1
        self.last_tool_index = -1

    def __init__(self, history_size, max_scopes):
        if self.capacity:
            raise RuntimeError("RingStore is already initialised")
        if isinstance(history_size, bool) or not isinstance(history_size, int) or history_size < 1:
            raise ValueError(f"history_size: expected a positive integer, got {history_size!r}")
        if isinstance(max_scopes, bool) or not isinstance(max_scopes, int) or max_scopes < 1:
            raise ValueError(f"max_scopes: expected a positive integer, got {max_scopes!r}")
        if history_size * 8 > (1 << 40):
            raise ValueError(f"history_size: too large for a ring slab, got {history_size}")
        self.history_size = history_size
        self.max_scopes = min(max_scopes, 0x7FFFFFFF)
        self.grow(min(self.max_scopes, 8))
        self.resize_table(16)

    def __dealloc__(self):
        PyMem_Free(self.args)
        PyMem_Free(self.result)
        PyMem_Free(self.call_id)
        PyMem_Free(self.ts)
        PyMem_Free(self.tool)
        PyMem_Free(self.unknown)
        PyMem_Free(self.flag)
        PyMem_Free(self.id_len)
        PyMem_Free(self.ids)
        PyMem_Free(self.meta)
        PyMem_Free(self.free_rows)
        PyMem_Free(self.slots)
        PyMem_Free(self.name_refs)

    def __len__(self):
        return self.live

    # -- the Python API (the Python twin's) -------------------------------------------------

    def scan(self, key, tool_name, args_hash, alarm=0, unknown_alarm=0):
        """The counts for a call about to run, or None when none reaches its alarm."""
        return self.scan_c(key, tool_name, args_hash, alarm, unknown_alarm, False, None)

    def scan_append(self, key, tool_name, args_hash, tool_call_id, alarm, unknown_alarm):
        """``scan``; when quiet, the call is appended in the same step and None returned."""
        return self.scan_c(key, tool_name, args_hash, alarm, unknown_alarm, True, tool_call_id)

    def append(self, key, tool_name, args_hash, tool_call_id):
        """Append a call without outcome; the oldest record falls out past ``history_size``."""
        self.append_c(key, tool_name, args_hash, tool_call_id)

    def attach(self, key, tool_name, args_hash, tool_call_id, result_hash, unknown):
        """Fill the newest pending record of this call (SPEC §3), or append one; return it."""
        return self.attach_c(key, tool_name, args_hash, tool_call_id, result_hash, unknown)

    def history(self, key):
        """The scope's records, oldest first."""
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
                        self.id_of(index),
                        key,
                        self.ts[index],
                        self.result[index],
                        self.flag[index] & HAS_RESULT,
                        self.names[self.unknown[index]] if self.flag[index] & HAS_UNKNOWN else None,
                    )
                )
                slot = slot + 1 if slot + 1 < self.history_size else 0
        finally:
            release(&self.lock)
        return out

    def drop(self, key):
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

    @property
    def slot_bytes(self):
        """Bytes one record takes in the slab, whatever it holds."""
        return 4 * sizeof(uint64_t) + 2 * sizeof(uint32_t) + 2 * sizeof(uint8_t) + ID_BYTES

    @property
    def name_count(self):
        """Tool and unknown-tool names held (each once, while a record uses it)."""
        return len(self.name_index)

    # -- the C API (the per-call twin's) ----------------------------------------------------

    cdef void warm(self, object key) except *:
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

    cdef object scan_c(
        self, object key, object tool_name, uint64_t args_hash, int64_t alarm,
        int64_t unknown_alarm, bint append, object call_id,
    ):
        cdef Scan scan
        cdef Py_ssize_t row
        cdef int64_t tool_index
        cdef double now = wall_clock() if append else 0.0
        tool_name = exact(tool_name)
        call_id = exact(call_id)
        acquire(&self.lock)
        try:
            row = self.find_row(key)
            tool_index = self.find_name(tool_name)
            if row < 0:
                memset(&scan, 0, sizeof(Scan))
                if 0 >= alarm or 0 >= unknown_alarm:
                    return self.stats_of(&scan)
            elif self.scan_row(row, tool_index, args_hash, alarm, unknown_alarm, &scan):
                return self.stats_of(&scan)
            if append:
                self.append_row(key, row, tool_name, args_hash, call_id, now, 0, False, None)
            return None
        finally:
            release(&self.lock)

    cdef int append_c(
        self, object key, object tool_name, uint64_t args_hash, object call_id
    ) except -1:
        cdef double now = wall_clock()
        tool_name = exact(tool_name)
        call_id = exact(call_id)
        acquire(&self.lock)
        try:
            self.append_row(
                key, self.find_row(key), tool_name, args_hash, call_id, now, 0, False, None
            )
        finally:
            release(&self.lock)
        return 0

    cdef object attach_c(
        self, object key, object tool_name, uint64_t args_hash, object call_id,
        uint64_t result_hash, object unknown,
    ):
        tool_name = exact(tool_name)
        call_id = exact(call_id)
        unknown = exact(unknown)
        cdef uint64_t call_hash = str_hash(call_id) if call_id is not None else 0
        cdef double now
        cdef Py_ssize_t row, slot, index, _n, base
        cdef int64_t tool_index
        cdef int32_t h = <int32_t>self.history_size
        acquire(&self.lock)
        try:
            row = self.find_row(key)
            tool_index = self.find_name(tool_name)
            if row >= 0 and tool_index >= 0:
                base = row * self.history_size
                slot = self.meta[row].head
                for _n in range(self.meta[row].fill):
                    slot = slot - 1 if slot > 0 else h - 1
                    index = base + slot
                    if (
                        not (self.flag[index] & HAS_RESULT)
                        and self.args[index] == args_hash
                        and self.tool[index] == tool_index
                        and (
                            call_id is None
                            or (self.flag[index] & HAS_CALL_ID and self.call_id[index] == call_hash)
                        )
                    ):
                        if unknown is not None:
                            self.unknown[index] = <uint32_t>self.intern(unknown)
                            self.flag[index] |= HAS_UNKNOWN
                        self.result[index] = result_hash
                        self.flag[index] |= HAS_RESULT
                        return make_record(
                            self.names[tool_index], args_hash, self.id_of(index), key,
                            self.ts[index], result_hash, True, unknown,
                        )
            now = wall_clock()
            self.append_row(key, row, tool_name, args_hash, call_id, now, result_hash, True, unknown)
        finally:
            release(&self.lock)
        return make_record(tool_name, args_hash, call_id, key, now, result_hash, True, unknown)

    # -- internals: names and call ids ------------------------------------------------------

    cdef int64_t find_name(self, object name) except -2:
        """The name's index, or -1 when no record uses it (caller holds the lock)."""
        if not GIL_DISABLED and name is self.last_tool:
            return self.last_tool_index
        found = self.name_index.get(name)
        if found is None:
            return -1
        if not GIL_DISABLED:
            self.last_tool = name
            self.last_tool_index = <int64_t>found
        return <int64_t>found

    cdef int64_t intern(self, object name) except -1:
        """The name's index, counted as used once more (caller holds the lock)."""
        cdef int64_t index = self.find_name(name)
        cdef Py_ssize_t grown
        if index < 0:
            if self.free_names:
                index = self.free_names.pop()
                self.names[index] = name
            else:
                index = len(self.names)
                if index >= NO_NAME:
                    raise MemoryError("too many distinct tool names")
                if index >= self.names_capacity:
                    grown = max(16, 2 * self.names_capacity)
                    self.name_refs = <uint32_t*>checked_realloc(
                        self.name_refs, grown, sizeof(uint32_t)
                    )
                    self.names_capacity = grown
                self.names.append(name)
            self.name_index[name] = index
            self.name_refs[index] = 0
        self.name_refs[index] += 1
        return index

    cdef void forget_name(self, uint32_t index) noexcept:
        """One use fewer; the last one frees the index (caller holds the lock)."""
        self.name_refs[index] -= 1
        if self.name_refs[index]:
            return
        if self.last_tool_index == index:
            self.last_tool = None
            self.last_tool_index = -1
        name = self.names[index]
        # Names are exact str: dropping them runs no Python code.
        del self.name_index[name]
        self.names[index] = None
        self.free_names.append(index)

    cdef int clear_slot(self, Py_ssize_t index) except -1:
        """Release what a slot about to be reused or freed holds."""
        cdef uint8_t flags = self.flag[index]
        self.forget_name(self.tool[index])
        if flags & HAS_UNKNOWN:
            self.forget_name(self.unknown[index])
        if flags & LONG_ID:
            del self.long_ids[index]
        self.flag[index] = 0
        return 0

    cdef int store_id(self, Py_ssize_t index, object call_id) except -1:
        cdef Py_ssize_t size
        cdef const char *data = ascii_bytes(call_id, &size)
        if data == NULL:
            encoded = (<str>call_id).encode("utf-8", "surrogatepass")
            data = encoded
            size = len(encoded)
        if size <= ID_BYTES:
            memcpy(&self.ids[index * ID_BYTES], data, size)
            self.id_len[index] = <uint8_t>size
        else:
            self.long_ids[index] = call_id
            self.flag[index] |= LONG_ID
        return 0

    cdef object id_of(self, Py_ssize_t index):
        cdef uint8_t flags = self.flag[index]
        if not (flags & HAS_CALL_ID):
            return None
        if flags & LONG_ID:
            return self.long_ids[index]
        return PyUnicode_DecodeUTF8(&self.ids[index * ID_BYTES], self.id_len[index], "surrogatepass")

    # -- internals: the scan ----------------------------------------------------------------

    cdef object stats_of(self, void *data):
        cdef Scan *scan = <Scan*>data
        return ScanStats(
            recent=scan.recent,
            streak=scan.streak,
            reference=scan.reference if scan.has_reference else None,
            unknown_streak=scan.unknown_streak,
            unknown_name=self.names[scan.unknown_name] if scan.unknown_streak else None,
            pingpong=scan.pingpong,
            paired_tool=self.names[scan.paired_tool] if scan.pingpong else None,
            paired_hash=scan.paired_hash,
            pingpong_no_progress=bool(scan.pingpong and scan.no_progress),
        )

    cdef bint scan_row(
        self, Py_ssize_t row, int64_t tool_index, uint64_t args_hash, int64_t alarm,
        int64_t unknown_alarm, void *data,
    ) noexcept:
        """One newest-first pass over a row (``_ring_py.scan_window``); True when alarmed."""
        cdef Scan *out = <Scan*>data
        cdef Py_ssize_t h = self.history_size
        cdef Py_ssize_t base = row * h
        cdef Py_ssize_t count = self.meta[row].fill
        cdef Py_ssize_t slot = self.meta[row].head
        cdef Py_ssize_t position, index
        memset(out, 0, sizeof(Scan))
        if count == 0:
            return 0 >= alarm or 0 >= unknown_alarm
        slot = slot - 1 if slot > 0 else h - 1
        index = base + slot
        cdef uint32_t *tool = self.tool
        cdef uint64_t *args = self.args
        cdef uint64_t *result = self.result
        cdef uint32_t *unknown = self.unknown
        cdef uint8_t *flag = self.flag

        cdef uint64_t side_a = args[index], side_b = 0
        cdef bint has_b = False
        cdef Py_ssize_t tail = 1
        cdef bint tail_open = True
        cdef uint64_t result_a = result[index], result_b = 0
        cdef bint no_progress = (flag[index] & HAS_RESULT) != 0
        cdef uint32_t newest_tool = tool[index]
        cdef uint32_t unknown_hash = unknown[index]
        cdef bint unknown_open = newest_tool == tool_index and (flag[index] & HAS_UNKNOWN) != 0
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
                return 0 >= alarm or 0 >= unknown_alarm
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
                    tool[index] == tool_index
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
        out.unknown_name = unknown_hash if unknown_streak else 0
        out.pingpong = tail + 1 if tail >= 2 and has_b and args_hash == side_b else 0
        out.paired_tool = newest_tool if out.pingpong else 0
        out.paired_hash = side_a
        out.no_progress = no_progress
        return recent >= alarm or out.pingpong >= alarm or unknown_streak >= unknown_alarm

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
        cdef Slot *slots = <Slot*>checked_realloc(NULL, size, sizeof(Slot))
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
        PyMem_Free(self.slots)
        self.slots = slots
        self.table_mask = size - 1
        self.table_used = self.live
        return 0

    cdef int append_row(
        self, object key, Py_ssize_t row, object tool_name, uint64_t args_hash,
        object call_id, double now, uint64_t result_hash, bint has_result, object unknown,
    ) except -1:
        # Names are counted before the slot changes, so a failure leaves it whole.
        cdef uint32_t tool_index = <uint32_t>self.intern(tool_name)
        cdef uint32_t unknown_index = NO_NAME
        if unknown is not None:
            try:
                unknown_index = <uint32_t>self.intern(unknown)
            except BaseException:
                self.forget_name(tool_index)
                raise
        if row < 0:
            try:
                row = self.new_row(key)
            except BaseException:
                self.forget_name(tool_index)
                if unknown is not None:
                    self.forget_name(unknown_index)
                raise
        cdef Py_ssize_t slot = self.meta[row].head
        cdef Py_ssize_t index = row * self.history_size + slot
        if self.meta[row].fill == self.history_size:
            self.clear_slot(index)
        cdef uint8_t flags = 0
        self.tool[index] = tool_index
        self.args[index] = args_hash
        self.ts[index] = now
        # Absent fields keep stale values: the flags say what is there, and
        # leaving them untouched spares a cold row cache lines.
        if has_result:
            flags |= HAS_RESULT
            self.result[index] = result_hash
        if unknown is not None:
            flags |= HAS_UNKNOWN
            self.unknown[index] = unknown_index
        self.flag[index] = flags
        if call_id is not None:
            self.call_id[index] = str_hash(call_id)
            self.store_id(index, call_id)
            self.flag[index] |= HAS_CALL_ID
        self.meta[row].head = <int32_t>(slot + 1 if slot + 1 < self.history_size else 0)
        if self.meta[row].fill < self.history_size:
            self.meta[row].fill += 1
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
        cdef Py_ssize_t slot, base = row * self.history_size
        for slot in range(self.meta[row].fill):
            self.clear_slot(base + slot)
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
        cdef size_t h = self.history_size
        cdef size_t cells = capacity * h, fresh = (capacity - old) * h
        cdef size_t start = old * h
        # Each column is grown in turn; one that fails leaves the others larger,
        # which is harmless: capacity only moves once all of them have.
        self.args = <uint64_t*>checked_realloc(self.args, cells, 8)
        memset(&self.args[start], 0, fresh * 8)
        self.result = <uint64_t*>checked_realloc(self.result, cells, 8)
        memset(&self.result[start], 0, fresh * 8)
        self.call_id = <uint64_t*>checked_realloc(self.call_id, cells, 8)
        memset(&self.call_id[start], 0, fresh * 8)
        self.ts = <double*>checked_realloc(self.ts, cells, sizeof(double))
        memset(&self.ts[start], 0, fresh * sizeof(double))
        self.tool = <uint32_t*>checked_realloc(self.tool, cells, 4)
        memset(&self.tool[start], 0, fresh * 4)
        self.unknown = <uint32_t*>checked_realloc(self.unknown, cells, 4)
        memset(&self.unknown[start], 0, fresh * 4)
        self.flag = <uint8_t*>checked_realloc(self.flag, cells, 1)
        memset(&self.flag[start], 0, fresh)
        self.id_len = <uint8_t*>checked_realloc(self.id_len, cells, 1)
        memset(&self.id_len[start], 0, fresh)
        self.ids = <char*>checked_realloc(self.ids, cells, ID_BYTES)
        self.meta = <RowMeta*>checked_realloc(self.meta, capacity, sizeof(RowMeta))
        memset(&self.meta[old], 0, (capacity - old) * sizeof(RowMeta))
        self.free_rows = <int32_t*>checked_realloc(self.free_rows, capacity, sizeof(int32_t))
        # Free rows are popped from the end: push the new ones highest first.
        cdef Py_ssize_t row
        for row in range(capacity - 1, old - 1, -1):
            self.free_rows[self.free_count] = <int32_t>row
            self.free_count += 1
        self.row_keys.extend([None] * (capacity - old))
        self.capacity = capacity
        return 0


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
from cpython.mem cimport PyMem_Free, PyMem_RawFree, PyMem_RawMalloc, PyMem_Realloc
from cpython.object cimport PyObject, PyTypeObject
from cpython.time cimport time as wall_clock
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from ._fingerprint_c cimport str_hash

import dataclasses

from ._records import CallRecord, ScanStats
from ._scopes import SessionRef

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

cdef extern from "Python.h":
    # 3.10+: switch the cyclic collector off and on; both return the previous state.
    int PyGC_Enable() noexcept
    int PyGC_Disable() noexcept


def scan_window(ring, tool_name, args_hash):
    """Every SPEC §4 count over a non-empty ring of records, oldest first.

    The reference scan of the Python twin (the batch scans rebuild one call's
    verdict with it), imported on first use: the per-call path never needs it.
    """
    from ._ring_py import scan_window as reference

    return reference(ring, tool_name, args_hash)


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
    # Bytes of one record in a row's block: four 8-byte columns, two 4-byte, flags.
    RECORD_BYTES = 4 * 8 + 2 * 4 + 1

include "_ring_records.pxi"
include "_ring_memory.pxi"
include "_ring_scan.pxi"
include "_ring_rows.pxi"


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
        slab_grow(self, min(self.max_scopes, 8))
        resize_table(self, 16)

    def __dealloc__(self):
        cdef Py_ssize_t row
        for row in range(self.capacity):
            PyMem_RawFree(self.meta[row].block)
            PyMem_RawFree(self.meta[row].ids)
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
        cdef Py_ssize_t row, slot, _n, count
        cdef Cols c
        cdef int64_t key_hash = key_hash_of(self, key)
        out = []
        cdef int gc_was = enter_no_collection(self)
        try:
            row = row_find(self, key, key_hash)
            if row < 0:
                return out
            cols_of(&self.meta[row], &c)
            count = self.meta[row].fill
            slot = self.meta[row].head - count
            if slot < 0:
                slot += self.history_size
            for _n in range(count):
                out.append(
                    make_record(
                        self.names[c.tool[slot]],
                        c.args[slot],
                        slot_id(self, row, slot),
                        key,
                        c.ts[slot],
                        c.result[slot],
                        c.flag[slot] & HAS_RESULT,
                        self.names[c.unknown[slot]] if c.flag[slot] & HAS_UNKNOWN else None,
                    )
                )
                slot = slot + 1 if slot + 1 < self.history_size else 0
        finally:
            leave(self, gc_was)
        return out

    def drop(self, key):
        cdef Py_ssize_t row
        cdef int64_t key_hash = key_hash_of(self, key)
        cdef int gc_was = enter(self)
        try:
            row = row_lookup(self, key, key_hash)
            if row < 0:
                return False
            free_row(self, key, row)
        finally:
            leave(self, gc_was)
        return True

    def drop_session(self, session):
        cdef Py_ssize_t dropped = 0, row
        cdef int gc_was = enter(self)
        try:
            entry = self.by_session.get(session)
        finally:
            leave(self, gc_was)
        if entry is None:
            return 0
        keys = list(entry) if type(entry) is set else [entry]
        # The stored keys' hashes are taken with the lock released.
        hashes = [scope_hash(<tuple>key) for key in keys]
        gc_was = enter(self)
        try:
            for key, key_hash in zip(keys, hashes):
                row = row_lookup(self, key, key_hash)
                # Still that very key: the scope may have gone meanwhile.
                if row >= 0 and self.row_keys[row] is key:
                    free_row(self, key, row)
                    dropped += 1
        finally:
            leave(self, gc_was)
        return dropped

    @property
    def slot_bytes(self):
        """Bytes one record takes in its row's block."""
        return RECORD_BYTES

    @property
    def id_bytes(self):
        """Bytes a record's inline call id adds, in rows that hold call ids."""
        return 1 + ID_BYTES

    @property
    def allocated_bytes(self):
        """Bytes of the live rows' blocks: records allocated, not ``history_size`` each."""
        cdef Py_ssize_t row, total = 0
        cdef int gc_was = enter(self)
        try:
            for row in range(self.capacity):
                if self.meta[row].block != NULL:
                    total += self.meta[row].cap * RECORD_BYTES
                if self.meta[row].ids != NULL:
                    total += self.meta[row].cap * (1 + ID_BYTES)
        finally:
            leave(self, gc_was)
        return total

    @property
    def name_count(self):
        """Tool and unknown-tool names held (each once, while a record uses it)."""
        return len(self.name_index)

    # -- the C API (the per-call twin's) ----------------------------------------------------

    cdef int64_t warm(self, object key) except? -1:
        """Start fetching the scope's row, so that hashing the args hides the wait.

        With many live scopes a row is rarely in cache; the scan reads its args
        column and newest slot, the append writes next to them. Returns the
        key's hash, for the scan that follows (``scan_raw``).
        """
        cdef Py_ssize_t row, slot, newest, offset
        cdef Cols c
        cdef int64_t key_hash = key_hash_of(self, key)
        if not GIL_DISABLED and key is self.found_key:
            return key_hash  # the row this key found last: just used, still cached
        cdef int gc_was = enter(self)
        try:
            # A lookup, not a use: the LRU order changes only when the call does.
            row = row_lookup(self, key, key_hash)
            if row < 0 or self.meta[row].block == NULL:
                return key_hash
            cols_of(&self.meta[row], &c)
            slot = self.meta[row].head
            newest = slot - 1 if slot > 0 else self.history_size - 1
            # The first lines of the args column; the hardware prefetcher follows on.
            for offset in range(0, min(self.meta[row].fill, 256), 8):
                prefetch(&c.args[offset])
            prefetch(&c.tool[newest])
            prefetch(&c.result[newest])
            prefetch(&c.flag[newest])
            if slot < self.meta[row].cap:
                prefetch(&c.ts[slot])
        finally:
            leave(self, gc_was)
        return key_hash

    cdef bint scan_raw(
        self, object key, int64_t key_hash, object tool_name, uint64_t args_hash,
        int64_t alarm, int64_t unknown_alarm, bint append, object call_id, Scan *out,
    ) except -1:
        """Scan into ``out``; True when alarmed, else (``append``) the call is appended.

        ``key_hash`` is ``key_hash_of(key)``, as ``warm`` returns it.
        """
        cdef Py_ssize_t row
        cdef bint alarmed
        cdef double now = wall_clock() if append else 0.0
        tool_name = exact(tool_name)
        call_id = exact(call_id)
        cdef int64_t tool_index
        cdef int gc_was = enter(self)
        try:
            row = row_find(self, key, key_hash)
            tool_index = name_find(self, tool_name)
            if row < 0:
                memset(out, 0, sizeof(Scan))
                alarmed = 0 >= alarm or 0 >= unknown_alarm
            else:
                alarmed = row_scan(self, row, tool_index, args_hash, alarm, unknown_alarm, out)
            out.tool_index = tool_index
            out.generation = self.generation
            if append and not alarmed:
                row_append(
                    self, key, key_hash, row, tool_name, args_hash, call_id, now, 0, False, None
                )
            return alarmed
        finally:
            leave(self, gc_was)

    cdef object stats(self, Scan *scan):
        """The scan's ``ScanStats``, or None when a name it refers to was forgotten since."""
        cdef int gc_was = enter_no_collection(self)
        try:
            if scan.generation != self.generation:
                return None
            return scan_stats(self, scan)
        finally:
            leave(self, gc_was)

    cdef object scan_c(
        self, object key, object tool_name, uint64_t args_hash, int64_t alarm,
        int64_t unknown_alarm, bint append, object call_id,
    ):
        cdef Scan scan
        while self.scan_raw(
            key, key_hash_of(self, key), tool_name, args_hash, alarm, unknown_alarm, append,
            call_id, &scan,
        ):
            stats = self.stats(&scan)
            if stats is not None:
                return stats
        return None

    cdef int append_c(
        self, object key, object tool_name, uint64_t args_hash, object call_id
    ) except -1:
        cdef double now = wall_clock()
        tool_name = exact(tool_name)
        call_id = exact(call_id)
        cdef int64_t key_hash = key_hash_of(self, key)
        cdef int gc_was = enter(self)
        try:
            row_append(
                self, key, key_hash, row_find(self, key, key_hash), tool_name, args_hash,
                call_id, now, 0, False, None,
            )
        finally:
            leave(self, gc_was)
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
        cdef Py_ssize_t row, slot, _n
        cdef int64_t tool_index
        cdef int32_t h = <int32_t>self.history_size
        cdef Cols c
        cdef int64_t key_hash = key_hash_of(self, key)
        # The record is built once the lock is released (a new container).
        cdef bint filled = False
        cdef double ts = 0.0
        stored_id = None
        stored_tool = None
        cdef int gc_was = enter(self)
        try:
            row = row_find(self, key, key_hash)
            tool_index = name_find(self, tool_name)
            if row >= 0 and tool_index >= 0:
                cols_of(&self.meta[row], &c)
                slot = self.meta[row].head
                for _n in range(self.meta[row].fill):
                    slot = slot - 1 if slot > 0 else h - 1
                    if (
                        not (c.flag[slot] & HAS_RESULT)
                        and c.args[slot] == args_hash
                        and c.tool[slot] == tool_index
                        and (
                            call_id is None
                            or (c.flag[slot] & HAS_CALL_ID and c.call_id[slot] == call_hash)
                        )
                    ):
                        if unknown is not None:
                            c.unknown[slot] = <uint32_t>name_use(self, unknown)
                            c.flag[slot] |= HAS_UNKNOWN
                        c.result[slot] = result_hash
                        c.flag[slot] |= HAS_RESULT
                        filled = True
                        stored_tool = self.names[tool_index]
                        stored_id = slot_id(self, row, slot)
                        ts = c.ts[slot]
                        break
            if not filled:
                now = wall_clock()
                row_append(
                    self, key, key_hash, row, tool_name, args_hash, call_id, now, result_hash,
                    True, unknown,
                )
        finally:
            leave(self, gc_was)
        if filled:
            return make_record(
                stored_tool, args_hash, stored_id, key, ts, result_hash, True, unknown
            )
        return make_record(tool_name, args_hash, call_id, key, now, result_hash, True, unknown)

# cython: language_level=3, freethreading_compatible=True
"""Where are a scope's recent calls kept, and what does one scan count? (SPEC §3-4, §8, C twin)

Same contract as ``_ring_py``, laid out for a gateway hosting many runs: one
slab of C arrays holds every scope's ring, a row of ``history_size`` records
per scope, column by column (args, result and call-id hashes, timestamps, tool
and unknown-tool name indices, and a flag byte that also holds the outcome
kind and the no-progress bit), plus two columns a row only gets once it needs
them: the call ids themselves, inline, and terminal failures' identity hashes.
A dict-free open-addressing table maps a scope key to its row, a free list
recycles rows, an intrusive linked list keeps them in LRU order, and the slab
doubles when it is full.

Tool names are kept once each in a name table, referenced by index and counted,
so a name is forgotten with its last record: nothing ever sweeps. A call id of
up to 32 UTF-8 bytes lives inline in its slot (a longer one in a side dict by
slot), matched by its 64-bit hash: no Python object per record.

The common call is one C pass under the store's lock: find the row, scan it,
append. Only when a count reaches the caller's alarm does a ``ScanStats`` get
built; the store never hashes values or decides verdicts.
"""

cimport cython
from cpython.mem cimport (
    PyMem_Free,
    PyMem_RawCalloc,
    PyMem_RawFree,
    PyMem_RawMalloc,
    PyMem_RawRealloc,
    PyMem_Realloc,
)
from cpython.object cimport PyObject, PyTypeObject
from cpython.time cimport time as wall_clock
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset

from ._fingerprint_c cimport str_hash

import dataclasses

from ._records import KIND_TERMINAL_EXEC, KIND_VETO, OUTCOME_KINDS, CallRecord, ScanStats
from ._scopes import SessionRef

__all__ = ["IMPLEMENTATION", "RingStore", "scan_window"]

IMPLEMENTATION = "cython"


def scan_window(ring, tool_name, args_hash):
    """Every SPEC §4/§8 count over a non-empty ring of records, oldest first.

    The reference scan of the Python twin (the batch scans rebuild one call's
    verdict with it), imported on first use: the per-call path never needs it.
    """
    from ._counts import scan_window as reference

    return reference(ring, tool_name, args_hash)


include "_ring_platform.pxi"
include "_ring_layout.pxi"
include "_ring_records.pxi"
include "_ring_memory.pxi"
include "_ring_slab.pxi"
include "_ring_scan.pxi"
include "_ring_churn.pxi"
include "_ring_table.pxi"
include "_ring_rows.pxi"
include "_ring_edit.pxi"


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
        if self.slots != NULL:
            raise RuntimeError("RingStore is already initialised")
        if isinstance(history_size, bool) or not isinstance(history_size, int) or history_size < 1:
            raise ValueError(f"history_size: expected a positive integer, got {history_size!r}")
        if isinstance(max_scopes, bool) or not isinstance(max_scopes, int) or max_scopes < 1:
            raise ValueError(f"max_scopes: expected a positive integer, got {max_scopes!r}")
        if history_size * 8 > (1 << 40):
            raise ValueError(f"history_size: too large for a ring slab, got {history_size}")
        self.history_size = history_size
        self.max_scopes = min(max_scopes, 0x7FFFFFFF)
        self.free_head = -1
        self.slots = table_alloc(16)
        self.table_mask = 15

    def __dealloc__(self):
        cdef Py_ssize_t row
        cdef RowMeta *m
        for row in range(self.capacity):
            m = meta_at(self, row)
            block_free(m.block, m.cap, RECORD_BYTES)
            block_free(m.ids, m.cap, 1 + ID_BYTES)
            block_free(m.identity, m.cap, sizeof(uint64_t))
        for row in range(0, self.capacity, ROW_CHUNK):
            PyMem_RawFree(self.chunk_blocks[row >> ROW_CHUNK_SHIFT])
        PyMem_RawFree(self.meta_chunks)
        PyMem_RawFree(self.chunk_blocks)
        pages_free(self.slots, (self.table_mask + 1) * sizeof(Slot), 0)
        pages_free(self.old_slots, (self.old_mask + 1) * sizeof(Slot), 0)
        pages_free(self.retired, self.retired_size, self.retired_done)
        PyMem_Free(self.name_refs)
        PyMem_RawFree(self.variants)

    def __len__(self):
        return self.live

    # -- the Python API (the Python twin's) -------------------------------------------------

    def scan(self, key, tool_name, args_hash, alarm=0, unknown_alarm=0):
        """The counts for a call about to run, or None when none reaches its alarm."""
        return self.scan_c(key, tool_name, args_hash, alarm, unknown_alarm, False, None)

    def scan_append(self, key, tool_name, args_hash, tool_call_id, alarm, unknown_alarm):
        """``scan``; when quiet, the call is appended in the same step and None returned."""
        return self.scan_c(key, tool_name, args_hash, alarm, unknown_alarm, True, tool_call_id)

    def append(self, key, tool_name, args_hash, tool_call_id, kind=0):
        """Append a call without outcome (``kind``: a veto); the oldest falls out when full."""
        self.append_c(key, tool_name, args_hash, tool_call_id, kind)

    def attach(
        self, key, tool_name, args_hash, tool_call_id, result_hash, unknown, kind=0,
        identity=None, no_progress=False,
    ):
        """Complete the pending record of this call (SPEC §9.1), or append one; return it.

        An outcome already recorded under this call id (SPEC §12.7), or a veto
        already recorded under it (§8.1), returns that record unchanged.
        """
        return self.attach_c(
            key, tool_name, args_hash, tool_call_id,
            result_hash if result_hash is not None else 0, result_hash is not None, unknown,
            kind, identity if identity is not None else 0, identity is not None, no_progress,
        )

    def release(self, key, tool_call_ids):
        """Remove the pending records of these call ids (admitted, then skipped)."""
        cdef Py_ssize_t n, row, removed = 0
        cdef uint64_t *ids = release_ids(tool_call_ids, &n)
        cdef int64_t key_hash
        cdef int gc_was
        try:
            key_hash = key_hash_of(self, key)
            # Off: a long call id's entry moves in a dict as its record does.
            gc_was = enter_no_collection(self)
            try:
                row = row_find(self, key, key_hash)
                if row >= 0 and n:
                    removed = row_release(self, row, ids, n)
            finally:
                leave(self, gc_was)
        finally:
            PyMem_RawFree(ids)
        return removed

    def reconcile(self, key, tool_name, args_hash, tool_call_id):
        """SPEC §8.7: re-hash the pending call a pre-call hook rewrote.

        Returns ``(found, changed, churn, variants)``: the churn count of the
        new hash over the records older than the call.
        """
        tool_name = exact(tool_name)
        call_id = exact(tool_call_id)
        cdef uint64_t h = args_hash
        cdef uint64_t call_hash = str_hash(call_id) if call_id is not None else 0
        cdef int64_t key_hash = key_hash_of(self, key)
        cdef Py_ssize_t row, slot = -1
        cdef bint changed = False, recorded = False
        cdef int64_t churn = 0, variants = 0
        cdef int gc_was = enter(self)
        try:
            row = row_find(self, key, key_hash)
            if row >= 0:
                slot = match_slot(
                    self, row, name_find(self, tool_name), 0, False, call_id is not None,
                    call_hash, -1, &recorded,
                )
            if slot >= 0:
                changed = row_rehash(self, row, slot, h, &churn, &variants)
        finally:
            leave(self, gc_was)
        return slot >= 0, changed, churn, variants

    def window(self, key):
        """A copy of the scope's raw records, oldest first, as lists in the Python
        twin's field order (for projected scans)."""
        cdef int64_t key_hash = key_hash_of(self, key)
        cdef int gc_was = enter_no_collection(self)
        try:
            return row_records(self, key, row_find(self, key, key_hash), True)
        finally:
            leave(self, gc_was)

    def history(self, key):
        """The scope's records, oldest first."""
        cdef int64_t key_hash = key_hash_of(self, key)
        cdef int gc_was = enter_no_collection(self)
        try:
            return row_records(self, key, row_find(self, key, key_hash), False)
        finally:
            leave(self, gc_was)

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
        cdef int gc_was = enter_no_collection(self)  # the list of keys is allocated
        keys = []
        try:
            head = self.by_session.get(session)
            row = -1 if head is None else <Py_ssize_t>head
            while row >= 0:
                keys.append(key_at(self, row))
                row = links_at(self, row).sess_next
        finally:
            leave(self, gc_was)
        if not keys:
            return 0
        # The stored keys' hashes are taken with the lock released.
        hashes = [scope_hash(<tuple>key) for key in keys]
        gc_was = enter(self)
        try:
            for key, key_hash in zip(keys, hashes):
                row = row_lookup(self, key, key_hash)
                # Still that very key: the scope may have gone meanwhile.
                if row >= 0 and key_at(self, row) is key:
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
    def identity_bytes(self):
        """Bytes a record's identity hash adds, in rows that hold terminal failures."""
        return sizeof(uint64_t)

    @property
    def allocated_bytes(self):
        """Bytes of the live rows' blocks: records allocated, not ``history_size`` each."""
        cdef Py_ssize_t row, total = 0
        cdef int gc_was = enter(self)
        try:
            for row in range(self.capacity):
                if meta_at(self, row)[0].block != NULL:
                    total += meta_at(self, row)[0].cap * RECORD_BYTES
                if meta_at(self, row)[0].ids != NULL:
                    total += meta_at(self, row)[0].cap * (1 + ID_BYTES)
                if meta_at(self, row)[0].identity != NULL:
                    total += meta_at(self, row)[0].cap * sizeof(uint64_t)
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

        With many live scopes a row is rarely in cache: the lines the scan
        reads are asked for here at once (``table_prefetch``), rather than
        waited for one by one. Returns the key's hash, for the scan that
        follows (``scan_raw``).
        """
        cdef int64_t key_hash = key_hash_of(self, key)
        if not GIL_DISABLED and key is self.found_key:
            return key_hash  # the row this key found last: just used, still cached
        # The table entry is the one line waited for: the row's bookkeeping and
        # records are asked for at once, and the scan checks the key.
        cdef int gc_was = enter(self)
        try:
            table_prefetch(self, key_hash)
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
        if not (is_exact(tool_name) and is_exact(call_id)):
            return self.scan_raw(
                key, key_hash, exact(tool_name), args_hash, alarm, unknown_alarm, append,
                exact(call_id), out,
            )
        cdef Py_ssize_t row
        cdef int alarmed
        cdef double now = now_seconds() if append else 0.0
        cdef int64_t tool_index
        # A key other than the one found last: its row is most likely cold.
        cdef bint cold = key is not self.found_key
        cdef int gc_was = enter(self)
        try:
            # Marked used only after the scan (nothing reads the LRU order before,
            # and the name lookup of an exact str cannot fail): the move writes the
            # neighbours' bookkeeping, and a store to a line not yet cached holds up
            # every store after it, where a scan waiting for its records hides it.
            row = row_seek(self, key, key_hash)
            if row >= 0 and cold:
                row_prefetch(self, row)
            tool_index = name_find(self, tool_name)
            if row < 0:
                memset(out, 0, sizeof(Scan))
                alarmed = 0 >= alarm or 0 >= unknown_alarm
            else:
                alarmed = row_scan(self, row, tool_index, args_hash, alarm, unknown_alarm, out)
                lru_touch(self, <int32_t>row)
                if alarmed == NEED_VARIANTS:
                    # A rare churn of many variants: the heap table, then the scan again.
                    grow_variants(self, meta_at(self, row)[0].fill)
                    alarmed = row_scan(
                        self, row, tool_index, args_hash, alarm, unknown_alarm, out
                    )
            out.tool_index = tool_index
            out.generation = self.generation
            if append and not alarmed:
                row_append(
                    self, key, key_hash, row, tool_name, args_hash, call_id, now, &NO_OUTCOME,
                    None,
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
        self, object key, object tool_name, uint64_t args_hash, object call_id, int kind
    ) except -1:
        valid_kind(kind)
        if not (is_exact(tool_name) and is_exact(call_id)):
            return self.append_c(key, exact(tool_name), args_hash, exact(call_id), kind)
        cdef Outcome outcome = outcome_of(0, False, kind, 0, False, False)
        cdef double now = now_seconds()
        cdef int64_t key_hash = key_hash_of(self, key)
        cdef int gc_was = enter(self)
        try:
            row_append(
                self, key, key_hash, row_find(self, key, key_hash), tool_name, args_hash,
                call_id, now, &outcome, None,
            )
        finally:
            leave(self, gc_was)
        return 0

    cdef object attach_c(
        self, object key, object tool_name, uint64_t args_hash, object call_id,
        uint64_t result_hash, bint has_result, object unknown, int kind, uint64_t identity,
        bint has_identity, bint no_progress, bint want_record=True,
    ):
        """``attach`` from C; without ``want_record`` it returns None (no record object)."""
        valid_kind(kind)
        if not (is_exact(tool_name) and is_exact(call_id) and is_exact(unknown)):
            return self.attach_c(
                key, exact(tool_name), args_hash, exact(call_id), result_hash, has_result,
                exact(unknown), kind, identity, has_identity, no_progress, want_record,
            )
        cdef Outcome outcome = outcome_of(
            result_hash, has_result, kind, identity, has_identity, no_progress
        )
        cdef uint64_t call_hash = str_hash(call_id) if call_id is not None else 0
        cdef double now = 0.0
        cdef Py_ssize_t row, slot = -1
        cdef int64_t key_hash = key_hash_of(self, key)
        # The record is built once the lock is released (a new container), from
        # the stored slot's fields when an earlier record answers.
        cdef Cols c
        cdef Outcome stored
        cdef uint64_t stored_args = 0
        cdef double ts = 0.0
        cdef object stored_tool, stored_id, stored_unknown
        cdef int gc_was = enter(self)
        try:
            row = row_find(self, key, key_hash)
            if row >= 0:
                slot = outcome_slot(
                    self, row, name_find(self, tool_name), args_hash, call_id, call_hash,
                    &outcome, unknown,
                )
            if slot >= 0:
                if want_record:  # nobody reads the stored fields otherwise
                    cols_of(meta_at(self, row), &c)
                    stored_tool = self.names[c.tool[slot]]
                    stored_args = c.args[slot]
                    stored_id = slot_id(self, row, slot) if c.flag[slot] & HAS_CALL_ID else None
                    ts = c.ts[slot]
                    stored.flags = c.flag[slot]
                    stored.result = c.result[slot]
                    stored.identity = c.identity[slot] if stored.flags & HAS_IDENTITY else 0
                    stored_unknown = (
                        self.names[c.unknown[slot]] if stored.flags & HAS_UNKNOWN else None
                    )
            else:
                now = now_seconds()
                row_append(
                    self, key, key_hash, row, tool_name, args_hash, call_id, now, &outcome,
                    unknown,
                )
        finally:
            leave(self, gc_was)
        if not want_record:  # after_call with no guard armed and no note pending
            return None
        if slot >= 0:
            return make_record(
                stored_tool, stored_args, stored_id, key, ts, stored_unknown, &stored, True
            )
        return make_record(tool_name, args_hash, call_id, key, now, unknown, &outcome, True)

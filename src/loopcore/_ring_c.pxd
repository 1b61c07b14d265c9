# cython: language_level=3, freethreading_compatible=True
"""C-level API of the compiled ring store, for the per-call twin."""

from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t


cdef extern from "_lock.h":
    ctypedef struct loopcore_lock:
        pass


cdef struct RowMeta:
    # What a call reads of its row, in one 64-byte cache line (the chunks are
    # aligned to it): with many live scopes the row is rarely cached, and each
    # line more is one more wait.
    int32_t head
    int32_t fill
    int32_t older
    int32_t newer
    # The scope key's parts (borrowed: row_keys holds the key), so a lookup
    # that is handed the same objects compares pointers only.
    PyObject *session
    PyObject *run_id
    # The row's records, allocated on demand and grown up to ``history_size``:
    # ``block`` holds the columns for ``cap`` records (see ``Cols``), ``ids``
    # the inline call ids once the row has one, ``identity`` terminal
    # failures' identity hashes (SPEC §8.4) once the row stores one.
    char *block
    char *ids
    uint64_t *identity
    int32_t cap
    # The low half of the key's hash (all the table's index uses: see ``Slot``).
    uint32_t key_hash


cdef struct RowLinks:
    # What only a session's drop and a row's coming and going read, kept apart
    # (after a chunk's ``RowMeta``): the other rows of this row's session (-1:
    # none), newer and older.
    int32_t sess_prev
    int32_t sess_next


cdef struct Slot:
    # One entry of the open-addressing table from scope key to row: the low
    # half of the key's hash (all an index below 2**32 slots uses; the row's
    # bookkeeping has it too) and the row plus one (0: empty, so a table
    # fresh from calloc is all empty; -1: a deleted entry, which probes go on
    # past).
    uint32_t key_hash
    int32_t entry
    # The row's block (``RowMeta.block``), so that a call can ask for the
    # row's records as soon as it has the entry (see ``warm``).
    char *block


cdef struct Variant:
    # One argument variant of a churn walk (SPEC §8.3): its args hash, the
    # result it was first seen with, and its calls (0: an empty table entry).
    uint64_t args
    uint64_t result
    int64_t count


cdef struct Scan:
    # Every count of one scan (``ScanStats`` in C); names are indices into
    # the store's name table, valid while ``RingStore.generation`` is unchanged.
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
    int64_t churn
    int64_t churn_variants
    int64_t tool_index
    # The name generation the indices belong to.
    uint64_t generation


cdef class RingStore:
    cdef readonly Py_ssize_t history_size
    cdef readonly Py_ssize_t max_scopes
    cdef readonly Py_ssize_t capacity
    cdef Py_ssize_t live
    # Scopes evicted to make room (LRU), for ``stats()``.
    cdef readonly Py_ssize_t evicted

    # Call ids too long to keep inline, by ``row * history_size + slot``.
    cdef dict long_ids
    # Objects released under the lock, dropped once it is released (their
    # finalisers may call back into the store).
    cdef list dead

    # Rows' bookkeeping in chunks of ROW_CHUNK rows, allocated as rows are first
    # used and never moved (``capacity``: rows used so far); freed rows wait
    # in a list linked through their ``older`` field.
    cdef RowMeta **meta_chunks
    # Each chunk's allocation (``meta_chunks`` points into it, aligned).
    cdef void **chunk_blocks
    cdef Py_ssize_t chunk_slots
    cdef int32_t free_head
    cdef int32_t oldest_row
    cdef int32_t newest_row
    cdef Slot *slots
    cdef Py_ssize_t table_mask
    cdef Py_ssize_t table_used
    # While the table grows, the table it replaces: its entries move over a few
    # per new scope (``old_cursor``: the next slot to move), so no call pays
    # for moving them all.
    cdef Slot *old_slots
    cdef Py_ssize_t old_mask
    cdef Py_ssize_t old_cursor
    # A table all moved over, given back a slice per new scope (its bytes, and
    # how many of them are given back so far): see ``_ring_pages.h``.
    cdef Slot *retired
    cdef size_t retired_size
    cdef size_t retired_done
    # The rows' scope keys, in lists of ROW_CHUNK (one list per chunk).
    cdef list row_keys
    # A session's newest row (its rows are linked through ``sess_next``).
    cdef dict by_session

    # Tool names and unknown tool names, each kept once, by index, with the
    # number of slab slots that use it: an index is freed with its last use.
    cdef list names
    cdef dict name_index
    cdef uint32_t *name_refs
    cdef Py_ssize_t names_capacity
    cdef list free_names
    # The tool name object seen last and its index (GIL builds only).
    cdef object last_tool
    cdef int64_t last_tool_index
    # Counts the names forgotten: a name index is only reused after it moved.
    cdef readonly uint64_t generation

    # A churn walk's variant table when a row has more variants than the one
    # on the stack holds: allocated on first need, used under the lock.
    cdef Variant *variants
    cdef Py_ssize_t variants_size

    # The key object whose row was found last, its row and hash (caller holds
    # the lock): the stored key, or a caller's key of the very same parts.
    cdef object found_key
    cdef Py_ssize_t found_row
    cdef int64_t found_hash
    cdef loopcore_lock lock

    cdef int64_t warm(self, object key) except? -1
    cdef bint scan_raw(
        self, object key, int64_t key_hash, object tool_name, uint64_t args_hash,
        int64_t alarm, int64_t unknown_alarm, bint append, object call_id, Scan *out,
    ) except -1
    cdef object stats(self, Scan *scan)
    cdef object scan_c(
        self, object key, object tool_name, uint64_t args_hash, int64_t alarm,
        int64_t unknown_alarm, bint append, object call_id,
    )
    cdef int append_c(
        self, object key, object tool_name, uint64_t args_hash, object call_id, int kind
    ) except -1
    cdef object attach_c(
        self, object key, object tool_name, uint64_t args_hash, object call_id,
        uint64_t result_hash, bint has_result, object unknown, int kind, uint64_t identity,
        bint has_identity, bint no_progress, bint want_record=*,
    )

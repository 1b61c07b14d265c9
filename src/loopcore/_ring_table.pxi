# Where is a scope's row, and which of its lines does a call ask for ahead?
# (included by _ring_c.pyx; the caller holds the store's lock)
#
# An open-addressing table maps a scope key to its row. Each entry also holds
# the row's block, so that ``warm`` can ask for the row's bookkeeping and its
# records at once: with many live scopes neither is cached, and waiting for one
# line to learn the address of the next is what a cold call costs. (Entries of
# 8 bytes, the block read from the row's bookkeeping, halve the table but were
# measured slower at 100,000 scopes: in a shuffled order that line is cold too,
# and the table of either size is not kept cached on this hardware.)


cdef inline Py_ssize_t row_find(RingStore self, object key, int64_t key_hash) except -2:
    """The key's row, marked most recently used; -1 when the scope has none."""
    cdef Py_ssize_t row = row_seek(self, key, key_hash)
    if row >= 0:
        lru_touch(self, <int32_t>row)
    return row


cdef inline Py_ssize_t row_seek(RingStore self, object key, int64_t key_hash) except -2:
    """``row_find`` without marking the row used: the caller does (``lru_touch``)
    before anything reads the LRU order (see ``scan_raw``)."""
    if key is self.found_key:
        return self.found_row  # the key found last: inline, no call
    return row_remember(self, key, key_hash)


cdef Py_ssize_t row_remember(RingStore self, object key, int64_t key_hash) except -2:
    """``row_seek`` of a key other than the one found last, remembered when it can be."""
    cdef Py_ssize_t row = row_lookup(self, key, key_hash)
    cdef RowMeta *m
    if row < 0:
        return -1
    # Remembered only when its parts are the stored key's very objects: a
    # caller's merely equal key (and the objects in it) must not outlive the
    # call. Compared in the row's bookkeeping, not the key list, whose line a
    # cold row would wait for.
    m = meta_at(self, row)
    if m.session == <PyObject*>(<tuple>key)[0] and m.run_id == <PyObject*>(<tuple>key)[1]:
        self.found_key = key
        self.found_row = row
        self.found_hash = key_hash
    return row


cdef inline Py_ssize_t probe(
    Slot *slots, Py_ssize_t mask, RingStore self, tuple parts, object key, int64_t key_hash
) except -2:
    """The key's row in one table, or -1."""
    cdef Py_ssize_t index = <Py_ssize_t>(<uint64_t>key_hash & <uint64_t>mask)
    cdef int32_t entry
    cdef RowMeta *meta
    while True:
        entry = slots[index].entry
        if entry == SLOT_EMPTY:
            return -1
        if entry > 0 and slots[index].key_hash == <uint32_t>key_hash:
            meta = meta_at(self, entry - 1)
            if (meta.session == <PyObject*>parts[0] and meta.run_id == <PyObject*>parts[1]) or (
                key_at(self, entry - 1) == key
            ):
                return entry - 1
        index = (index + 1) & mask


cdef Py_ssize_t row_lookup(RingStore self, object key, int64_t key_hash) except -2:
    """The key's row or -1, without touching the LRU order.

    ``key_hash`` is ``scope_hash(key)``, taken by the caller before the lock:
    a session's own ``__hash__`` never runs under it. While the table grows, a
    key not yet moved is found in the old table.
    """
    cdef tuple parts = <tuple>key
    cdef Py_ssize_t row = probe(self.slots, self.table_mask, self, parts, key, key_hash)
    if row < 0 and self.old_slots != NULL:
        row = probe(self.old_slots, self.old_mask, self, parts, key, key_hash)
    return row


cdef inline Slot *slot_guess(Slot *slots, Py_ssize_t mask, uint32_t key_hash) noexcept nogil:
    """The first entry of this hash in one table (or NULL): most likely the key's."""
    cdef Py_ssize_t index = <Py_ssize_t>(key_hash & <uint64_t>mask)
    while slots[index].entry != SLOT_EMPTY:
        if slots[index].entry > 0 and slots[index].key_hash == key_hash:
            return &slots[index]
        index = (index + 1) & mask
    return NULL


cdef void table_prefetch(RingStore self, int64_t key_hash) noexcept:
    """Ask for the lines of the row the key most likely has, without waiting for any.

    The entry is not checked against the key (that would wait for the row's
    bookkeeping): a rare other key of the same hash half costs only what is
    fetched in vain. The block's columns are taken to hold ``history_size``
    records, as a row does once full; a row still filling has them nearer.
    """
    cdef Slot *slot = slot_guess(self.slots, self.table_mask, <uint32_t>key_hash)
    if slot == NULL and self.old_slots != NULL:
        slot = slot_guess(self.old_slots, self.old_mask, <uint32_t>key_hash)
    if slot == NULL:
        return
    prefetch(meta_at(self, slot.entry - 1))
    if slot.block == NULL:
        return
    cdef Py_ssize_t h = self.history_size
    # The scan counts over the whole args column, then reads the newest record's
    # tool and flags (SPEC §8.15's walks; the outcome reads the next slot's).
    prefetch_lines(slot.block, 8 * min(h, 256))
    if h <= 64:
        prefetch_lines(slot.block + 32 * h, 4 * h)
        prefetch_lines(slot.block + 40 * h, h)


cdef inline void prefetch_lines(const char *start, Py_ssize_t size) noexcept nogil:
    """Ask for every cache line of ``size`` bytes from ``start``."""
    cdef size_t line = <size_t>start & ~(<size_t>CACHE_LINE - 1)
    cdef size_t end = <size_t>start + <size_t>size
    while line < end:
        prefetch(<const void*>line)
        line += CACHE_LINE


cdef void row_prefetch(RingStore self, Py_ssize_t row) noexcept:
    """Ask for the lines of the row a call writes once found (``table_prefetch``
    asked for those it reads): its LRU neighbours' bookkeeping, the next slot's,
    and the call ids' when it has them.
    """
    cdef RowMeta *m = meta_at(self, row)
    # Marking the row used writes both LRU neighbours' bookkeeping: asked for
    # now, they arrive while the scan waits for the row's records.
    if m.older >= 0:
        prefetch_write(meta_at(self, m.older))
    if m.newer >= 0:
        prefetch_write(meta_at(self, m.newer))
    if m.block == NULL:
        return
    cdef Cols c
    cols_of(m, &c)
    cdef Py_ssize_t slot = m.head
    cdef Py_ssize_t newest = slot - 1 if slot > 0 else self.history_size - 1
    prefetch(&c.tool[newest])
    prefetch(&c.flag[newest])
    if slot < m.cap:
        prefetch_write(&c.ts[slot])
        prefetch_write(&c.result[slot])
        prefetch_write(&c.tool[slot])
        prefetch_write(&c.flag[slot])
    if m.ids != NULL:
        # An outcome with a call id counts the id hashes over the whole column.
        prefetch_lines(<const char*>c.call_id, 8 * min(<Py_ssize_t>m.fill, 256))
        if slot < m.cap:
            prefetch_write(&m.ids[slot])
            prefetch_write(&m.ids[m.cap + slot * ID_BYTES])


cdef inline void slot_put(
    Slot *slots, Py_ssize_t mask, uint32_t key_hash, int32_t entry, char *block,
    Py_ssize_t *used,
) noexcept nogil:
    cdef Py_ssize_t index = <Py_ssize_t>(key_hash & <uint64_t>mask)
    while slots[index].entry > 0:
        index = (index + 1) & mask
    if slots[index].entry == SLOT_EMPTY:
        used[0] += 1
    slots[index].key_hash = key_hash
    slots[index].entry = entry
    slots[index].block = block


cdef int table_insert(RingStore self, int32_t row) except -1:
    # The caller made room (``table_make_room``).
    cdef RowMeta *m = meta_at(self, row)
    slot_put(self.slots, self.table_mask, m.key_hash, row + 1, m.block, &self.table_used)
    return 0


cdef inline Slot *slot_of(
    Slot *slots, Py_ssize_t mask, uint32_t key_hash, int32_t row
) noexcept nogil:
    """The row's entry in one table, or NULL."""
    cdef Py_ssize_t index = <Py_ssize_t>(key_hash & <uint64_t>mask)
    cdef int32_t entry
    while True:
        entry = slots[index].entry
        if entry == SLOT_EMPTY:
            return NULL
        if entry == row + 1:
            return &slots[index]
        index = (index + 1) & mask


cdef Slot *table_slot(RingStore self, int32_t row) noexcept:
    """The row's entry, in the table or (not moved yet) the old one."""
    cdef uint32_t key_hash = meta_at(self, row)[0].key_hash
    cdef Slot *slot = slot_of(self.slots, self.table_mask, key_hash, row)
    if slot == NULL and self.old_slots != NULL:
        slot = slot_of(self.old_slots, self.old_mask, key_hash, row)
    return slot


cdef void table_block(RingStore self, int32_t row) noexcept:
    """The row's entry follows its block (grown, or freed)."""
    cdef Slot *slot = table_slot(self, row)
    if slot != NULL:
        slot.block = meta_at(self, row)[0].block


cdef void table_delete(RingStore self, int32_t row) noexcept:
    # Tombstoned, not emptied, so that probes for keys further on go on.
    cdef Slot *slot = table_slot(self, row)
    if slot != NULL:
        slot.entry = SLOT_DELETED
        slot.block = NULL


cdef Slot *table_alloc(Py_ssize_t size) except NULL:
    # Zeroed (all empty), and a large table's pages are zeroed by the system only
    # when first touched, never in one go here.
    if <size_t>size > (<size_t>-1) // sizeof(Slot) // 2:
        raise MemoryError()
    cdef Slot *slots = <Slot*>pages_alloc(size * sizeof(Slot))
    if slots == NULL:
        raise MemoryError()
    return slots


cdef void table_retire(RingStore self) noexcept:
    """The old table is all moved over: it is given back from the next new scope on."""
    pages_free(self.retired, self.retired_size, self.retired_done)  # not expected: done
    self.retired = self.old_slots
    self.retired_size = (self.old_mask + 1) * sizeof(Slot)
    self.retired_done = 0
    self.old_slots = NULL


cdef void table_give_back(RingStore self) noexcept:
    """Give back the next slice of the retired table; free it once all is given back.

    Unmapping a large table at once is a pause of a millisecond or more; a
    slice of RELEASE_BYTES per new scope is a few microseconds, and the whole
    is given back long before the table could grow again.
    """
    cdef size_t done = pages_release(
        self.retired, self.retired_size, self.retired_done, self.retired_done + RELEASE_BYTES
    )
    if done == self.retired_done or done >= self.retired_size:
        # All given back, or the table is one the system takes back only whole.
        pages_free(self.retired, self.retired_size, done)
        self.retired = NULL
        self.retired_size = 0
        self.retired_done = 0
    else:
        self.retired_done = done


cdef void table_migrate(RingStore self, Py_ssize_t steps) noexcept:
    """Move up to ``steps`` slots of the old table over; drop it once all are moved."""
    cdef Slot *old = self.old_slots
    cdef Py_ssize_t end = self.old_mask + 1
    cdef int32_t entry
    while steps > 0 and self.old_cursor < end:
        entry = old[self.old_cursor].entry
        if entry > 0:
            slot_put(self.slots, self.table_mask, old[self.old_cursor].key_hash, entry,
                     old[self.old_cursor].block, &self.table_used)
            # Tombstoned: probes of the old table for keys not moved yet go on past it.
            old[self.old_cursor].entry = SLOT_DELETED
        self.old_cursor += 1
        steps -= 1
    if self.old_cursor >= end:
        table_retire(self)


cdef int table_make_room(RingStore self) except -1:
    """Room for one more key: a table at most three quarters full, grown a step at a time.

    A full table is replaced by one of at least twice the live keys and half
    its own size, and the old one's entries move over ``MIGRATE_STEP`` slots
    per new scope: the move ends before the new table could fill (it starts at
    most half full, has a quarter of its size to go, and the old table has at
    most twice its slots), so no single call rebuilds the table.
    """
    if self.retired != NULL:
        table_give_back(self)
    if self.old_slots != NULL:
        table_migrate(self, MIGRATE_STEP)
    if (self.table_used + 1) * 4 <= 3 * (self.table_mask + 1):
        return 0
    if self.old_slots != NULL:  # not expected (see above): finish the move first
        table_migrate(self, self.old_mask + 1)
    cdef Py_ssize_t size = 16
    while size < 2 * (self.live + 1) or 2 * size < self.table_mask + 1:
        size *= 2
    cdef Slot *fresh = table_alloc(size)
    self.old_slots = self.slots
    self.old_mask = self.table_mask
    self.old_cursor = 0
    self.slots = fresh
    self.table_mask = size - 1
    self.table_used = 0
    table_migrate(self, MIGRATE_STEP)
    return 0

# Where is a scope's row, and how do rows come, go and grow? (included by _ring_c.pyx)
#
# An open-addressing table maps a scope key to its row, an intrusive list keeps
# rows in LRU order, a stack recycles freed rows; the caller holds the lock.


cdef Py_ssize_t row_find(RingStore self, object key) except -2:
    """The key's row, marked most recently used; -1 when the scope has none."""
    cdef Py_ssize_t row
    if key is self.found_key:
        row = self.found_row
    else:
        row = row_lookup(self, key)
        if row < 0:
            return -1
        # Only the stored key is remembered: a caller's equal key (and the
        # objects in it) must not outlive the call.
        if self.row_keys[row] is key:
            self.found_key = key
            self.found_row = row
    lru_touch(self, <int32_t>row)
    return row


cdef Py_ssize_t row_lookup(RingStore self, object key) except -2:
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


cdef int table_insert(RingStore self, int32_t row) except -1:
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


cdef void table_delete(RingStore self, int32_t row) noexcept:
    # Tombstoned, not emptied, so that probes for keys further on go on.
    cdef int64_t key_hash = self.meta[row].key_hash
    cdef Py_ssize_t index = <Py_ssize_t>(<uint64_t>key_hash & <uint64_t>self.table_mask)
    while self.slots[index].row != row:
        index = (index + 1) & self.table_mask
    self.slots[index].row = SLOT_DELETED


cdef int resize_table(RingStore self, Py_ssize_t wanted) except -1:
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


cdef int row_append(
    RingStore self, object key, Py_ssize_t row, object tool_name, uint64_t args_hash,
    object call_id, double now, uint64_t result_hash, bint has_result, object unknown,
) except -1:
    # Names are counted before the slot changes, so a failure leaves it whole.
    cdef uint32_t tool_index = <uint32_t>name_use(self, tool_name)
    cdef uint32_t unknown_index = NO_NAME
    if unknown is not None:
        try:
            unknown_index = <uint32_t>name_use(self, unknown)
        except BaseException:
            name_drop(self, tool_index)
            raise
    if row < 0:
        try:
            row = row_new(self, key)
        except BaseException:
            name_drop(self, tool_index)
            if unknown is not None:
                name_drop(self, unknown_index)
            raise
    cdef Py_ssize_t slot = self.meta[row].head
    cdef Py_ssize_t index = row * self.history_size + slot
    if self.meta[row].fill == self.history_size:
        slot_clear(self, index)
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
        slot_store_id(self, index, call_id)
        self.flag[index] |= HAS_CALL_ID
    self.meta[row].head = <int32_t>(slot + 1 if slot + 1 < self.history_size else 0)
    if self.meta[row].fill < self.history_size:
        self.meta[row].fill += 1
    return 0


cdef Py_ssize_t row_new(RingStore self, object key) except -1:
    # Everything that can raise (a session's hash, growing) comes before
    # the first change, so a failure leaves the store as it was.
    cdef int64_t key_hash = scope_hash(<tuple>key)
    session = (<tuple>key)[0]
    self.by_session.get(session)
    if self.live >= self.max_scopes:
        free_row(self, self.row_keys[self.oldest_row], self.oldest_row)
    if self.free_count == 0:
        slab_grow(self, min(self.max_scopes, 2 * self.capacity))
    if (self.table_used + 1) * 2 > self.table_mask + 1:
        resize_table(self, 2 * (self.live + 1))
    self.free_count -= 1
    cdef int32_t row = self.free_rows[self.free_count]
    self.meta[row].head = 0
    self.meta[row].fill = 0
    self.meta[row].key_hash = key_hash
    self.meta[row].session = <PyObject*>session
    self.meta[row].run_id = <PyObject*>(<tuple>key)[1]
    table_insert(self, row)
    self.row_keys[row] = key
    entry = self.by_session.get(session)
    if entry is None:
        self.by_session[session] = key
    elif type(entry) is set:
        (<set>entry).add(key)
    else:
        self.by_session[session] = {entry, key}
    lru_link_newest(self, row)
    self.live += 1
    return row


cdef int free_row(RingStore self, object key, Py_ssize_t row) except -1:
    cdef Py_ssize_t slot, base = row * self.history_size
    for slot in range(self.meta[row].fill):
        slot_clear(self, base + slot)
    table_delete(self, <int32_t>row)
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
    lru_unlink(self, <int32_t>row)
    self.meta[row].fill = 0
    self.meta[row].head = 0
    self.free_rows[self.free_count] = <int32_t>row
    self.free_count += 1
    self.live -= 1
    return 0


cdef void lru_link_newest(RingStore self, int32_t row) noexcept:
    self.meta[row].older = self.newest_row
    self.meta[row].newer = -1
    if self.newest_row >= 0:
        self.meta[self.newest_row].newer = row
    else:
        self.oldest_row = row
    self.newest_row = row


cdef void lru_unlink(RingStore self, int32_t row) noexcept:
    cdef int32_t before = self.meta[row].older, after = self.meta[row].newer
    if before >= 0:
        self.meta[before].newer = after
    else:
        self.oldest_row = after
    if after >= 0:
        self.meta[after].older = before
    else:
        self.newest_row = before


cdef void lru_touch(RingStore self, int32_t row) noexcept:
    if row != self.newest_row:
        lru_unlink(self, row)
        lru_link_newest(self, row)


cdef int slab_grow(RingStore self, Py_ssize_t capacity) except -1:
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

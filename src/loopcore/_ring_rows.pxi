# Where is a scope's row, and how do rows come, go and grow? (included by _ring_c.pyx)
#
# An open-addressing table maps a scope key to its row, an intrusive list keeps
# rows in LRU order, a stack recycles freed rows; the caller holds the lock.


cdef Py_ssize_t row_find(RingStore self, object key, int64_t key_hash) except -2:
    """The key's row, marked most recently used; -1 when the scope has none."""
    cdef Py_ssize_t row
    if key is self.found_key:
        row = self.found_row
    else:
        row = row_lookup(self, key, key_hash)
        if row < 0:
            return -1
        # Only the stored key is remembered: a caller's equal key (and the
        # objects in it) must not outlive the call.
        if self.row_keys[row] is key:
            self.found_key = key
            self.found_row = row
    lru_touch(self, <int32_t>row)
    return row


cdef Py_ssize_t row_lookup(RingStore self, object key, int64_t key_hash) except -2:
    """The key's row or -1, without touching the LRU order.

    ``key_hash`` is ``scope_hash(key)``, taken by the caller before the lock:
    a session's own ``__hash__`` never runs under it.
    """
    cdef tuple parts = <tuple>key
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


cdef int row_reserve(RingStore self, Py_ssize_t row) except -1:
    """Room for one more record in a row that is not yet full at ``history_size``.

    A row's block holds ``cap`` records and doubles (from 4, up to
    ``history_size``) when they are used up, so a scope costs memory in
    proportion to what it holds. A row only wraps once full, so before that
    its records are ``0 .. fill-1`` in order and move over column by column.
    """
    cdef RowMeta *m = &self.meta[row]
    if m.fill < m.cap or m.cap == self.history_size:
        return 0
    cdef Py_ssize_t cap = min(self.history_size, max(4, 2 * <Py_ssize_t>m.cap))
    cdef RowMeta grown = m[0]
    grown.cap = <int32_t>cap
    grown.block = <char*>checked_raw_malloc(cap, RECORD_BYTES)
    grown.ids = NULL
    grown.identity = NULL
    try:
        if m.ids != NULL:
            grown.ids = <char*>checked_raw_malloc(cap, 1 + ID_BYTES)
        if m.identity != NULL:
            grown.identity = <uint64_t*>checked_raw_malloc(cap, sizeof(uint64_t))
    except BaseException:
        PyMem_RawFree(grown.block)
        PyMem_RawFree(grown.ids)
        raise
    cdef Cols old, new
    cols_of(m, &old)
    cols_of(&grown, &new)
    cdef Py_ssize_t n = m.fill
    memcpy(new.args, old.args, n * sizeof(uint64_t))
    memcpy(new.result, old.result, n * sizeof(uint64_t))
    memcpy(new.call_id, old.call_id, n * sizeof(uint64_t))
    memcpy(new.ts, old.ts, n * sizeof(double))
    memcpy(new.tool, old.tool, n * sizeof(uint32_t))
    memcpy(new.unknown, old.unknown, n * sizeof(uint32_t))
    memcpy(new.flag, old.flag, n)
    if m.ids != NULL:
        memcpy(grown.ids, m.ids, n)
        memcpy(&grown.ids[cap], &m.ids[m.cap], n * ID_BYTES)
        PyMem_RawFree(m.ids)
    if m.identity != NULL:
        memcpy(grown.identity, m.identity, n * sizeof(uint64_t))
        PyMem_RawFree(m.identity)
    PyMem_RawFree(m.block)
    m[0] = grown
    return 0


cdef int row_identity(RingStore self, Py_ssize_t row) except -1:
    """The row's identity column, allocated when it first stores an identity hash."""
    cdef RowMeta *m = &self.meta[row]
    if m.identity == NULL:
        # A row without terminal failures never pays for it.
        m.identity = <uint64_t*>checked_raw_malloc(m.cap, sizeof(uint64_t))
    return 0


cdef Py_ssize_t row_append(
    RingStore self, object key, int64_t key_hash, Py_ssize_t row, object tool_name,
    uint64_t args_hash, object call_id, double now, Outcome *outcome, object unknown,
) except -1:
    """Append a record to the key's row (``row``, or -1: a new row); returns the row."""
    cdef Cols c
    cdef RowMeta *m
    cdef int64_t found
    cdef uint32_t tool_index
    # A full row reuses its oldest slot: when that names this tool already (a
    # run calling one tool), its use carries over and the counts stay put.
    cdef bint same_tool = False
    if row >= 0 and self.meta[row].fill == self.history_size:
        m = &self.meta[row]
        cols_of(m, &c)
        found = name_find(self, tool_name)
        same_tool = found >= 0 and c.tool[m.head] == <uint32_t>found
    # Names are counted and room is made before the slot changes, so a
    # failure leaves the row whole.
    tool_index = <uint32_t>found if same_tool else <uint32_t>name_use(self, tool_name)
    cdef uint32_t unknown_index = NO_NAME
    try:
        if unknown is not None:
            unknown_index = <uint32_t>name_use(self, unknown)
        if row < 0:
            row = row_new(self, key, key_hash)
        if self.meta[row].fill == self.meta[row].cap:
            row_reserve(self, row)
        if outcome.flags & HAS_IDENTITY:
            row_identity(self, row)
    except BaseException:
        if not same_tool:
            name_drop(self, tool_index)
        if unknown_index != NO_NAME:
            name_drop(self, unknown_index)
        raise
    m = &self.meta[row]
    cdef Py_ssize_t slot = m.head
    cols_of(m, &c)
    if m.fill == self.history_size:
        if same_tool and not (c.flag[slot] & (HAS_UNKNOWN | LONG_ID)):
            pass  # nothing in the old record to let go of: its tool carries over
        else:
            slot_clear(self, row, slot, same_tool)
    cdef uint8_t flags = outcome.flags
    c.tool[slot] = tool_index
    c.args[slot] = args_hash
    c.ts[slot] = now
    # Absent fields keep stale values: the flags say what is there, and
    # leaving them untouched spares a cold row cache lines.
    if flags & HAS_RESULT:
        c.result[slot] = outcome.result
    if flags & HAS_IDENTITY:
        c.identity[slot] = outcome.identity
    if unknown is not None:
        flags |= HAS_UNKNOWN
        c.unknown[slot] = unknown_index
    c.flag[slot] = flags
    if call_id is not None:
        c.call_id[slot] = str_hash(call_id)
        slot_store_id(self, row, slot, call_id)
        c.flag[slot] |= HAS_CALL_ID
    m.head = <int32_t>(slot + 1 if slot + 1 < self.history_size else 0)
    if m.fill < self.history_size:
        m.fill += 1
    return row


cdef Py_ssize_t row_new(RingStore self, object key, int64_t key_hash) except -1:
    cdef int gc_was
    # Everything that can raise (growing) comes before the first change, so a
    # failure leaves the store as it was.
    session = (<tuple>key)[0]
    if self.live >= self.max_scopes:
        free_row(self, self.row_keys[self.oldest_row], self.oldest_row)
        self.evicted += 1
    if self.free_count == 0:
        slab_grow(self, min(self.max_scopes, 2 * self.capacity))
    if (self.table_used + 1) * 2 > self.table_mask + 1:
        resize_table(self, 2 * (self.live + 1))
    self.free_count -= 1
    cdef int32_t row = self.free_rows[self.free_count]
    cdef RowMeta *m = &self.meta[row]
    m.head = 0
    m.fill = 0
    m.cap = 0
    m.block = NULL
    m.ids = NULL
    m.identity = NULL
    m.key_hash = key_hash
    m.session = <PyObject*>session
    m.run_id = <PyObject*>(<tuple>key)[1]
    table_insert(self, row)
    self.row_keys[row] = key
    entry = self.by_session.get(session)
    if entry is None:
        self.by_session[session] = key
    elif type(entry) is set:
        (<set>entry).add(key)
    else:
        gc_was = PyGC_Disable()  # a new set: no collection may run under the lock
        self.by_session[session] = {entry, key}
        if gc_was:
            PyGC_Enable()
    lru_link_newest(self, row)
    self.live += 1
    return row


cdef int free_row(RingStore self, object key, Py_ssize_t row) except -1:
    cdef RowMeta *m = &self.meta[row]
    cdef Py_ssize_t slot
    for slot in range(m.fill):
        slot_clear(self, row, slot)
    PyMem_RawFree(m.block)
    PyMem_RawFree(m.ids)
    PyMem_RawFree(m.identity)
    m.block = NULL
    m.ids = NULL
    m.identity = NULL
    m.cap = 0
    table_delete(self, <int32_t>row)
    m.session = NULL
    m.run_id = NULL
    # The key (and the session in it) may hold the last reference to a host
    # object whose finaliser calls back into the store: it is dropped only
    # once the lock is released.
    bury(self, key)
    bury(self, self.found_key)
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
    m.fill = 0
    m.head = 0
    self.free_rows[self.free_count] = <int32_t>row
    self.free_count += 1
    self.live -= 1
    return 0


cdef int bury(RingStore self, object value) except -1:
    """Keep ``value`` alive until the lock is released (see ``leave``)."""
    if value is None:
        return 0
    cdef int gc_was
    if self.dead is None:
        gc_was = PyGC_Disable()  # a new list: no collection may run under the lock
        self.dead = []
        if gc_was:
            PyGC_Enable()
    self.dead.append(value)
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
    """Room for ``capacity`` rows' bookkeeping; every row keeps its place and block."""
    cdef Py_ssize_t old = self.capacity
    self.meta = <RowMeta*>checked_realloc(self.meta, capacity, sizeof(RowMeta))
    memset(&self.meta[old], 0, (capacity - old) * sizeof(RowMeta))
    self.free_rows = <int32_t*>checked_realloc(self.free_rows, capacity, sizeof(int32_t))
    # Free rows are popped from the end: push the new ones highest first.
    cdef Py_ssize_t row
    for row in range(capacity - 1, old - 1, -1):
        self.free_rows[self.free_count] = <int32_t>row
        self.free_count += 1
    cdef int gc_was = PyGC_Disable()  # a new list: no collection may run under the lock
    try:
        self.row_keys.extend([None] * (capacity - old))
    finally:
        if gc_was:
            PyGC_Enable()
    self.capacity = capacity
    return 0

# How do a store's rows come, go and grow? (included by _ring_c.pyx)
#
# An intrusive list keeps rows in LRU order, a stack recycles freed rows, and
# rows live in chunks that never move (the table from key to row is in
# _ring_table.pxi); the caller holds the lock.


cdef int row_reserve(RingStore self, Py_ssize_t row) except -1:
    """Room for one more record in a row that is not yet full at ``history_size``.

    A row's block holds ``cap`` records and doubles (from 4, up to
    ``history_size``) when they are used up, so a scope costs memory in
    proportion to what it holds. A row only wraps once full, so before that
    its records are ``0 .. fill-1`` in order and move over column by column.
    """
    cdef RowMeta *m = meta_at(self, row)
    if m.fill < m.cap or m.cap == self.history_size:
        return 0
    cdef Py_ssize_t cap = min(self.history_size, max(4, 2 * <Py_ssize_t>m.cap))
    cdef RowMeta grown = m[0]
    grown.cap = <int32_t>cap
    # Blocks come from the slab (_ring_slab.pxi), freed with the cap they had.
    grown.block = <char*>block_alloc(cap, RECORD_BYTES)
    grown.ids = NULL
    grown.identity = NULL
    try:
        if m.ids != NULL:
            grown.ids = <char*>block_alloc(cap, 1 + ID_BYTES)
        if m.identity != NULL:
            grown.identity = <uint64_t*>block_alloc(cap, sizeof(uint64_t))
    except BaseException:
        block_free(grown.block, cap, RECORD_BYTES)
        block_free(grown.ids, cap, 1 + ID_BYTES)
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
        block_free(m.ids, m.cap, 1 + ID_BYTES)
    if m.identity != NULL:
        memcpy(grown.identity, m.identity, n * sizeof(uint64_t))
        block_free(m.identity, m.cap, sizeof(uint64_t))
    block_free(m.block, m.cap, RECORD_BYTES)
    m[0] = grown
    table_block(self, <int32_t>row)
    return 0


cdef int row_identity(RingStore self, Py_ssize_t row) except -1:
    """The row's identity column, allocated when it first stores an identity hash."""
    cdef RowMeta *m = meta_at(self, row)
    if m.identity == NULL:
        # A row without terminal failures never pays for it.
        m.identity = <uint64_t*>block_alloc(m.cap, sizeof(uint64_t))
    return 0


cdef Py_ssize_t row_append(
    RingStore self, object key, int64_t key_hash, Py_ssize_t row, object tool_name,
    uint64_t args_hash, object call_id, double now, Outcome *outcome, object unknown,
) except -1:
    """Append a record to the key's row (``row``, or -1: a new row); returns the row."""
    cdef Cols c
    # Rows never move (see ``row_fresh``): the bookkeeping is found once.
    cdef RowMeta *m = meta_at(self, row) if row >= 0 else NULL
    cdef int64_t found
    cdef uint32_t tool_index
    # A full row reuses its oldest slot: when that names this tool already (a
    # run calling one tool), its use carries over and the counts stay put.
    cdef bint same_tool = False
    if row >= 0 and m.fill == self.history_size:
        cols_of(m, &c)
        found = name_find(self, tool_name)
        same_tool = found >= 0 and c.tool[m.head] == <uint32_t>found
    # Names are counted and room is made before the slot changes, so a
    # failure leaves the row whole.
    tool_index = <uint32_t>found if same_tool else <uint32_t>name_use(self, tool_name)
    cdef uint32_t unknown_index = NO_NAME
    # Most appends go to a row that has room, with no unknown name and no
    # identity: nothing past this point can fail, and the try statement (which
    # saves the handled exception on entry) is not entered.
    if (
        unknown is not None
        or row < 0
        or (m.fill == m.cap and m.fill < self.history_size)
        or (outcome.flags & HAS_IDENTITY and m.identity == NULL)
    ):
        row = append_room(
            self, key, key_hash, row, tool_index, same_tool, unknown, &unknown_index, outcome
        )
        m = meta_at(self, row)
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


cdef Py_ssize_t append_room(
    RingStore self, object key, int64_t key_hash, Py_ssize_t row, uint32_t tool_index,
    bint same_tool, object unknown, uint32_t *unknown_index, Outcome *outcome,
) except -1:
    """``row_append``'s steps that can fail: the unknown name's use, a new row, room
    and the identity column; on failure the tool's use (unless carried over) and the
    unknown name's are given back. Returns the row."""
    try:
        if unknown is not None:
            unknown_index[0] = <uint32_t>name_use(self, unknown)
        if row < 0:
            row = row_new(self, key, key_hash)
        if meta_at(self, row)[0].fill == meta_at(self, row)[0].cap:
            row_reserve(self, row)
        if outcome.flags & HAS_IDENTITY:
            row_identity(self, row)
    except BaseException:
        if not same_tool:
            name_drop(self, tool_index)
        if unknown_index[0] != NO_NAME:
            name_drop(self, unknown_index[0])
        raise
    return row


cdef Py_ssize_t row_new(RingStore self, object key, int64_t key_hash) except -1:
    cdef int gc_was
    # Everything that can raise (growing) comes before the first change, so a
    # failure leaves the store as it was.
    session = (<tuple>key)[0]
    if self.live >= self.max_scopes:
        free_row(self, key_at(self, self.oldest_row), self.oldest_row)
        self.evicted += 1
    table_make_room(self)
    cdef int32_t row
    if self.free_head >= 0:
        row = self.free_head
        self.free_head = meta_at(self, row).older
    else:
        row = row_fresh(self)
    cdef RowMeta *m = meta_at(self, row)
    m.head = 0
    m.fill = 0
    m.cap = 0
    m.block = NULL
    m.ids = NULL
    m.identity = NULL
    m.key_hash = <uint32_t>key_hash
    m.session = <PyObject*>session
    m.run_id = <PyObject*>(<tuple>key)[1]
    table_insert(self, row)
    key_set(self, row, key)
    # The session's rows are a list through their bookkeeping, its newest row in
    # ``by_session``: a session with many runs never rehashes a set of them.
    head = self.by_session.get(session)
    cdef RowLinks *links = links_at(self, row)
    links.sess_prev = -1
    links.sess_next = -1 if head is None else <int32_t>head
    if head is not None:
        links_at(self, <Py_ssize_t>head).sess_prev = row
    self.by_session[session] = row
    lru_link_newest(self, row)
    self.live += 1
    return row


cdef int free_row(RingStore self, object key, Py_ssize_t row) except -1:
    cdef RowMeta *m = meta_at(self, row)
    cdef Py_ssize_t slot
    for slot in range(m.fill):
        slot_clear(self, row, slot)
    block_free(m.block, m.cap, RECORD_BYTES)
    block_free(m.ids, m.cap, 1 + ID_BYTES)
    block_free(m.identity, m.cap, sizeof(uint64_t))
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
    key_set(self, row, None)
    session = (<tuple>key)[0]
    cdef RowLinks *links = links_at(self, row)
    if links.sess_next >= 0:
        links_at(self, links.sess_next).sess_prev = links.sess_prev
    if links.sess_prev >= 0:
        links_at(self, links.sess_prev).sess_next = links.sess_next
    elif links.sess_next >= 0:
        self.by_session[session] = links.sess_next
    else:
        del self.by_session[session]
    lru_unlink(self, <int32_t>row)
    m.fill = 0
    m.head = 0
    m.older = self.free_head
    self.free_head = <int32_t>row
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
    meta_at(self, row)[0].older = self.newest_row
    meta_at(self, row)[0].newer = -1
    if self.newest_row >= 0:
        meta_at(self, self.newest_row)[0].newer = row
    else:
        self.oldest_row = row
    self.newest_row = row


cdef void lru_unlink(RingStore self, int32_t row) noexcept:
    cdef int32_t before = meta_at(self, row)[0].older, after = meta_at(self, row)[0].newer
    if before >= 0:
        meta_at(self, before)[0].newer = after
    else:
        self.oldest_row = after
    if after >= 0:
        meta_at(self, after)[0].older = before
    else:
        self.newest_row = before


cdef inline void lru_touch(RingStore self, int32_t row) noexcept:
    if row != self.newest_row:
        lru_unlink(self, row)
        lru_link_newest(self, row)


cdef inline RowMeta *meta_at(RingStore self, Py_ssize_t row) noexcept nogil:
    return &self.meta_chunks[row >> ROW_CHUNK_SHIFT][row & ROW_CHUNK_MASK]


cdef inline RowLinks *links_at(RingStore self, Py_ssize_t row) noexcept nogil:
    # A chunk's links follow its ROW_CHUNK bookkeeping entries.
    return &(<RowLinks*>&self.meta_chunks[row >> ROW_CHUNK_SHIFT][ROW_CHUNK])[row & ROW_CHUNK_MASK]


cdef inline object key_at(RingStore self, Py_ssize_t row):
    return (<list>self.row_keys[row >> ROW_CHUNK_SHIFT])[row & ROW_CHUNK_MASK]


cdef inline int key_set(RingStore self, Py_ssize_t row, object key) except -1:
    (<list>self.row_keys[row >> ROW_CHUNK_SHIFT])[row & ROW_CHUNK_MASK] = key
    return 0


cdef int32_t row_fresh(RingStore self) except -1:
    """A row never used before; a new chunk of them every ``ROW_CHUNK`` rows.

    The rows that exist never move: a chunk is allocated (calloc: zeroed) and
    its key list made when its first row is taken, so a new scope costs at
    most one chunk's allocation, never a copy of the store.
    """
    cdef Py_ssize_t row = self.capacity
    cdef Py_ssize_t chunk = row >> ROW_CHUNK_SHIFT
    cdef Py_ssize_t slots
    cdef void *block
    cdef int gc_was
    if row & ROW_CHUNK_MASK == 0:
        if chunk >= self.chunk_slots:
            slots = max(8, 2 * self.chunk_slots)
            self.meta_chunks = <RowMeta**>checked_raw_realloc(
                self.meta_chunks, slots, sizeof(RowMeta*)
            )
            self.chunk_blocks = <void**>checked_raw_realloc(
                self.chunk_blocks, slots, sizeof(void*)
            )
            self.chunk_slots = slots
        # The bookkeeping, then the links; a line's worth more, so that each
        # row's ``RowMeta`` starts a cache line.
        block = PyMem_RawCalloc(
            1, ROW_CHUNK * (sizeof(RowMeta) + sizeof(RowLinks)) + CACHE_LINE
        )
        if block == NULL:
            raise MemoryError()
        self.chunk_blocks[chunk] = block
        self.meta_chunks[chunk] = <RowMeta*>(
            (<size_t>block + CACHE_LINE - 1) & ~(<size_t>CACHE_LINE - 1)
        )
        gc_was = PyGC_Disable()  # a new list: no collection may run under the lock
        try:
            self.row_keys.append([None] * ROW_CHUNK)
        finally:
            if gc_was:
                PyGC_Enable()
    self.capacity = row + 1
    return <int32_t>row

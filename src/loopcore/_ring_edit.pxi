# Which record does an outcome complete, and how is a row edited in place? (SPEC §8.1,
# §8.7, §9.1, §12.7; included by _ring_c.pyx; the caller holds the store's lock.)


cdef Py_ssize_t match_slot(
    RingStore self, Py_ssize_t row, int64_t tool_index, uint64_t args_hash, bint by_hash,
    bint has_id, uint64_t call_hash, int recorded_bits, bint *recorded,
) noexcept:
    """The record an outcome (or, ``by_hash`` false, a reconcile) belongs to, or -1.

    With a call id and ``recorded_bits`` >= 0 (the outcome's kind bits), first
    a complete record the outcome repeats, returned with ``recorded`` set: a
    veto repeats any veto under the id (§8.1), any other outcome a record of
    the same tool and args that is not a veto (§12.7); then SPEC §9.1 (a)-(c),
    the pending record of this tool (and args hash when ``by_hash``).
    """
    cdef Py_ssize_t h = self.history_size, fill = meta_at(self, row)[0].fill
    cdef Py_ssize_t slot = meta_at(self, row)[0].head, _n
    cdef Py_ssize_t with_id = -1, without_id = -1, newest = -1, id_left = 0
    cdef bint id_elsewhere = False, has
    cdef Cols c
    cols_of(meta_at(self, row), &c)
    cdef uint8_t f
    if has_id:
        # Records whose id column holds the hash (unflagged slots too: an
        # overcount only walks further): once all are seen, nothing older
        # repeats this outcome or carries its id.
        id_left = count_equal(c.call_id, fill, call_hash)
    for _n in range(fill):
        slot = slot - 1 if slot > 0 else h - 1
        f = c.flag[slot]
        has = has_id and c.call_id[slot] == call_hash
        if has:
            id_left -= 1
            has = (f & HAS_CALL_ID) != 0
        if f & COMPLETE:
            if has and recorded_bits >= 0:
                if recorded_bits == VETO:
                    if (f & KIND_BITS) == VETO:
                        recorded[0] = True
                        return slot
                elif (
                    (f & KIND_BITS) != VETO
                    and c.tool[slot] == tool_index
                    and c.args[slot] == args_hash
                ):
                    recorded[0] = True
                    return slot
        elif c.tool[slot] == tool_index and (not by_hash or c.args[slot] == args_hash):
            if not has_id:
                return slot  # (c), without an id: the newest
            if has:
                if with_id < 0:
                    with_id = slot
            elif without_id < 0 and not (f & HAS_CALL_ID):
                without_id = slot
            if newest < 0:
                newest = slot
        elif has:
            id_elsewhere = True
        if has_id and id_left == 0 and (with_id >= 0 or without_id >= 0):
            break
    if with_id >= 0:
        return with_id  # (a) the call with this id
    if without_id >= 0:
        return without_id  # (b) a call whose id was not known when it started
    if id_elsewhere:
        return -1  # the id belongs to another call still running
    return newest  # (c)


cdef inline Py_ssize_t newest_pending(
    RingStore self, Py_ssize_t row, int64_t tool_index, uint64_t args_hash, bint has_id
) noexcept:
    """The newest record when it is the pending call of this tool and args an outcome
    without a call id completes (``match_slot``'s first step then), else -1.

    The common outcome follows its own call, appended last: this is the answer
    without ``match_slot``'s set-up.
    """
    cdef RowMeta *m = meta_at(self, row)
    if has_id or m.fill == 0:
        return -1
    cdef Py_ssize_t slot = m.head - 1 if m.head > 0 else self.history_size - 1
    cdef Cols c
    cols_of(m, &c)
    if (
        not (c.flag[slot] & COMPLETE)
        and c.tool[slot] == tool_index
        and c.args[slot] == args_hash
    ):
        return slot
    return -1


cdef int slot_fill(
    RingStore self, Py_ssize_t row, Py_ssize_t slot, object call_id, uint64_t call_hash,
    Outcome *outcome, object unknown,
) except -1:
    """Complete a pending record in place (its id filled in when it had none)."""
    cdef Cols c
    cdef uint32_t unknown_index = NO_NAME
    cdef bint new_id
    # Everything that can fail comes first, so a failure leaves the record as it was.
    if outcome.flags & HAS_IDENTITY:
        row_identity(self, row)
    cols_of(meta_at(self, row), &c)
    new_id = call_id is not None and not (c.flag[slot] & HAS_CALL_ID)
    if unknown is not None:
        unknown_index = <uint32_t>name_use(self, unknown)
    if new_id:
        try:
            slot_store_id(self, row, slot, call_id)
        except BaseException:
            if unknown_index != NO_NAME:
                name_drop(self, unknown_index)
            raise
        c.call_id[slot] = call_hash
        c.flag[slot] |= HAS_CALL_ID
    if c.flag[slot] & HAS_UNKNOWN:
        name_drop(self, c.unknown[slot])
    cdef uint8_t flags = (c.flag[slot] & (HAS_CALL_ID | LONG_ID)) | outcome.flags
    if flags & HAS_RESULT:
        c.result[slot] = outcome.result
    if flags & HAS_IDENTITY:
        c.identity[slot] = outcome.identity
    if unknown is not None:
        flags |= HAS_UNKNOWN
        c.unknown[slot] = unknown_index
    c.flag[slot] = flags
    return 0


cdef Py_ssize_t outcome_slot(
    RingStore self, Py_ssize_t row, int64_t tool_index, uint64_t args_hash, object call_id,
    uint64_t call_hash, Outcome *outcome, object unknown,
) except -2:
    """The slot of the record an outcome answers with: one recorded already (unchanged),
    or the pending one it completes; -1 when it must be appended."""
    cdef bint recorded = False
    cdef Py_ssize_t slot = newest_pending(self, row, tool_index, args_hash, call_id is not None)
    if slot < 0:
        slot = match_slot(
            self, row, tool_index, args_hash, True, call_id is not None, call_hash,
            outcome.flags & KIND_BITS, &recorded,
        )
    if slot >= 0 and not recorded:
        slot_fill(self, row, slot, call_id, call_hash, outcome, unknown)
    return slot


cdef bint row_rehash(
    RingStore self, Py_ssize_t row, Py_ssize_t slot, uint64_t args_hash, int64_t *churn,
    int64_t *variants,
) except -1:
    """SPEC §8.7: give a pending record its executed args hash; True when it changed.

    ``churn``/``variants``: the churn of the new hash over the records older than it.
    """
    cdef Cols c
    cdef Scan counted
    cdef RowMeta *m = meta_at(self, row)
    cdef Py_ssize_t h = self.history_size
    cols_of(m, &c)
    cdef bint changed = c.args[slot] != args_hash
    c.args[slot] = args_hash
    # How many records are older: the slot's place counted from the oldest.
    cdef Py_ssize_t older = slot - (m.head - m.fill)
    if older < 0:
        older += h
    if older >= h:
        older -= h
    cdef Py_ssize_t start = slot - 1 if slot > 0 else h - 1
    memset(&counted, 0, sizeof(Scan))
    if churn_of(self, &c, start, older, c.tool[slot], args_hash, &counted) == NEED_VARIANTS:
        grow_variants(self, older)
        churn_of(self, &c, start, older, c.tool[slot], args_hash, &counted)
    churn[0] = counted.churn
    variants[0] = counted.churn_variants
    return changed


cdef uint64_t *release_ids(object tool_call_ids, Py_ssize_t *count) except NULL:
    """The call ids' hashes, sorted (for a binary search per record), in a raw block the
    caller frees; str ids only. Taken before the lock: a host collection's methods
    never run under it."""
    cdef list hashes = sorted(
        {str_hash(exact(call_id)) for call_id in tool_call_ids if isinstance(call_id, str)}
    )
    cdef Py_ssize_t n = len(hashes), i
    cdef uint64_t *ids = <uint64_t*>checked_raw_malloc(n, sizeof(uint64_t))
    for i in range(n):
        ids[i] = hashes[i]
    count[0] = n
    return ids


cdef inline bint released(const uint64_t *ids, Py_ssize_t n, uint64_t call_hash) noexcept nogil:
    """Is ``call_hash`` in the sorted ``ids``?"""
    cdef Py_ssize_t low = 0, high = n, middle
    while low < high:
        middle = (low + high) // 2
        if ids[middle] < call_hash:
            low = middle + 1
        else:
            high = middle
    return low < n and ids[low] == call_hash


cdef int slot_swap(RingStore self, Py_ssize_t row, Cols *c, Py_ssize_t a, Py_ssize_t b) except -1:
    """Exchange two records of a row, every column (and a long call id's entry) with them."""
    cdef RowMeta *m = meta_at(self, row)
    cdef uint8_t fa = c.flag[a], fb = c.flag[b]
    cdef Py_ssize_t base = row * self.history_size
    cdef char scratch[ID_BYTES]
    # The side dict first: a failure there leaves both records where they were.
    if fa & LONG_ID and fb & LONG_ID:
        moved = self.long_ids[base + a]
        self.long_ids[base + a] = self.long_ids[base + b]
        self.long_ids[base + b] = moved
    elif fa & LONG_ID:
        self.long_ids[base + b] = self.long_ids[base + a]
        del self.long_ids[base + a]
    elif fb & LONG_ID:
        self.long_ids[base + a] = self.long_ids[base + b]
        del self.long_ids[base + b]
    c.args[a], c.args[b] = c.args[b], c.args[a]
    c.result[a], c.result[b] = c.result[b], c.result[a]
    c.call_id[a], c.call_id[b] = c.call_id[b], c.call_id[a]
    c.ts[a], c.ts[b] = c.ts[b], c.ts[a]
    c.tool[a], c.tool[b] = c.tool[b], c.tool[a]
    c.unknown[a], c.unknown[b] = c.unknown[b], c.unknown[a]
    c.flag[a], c.flag[b] = fb, fa
    if c.identity != NULL:
        c.identity[a], c.identity[b] = c.identity[b], c.identity[a]
    if m.ids != NULL:
        m.ids[a], m.ids[b] = m.ids[b], m.ids[a]
        memcpy(scratch, &m.ids[m.cap + a * ID_BYTES], ID_BYTES)
        memcpy(&m.ids[m.cap + a * ID_BYTES], &m.ids[m.cap + b * ID_BYTES], ID_BYTES)
        memcpy(&m.ids[m.cap + b * ID_BYTES], scratch, ID_BYTES)
    return 0


cdef int slots_reverse(
    RingStore self, Py_ssize_t row, Cols *c, Py_ssize_t low, Py_ssize_t high
) except -1:
    """Reverse the records in slots ``low .. high-1``."""
    high -= 1
    while low < high:
        slot_swap(self, row, c, low, high)
        low += 1
        high -= 1
    return 0


cdef Py_ssize_t row_release(
    RingStore self, Py_ssize_t row, const uint64_t *ids, Py_ssize_t n
) except -1:
    """Remove the pending records whose call id hash is in the sorted ``ids``; the
    rest close up in order, oldest at slot 0 again. Returns how many went."""
    cdef RowMeta *m = meta_at(self, row)
    cdef Py_ssize_t h = self.history_size, fill = m.fill
    # The oldest record's slot: 0 unless the row is full and has wrapped.
    cdef Py_ssize_t start = m.head - fill
    if start < 0:
        start += h
    cdef Py_ssize_t i, slot, kept = 0, removed = 0
    cdef Cols c
    cols_of(m, &c)
    slot = start
    for i in range(fill):
        if not (c.flag[slot] & COMPLETE) and c.flag[slot] & HAS_CALL_ID and released(
            ids, n, c.call_id[slot]
        ):
            slot_clear(self, row, slot)
            c.tool[slot] = NO_NAME  # marks a released slot below
            removed += 1
        slot = slot + 1 if slot + 1 < h else 0
    if not removed:
        return 0
    # Kept records move up to the front, in order (a stable partition).
    cdef Py_ssize_t source = start, target = start
    for i in range(fill):
        if c.tool[source] != NO_NAME:
            if source != target:
                slot_swap(self, row, &c, target, source)
            target = target + 1 if target + 1 < h else 0
            kept += 1
        source = source + 1 if source + 1 < h else 0
    if start:
        # A full row that had wrapped: rotate it so that its oldest record is at 0.
        slots_reverse(self, row, &c, 0, start)
        slots_reverse(self, row, &c, start, h)
        slots_reverse(self, row, &c, 0, h)
    m.fill = <int32_t>kept
    m.head = <int32_t>kept
    return removed

# What does one scan of a row count, and how are names and call ids kept per slot?
# (included by _ring_c.pyx: module-level functions over a RingStore, so each call
# is a direct C call; the caller holds the store's lock.)


cdef int64_t name_find(RingStore self, object name) except -2:
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


cdef int64_t name_use(RingStore self, object name) except -1:
    """The name's index, counted as used once more (caller holds the lock)."""
    cdef int64_t index = name_find(self, name)
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


cdef void name_drop(RingStore self, uint32_t index) noexcept:
    """One use fewer; the last one frees the index (caller holds the lock)."""
    self.name_refs[index] -= 1
    if self.name_refs[index]:
        return
    if self.last_tool_index == index:
        self.last_tool = None
        self.last_tool_index = -1
    self.generation += 1
    name = self.names[index]
    # Names are exact str: dropping them runs no Python code.
    del self.name_index[name]
    self.names[index] = None
    self.free_names.append(index)


cdef struct Cols:
    # A row's columns inside its block, for ``cap`` records.
    uint64_t *args
    uint64_t *result
    uint64_t *call_id
    double *ts
    uint32_t *tool
    uint32_t *unknown
    uint8_t *flag


cdef inline void cols_of(RowMeta *m, Cols *c) noexcept nogil:
    # 8-byte columns first, then 4-byte, then bytes: every column stays aligned.
    cdef Py_ssize_t n = m.cap
    c.args = <uint64_t*>m.block
    c.result = c.args + n
    c.call_id = c.result + n
    c.ts = <double*>(c.call_id + n)
    c.tool = <uint32_t*>(c.ts + n)
    c.unknown = c.tool + n
    c.flag = <uint8_t*>(c.unknown + n)


cdef int slot_clear(
    RingStore self, Py_ssize_t row, Py_ssize_t slot, bint keep_tool=False
) except -1:
    """Release what a slot about to be reused or freed holds (its tool's use unless kept)."""
    cdef Cols c
    cols_of(&self.meta[row], &c)
    cdef uint8_t flags = c.flag[slot]
    if not keep_tool:
        name_drop(self, c.tool[slot])
    if flags & HAS_UNKNOWN:
        name_drop(self, c.unknown[slot])
    if flags & LONG_ID:
        del self.long_ids[row * self.history_size + slot]
    c.flag[slot] = 0
    return 0


cdef int slot_store_id(RingStore self, Py_ssize_t row, Py_ssize_t slot, object call_id) except -1:
    cdef RowMeta *m = &self.meta[row]
    cdef Cols c
    cols_of(m, &c)
    cdef Py_ssize_t size
    cdef const char *data = ascii_bytes(call_id, &size)
    if data == NULL:
        encoded = (<str>call_id).encode("utf-8", "surrogatepass")
        data = encoded
        size = len(encoded)
    if size > ID_BYTES:
        self.long_ids[row * self.history_size + slot] = call_id
        c.flag[slot] |= LONG_ID
        return 0
    if m.ids == NULL:
        # A row without call ids never pays for them.
        m.ids = <char*>checked_raw_malloc(m.cap, 1 + ID_BYTES)
    m.ids[slot] = <char>size
    memcpy(&m.ids[m.cap + slot * ID_BYTES], data, size)
    return 0


cdef object slot_id(RingStore self, Py_ssize_t row, Py_ssize_t slot):
    cdef RowMeta *m = &self.meta[row]
    cdef Cols c
    cols_of(m, &c)
    cdef uint8_t flags = c.flag[slot]
    if not (flags & HAS_CALL_ID):
        return None
    if flags & LONG_ID:
        return self.long_ids[row * self.history_size + slot]
    return PyUnicode_DecodeUTF8(
        &m.ids[m.cap + slot * ID_BYTES], <uint8_t>m.ids[slot], "surrogatepass"
    )


cdef object scan_stats(RingStore self, Scan *scan):
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


cdef bint row_scan(
    RingStore self, Py_ssize_t row, int64_t tool_index, uint64_t args_hash, int64_t alarm,
    int64_t unknown_alarm, Scan *out,
) noexcept:
    """One newest-first pass over a row (``_ring_py.scan_window``); True when alarmed."""
    cdef Py_ssize_t h = self.history_size
    cdef Py_ssize_t count = self.meta[row].fill
    cdef Py_ssize_t slot = self.meta[row].head
    cdef Py_ssize_t position, index
    memset(out, 0, sizeof(Scan))
    if count == 0:
        return 0 >= alarm or 0 >= unknown_alarm
    # A row holds up to ``cap`` records; it wraps only once full at ``history_size``.
    slot = slot - 1 if slot > 0 else h - 1
    index = slot
    cdef Cols c
    cols_of(&self.meta[row], &c)
    cdef uint32_t *tool = c.tool
    cdef uint64_t *args = c.args
    cdef uint64_t *result = c.result
    cdef uint32_t *unknown = c.unknown
    cdef uint8_t *flag = c.flag

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
            recent += args[i] == args_hash
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
        index = slot

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

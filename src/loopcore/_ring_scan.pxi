# What does one scan of a row count, and how are names and call ids kept per slot?
# (included by _ring_c.pyx: module-level functions over a RingStore, so each call
# is a direct C call; the caller holds the store's lock.) The churn walk and its
# variant table are in _ring_churn.pxi.


cdef inline int64_t name_find(RingStore self, object name) except -2:
    """The name's index, or -1 when no record uses it (caller holds the lock)."""
    if not GIL_DISABLED and name is self.last_tool:
        return self.last_tool_index  # a run calling one tool: inline, no call
    return name_lookup(self, name)


cdef int64_t name_lookup(RingStore self, object name) except -2:
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
    # Outside the block, allocated once the row stores one (else NULL).
    uint64_t *identity


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
    c.identity = m.identity


cdef int slot_clear(
    RingStore self, Py_ssize_t row, Py_ssize_t slot, bint keep_tool=False
) except -1:
    """Release what a slot about to be reused or freed holds (its tool's use unless kept)."""
    cdef Cols c
    cols_of(meta_at(self, row), &c)
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
    cdef RowMeta *m = meta_at(self, row)
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
        m.ids = <char*>block_alloc(m.cap, 1 + ID_BYTES)
    m.ids[slot] = <char>size
    memcpy(&m.ids[m.cap + slot * ID_BYTES], data, size)
    return 0


cdef object slot_id(RingStore self, Py_ssize_t row, Py_ssize_t slot):
    cdef RowMeta *m = meta_at(self, row)
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
        churn=scan.churn,
        churn_variants=scan.churn_variants,
    )


cdef inline bint same_identity(Cols *c, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """Do two records carry the same identity hash, or both none?"""
    cdef uint8_t has = c.flag[a] & HAS_IDENTITY
    if has != (c.flag[b] & HAS_IDENTITY):
        return False
    return not has or c.identity[a] == c.identity[b]


# Every count zero, and the padding between them (C statics are zero-initialised).
cdef Scan NO_COUNTS


cdef inline bint walk_ends_at_once(Cols *c, Py_ssize_t newest, int64_t tool_index) noexcept nogil:
    """Does ``tool_walk`` stop at the newest record with nothing counted?

    So it does for the common call: the newest record is not a veto (which
    both streaks skip over), and is another tool's or this tool's ordinary
    outcome without an unknown-tool name (which ends both streaks).
    """
    cdef uint8_t f = c.flag[newest]
    if (f & KIND_BITS) == VETO:
        return False
    if c.tool[newest] != tool_index:
        return True
    return (f & HAS_RESULT) != 0 and (f & KIND_BITS) != TERMINAL and not (f & HAS_UNKNOWN)


cdef inline void tool_walk(
    Cols *c, Py_ssize_t slot, Py_ssize_t count, Py_ssize_t h, int64_t tool_index, Scan *out,
) noexcept nogil:
    """The unknown-tool streak and SPEC §8.4's terminal streak (into ``streak``), newest first.

    Both look at this tool's newest records whatever their args, and both
    usually end at the newest record (another tool, an ordinary outcome).
    """
    cdef bint unknown_open = True, terminal_open = True, same_tool, veto
    cdef int64_t unknown_streak = 0, terminal = 0, pending = 0
    cdef uint32_t name = 0
    cdef Py_ssize_t anchor = -1, _n
    cdef uint8_t f
    for _n in range(count):
        f = c.flag[slot]
        same_tool = c.tool[slot] == tool_index
        veto = (f & KIND_BITS) == VETO
        # Vetoes (of any tool) are skipped, not breaking (SPEC §8.1, §8.15 F1).
        if unknown_open and not veto:
            if not same_tool or not (f & HAS_UNKNOWN):
                unknown_open = False
            elif unknown_streak == 0:
                name = c.unknown[slot]
                unknown_streak = 1
            elif c.unknown[slot] != name:
                unknown_open = False
            else:
                unknown_streak += 1
        if terminal_open:
            if not same_tool:
                terminal_open = False
            elif veto:
                pending += 1
            elif f & HAS_RESULT:
                if (f & KIND_BITS) != TERMINAL:
                    terminal_open = False
                elif (
                    anchor >= 0
                    and c.result[slot] != c.result[anchor]
                    and (c.args[slot] != c.args[anchor] or not same_identity(c, slot, anchor))
                ):
                    terminal_open = False
                else:
                    if anchor < 0:
                        anchor = slot
                    terminal += pending + 1
                    pending = 0
        if not (unknown_open or terminal_open):
            break
        slot = slot - 1 if slot > 0 else h - 1
    out.unknown_streak = unknown_streak
    out.unknown_name = name if unknown_streak else 0
    if terminal:
        out.streak = terminal
        out.reference = c.result[anchor]
        out.has_reference = True


cdef inline void repeat_walk(
    Cols *c, Py_ssize_t slot, Py_ssize_t count, Py_ssize_t h, int64_t tool_index,
    uint64_t args_hash, int64_t recent, Scan *out,
) noexcept nogil:
    """SPEC §8.1's no-progress streak and the ping-pong tail (§4, §12.4), newest first.

    The streak replaces the terminal one ``tool_walk`` left in ``out`` unless
    that one is strictly longer.
    """
    cdef Py_ssize_t position, tail = 0
    cdef int64_t streak = 0, pending = 0, matched = 0
    cdef uint64_t reference = 0, record_hash, record_result
    cdef bint has_reference = False, streak_open = True, veto
    cdef uint64_t side_a = c.args[slot], side_b = 0, result_a = 0, result_b = 0
    cdef bint tail_open = True, has_a = False, has_b = False, missing = False, differs = False
    cdef uint8_t f
    for position in range(count):
        record_hash = c.args[slot]
        f = c.flag[slot]
        veto = (f & KIND_BITS) == VETO
        if streak_open and record_hash == args_hash:
            matched += 1
            if c.tool[slot] == tool_index:
                if veto:
                    pending += 1
                elif f & HAS_RESULT:
                    record_result = c.result[slot]
                    if not has_reference:
                        reference = record_result
                        has_reference = True
                    elif record_result != reference:
                        streak_open = False
                    if streak_open:
                        streak += pending + 1
                        pending = 0
            # No earlier record has this hash: the streak is complete.
            if matched == recent:
                streak_open = False
        if tail_open:
            if position == 1:
                if record_hash == side_a:
                    tail_open = False
                else:
                    side_b = record_hash
            elif position > 1 and record_hash != (side_a if position % 2 == 0 else side_b):
                tail_open = False
            if tail_open:
                tail += 1
                # Vetoes take part in the alternation and are neutral for progress.
                if not veto:
                    if not (f & HAS_RESULT):
                        missing = True
                    elif position % 2 == 0:
                        if not has_a:
                            result_a = c.result[slot]
                            has_a = True
                        elif c.result[slot] != result_a:
                            differs = True
                    else:
                        if not has_b:
                            result_b = c.result[slot]
                            has_b = True
                        elif c.result[slot] != result_b:
                            differs = True
        if not (streak_open or tail_open):
            break
        slot = slot - 1 if slot > 0 else h - 1
    if not has_reference:
        streak = pending  # vetoes alone count
    if not (out.streak > streak):
        out.streak = streak
        out.reference = reference
        out.has_reference = has_reference
    if tail >= 2 and args_hash == side_b:
        out.pingpong = tail + 1
        out.no_progress = not missing and has_a and has_b and not differs


cdef int row_scan(
    RingStore self, Py_ssize_t row, int64_t tool_index, uint64_t args_hash, int64_t alarm,
    int64_t unknown_alarm, Scan *out,
) noexcept:
    """One scan of a row (``_counts.scan_window``): 1 when alarmed, 0 when quiet, or
    NEED_VARIANTS (nothing counted) when the churn walk needs ``grow_variants`` first."""
    cdef Py_ssize_t h = self.history_size
    cdef Py_ssize_t count = meta_at(self, row)[0].fill
    cdef Py_ssize_t newest = meta_at(self, row)[0].head
    # Zeroed whole, padding too: the per-call twin digests the struct's bytes.
    out[0] = NO_COUNTS
    if count == 0:
        return 0 >= alarm or 0 >= unknown_alarm
    # A row holds up to ``cap`` records; it wraps only once full at ``history_size``.
    newest = newest - 1 if newest > 0 else h - 1
    cdef Cols c
    cols_of(meta_at(self, row), &c)
    # Most calls are new: no earlier record has their hash, so there is no
    # §8.1 streak, no ping-pong (that needs h == B, an earlier hash) and no
    # churn (h must be a variant). Counting matches in memory order is one
    # pass over the column (``_ring_count.h``: the compiler left the scalar
    # loop at one compare per record, 7 instructions each); the walks are for
    # the rest.
    cdef int64_t recent = count_equal(c.args, count, args_hash)
    out.recent = recent
    out.paired_hash = c.args[newest]
    if not walk_ends_at_once(&c, newest, tool_index):
        tool_walk(&c, newest, count, h, tool_index, out)
    if recent:
        repeat_walk(&c, newest, count, h, tool_index, args_hash, recent, out)
        if out.pingpong:
            out.paired_tool = c.tool[newest]
        if churn_of(self, &c, newest, count, tool_index, args_hash, out) == NEED_VARIANTS:
            return NEED_VARIANTS
    return (
        out.recent >= alarm
        or out.streak >= alarm
        or out.pingpong >= alarm
        or out.churn >= alarm
        or out.unknown_streak >= unknown_alarm
    )

# Which stable argument variants does a churn cycle through? (SPEC §8.3; included by
# _ring_c.pyx; the caller holds the store's lock.)
#
# The walk keeps, per args hash, the first result seen and a count, in a small
# open-addressing table on the stack; a row with more distinct variants than it
# holds walks again with the store's heap table, sized for the whole row.

cdef enum:
    # Calls of one argument variant that make it a stable part of a churn.
    STABLE_VARIANT = 3
    # Entries of the table on the stack, at most half of them used.
    STACK_VARIANTS = 16


cdef inline Py_ssize_t variant_find(
    Variant *table, Py_ssize_t mask, uint64_t args
) noexcept nogil:
    """The variant's entry, or the empty entry where it belongs (args hashes are mixed)."""
    cdef Py_ssize_t index = <Py_ssize_t>((args ^ (args >> 32)) & <uint64_t>mask)
    while table[index].count and table[index].args != args:
        index = (index + 1) & mask
    return index


cdef int churn_walk(
    Cols *c, Py_ssize_t slot, Py_ssize_t count, Py_ssize_t h, int64_t tool_index,
    uint64_t args_hash, Variant *table, Py_ssize_t size, Py_ssize_t limit, int64_t *calls,
    int64_t *variants,
) noexcept nogil:
    """Walk ``count`` records newest first from ``slot``; 1 when more than ``limit``
    variants turn up (nothing counted), else 0 with the churn in ``calls``/``variants``."""
    cdef Py_ssize_t used = 0, index, _n
    cdef uint8_t f
    cdef bint cleared = False
    calls[0] = variants[0] = 0
    for _n in range(count):
        if c.tool[slot] != tool_index:
            break
        f = c.flag[slot]
        # Pending calls and vetoes have no result: skipped.
        if f & HAS_RESULT:
            if not (f & NO_PROGRESS):
                break
            if not cleared:
                memset(table, 0, size * sizeof(Variant))
                cleared = True
            index = variant_find(table, size - 1, c.args[slot])
            if table[index].count == 0:
                if used == limit:
                    return 1
                table[index].args = c.args[slot]
                table[index].result = c.result[slot]
                table[index].count = 1
                used += 1
            elif table[index].result != c.result[slot]:
                break
            else:
                table[index].count += 1
        slot = slot - 1 if slot > 0 else h - 1
    if used < 2 or table[variant_find(table, size - 1, args_hash)].count == 0:
        return 0
    # Every variant stable, all with one result: a churn ``args_hash`` is part of.
    cdef int64_t total = 0
    cdef uint64_t result = 0
    cdef bint first = True
    for index in range(size):
        if table[index].count:
            if table[index].count < STABLE_VARIANT:
                return 0
            if first:
                result = table[index].result
                first = False
            elif table[index].result != result:
                return 0
            total += table[index].count
    calls[0] = total
    variants[0] = used
    return 0


cdef int churn_of(
    RingStore self, Cols *c, Py_ssize_t slot, Py_ssize_t count, int64_t tool_index,
    uint64_t args_hash, Scan *out,
) noexcept:
    """The churn ``args_hash`` is part of over ``count`` records newest first from ``slot``,
    into ``out``; NEED_VARIANTS when the heap table must first grow to ``count``."""
    cdef Variant table[STACK_VARIANTS]
    if not churn_walk(
        c, slot, count, self.history_size, tool_index, args_hash, table, STACK_VARIANTS,
        STACK_VARIANTS // 2, &out.churn, &out.churn_variants,
    ):
        return 0
    if self.variants_size < 2 * count:
        return NEED_VARIANTS
    # At most ``count`` variants: the heap table never fills beyond half.
    churn_walk(
        c, slot, count, self.history_size, tool_index, args_hash, self.variants,
        self.variants_size, count, &out.churn, &out.churn_variants,
    )
    return 0


cdef int grow_variants(RingStore self, Py_ssize_t count) except -1:
    """A heap variant table for walks over ``count`` records (a power of two, 2x)."""
    cdef Py_ssize_t size = 2 * STACK_VARIANTS
    while size < 2 * count:
        size *= 2
    if size <= self.variants_size:
        return 0
    cdef Variant *table = <Variant*>checked_raw_malloc(size, sizeof(Variant))
    PyMem_RawFree(self.variants)
    self.variants = table
    self.variants_size = size
    return 0

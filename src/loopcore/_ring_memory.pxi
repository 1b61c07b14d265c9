# How does the store hash keys, allocate, and take its lock so that no host code runs
# under it? (included by _ring_c.pyx)


cdef inline int64_t scope_hash(tuple key) except? -1:
    """A well-mixed 64-bit hash of a scope key's parts (str hashes are cached)."""
    cdef uint64_t h = <uint64_t>hash(key[0]) * 0x9E3779B97F4A7C15ULL
    h ^= <uint64_t>hash(key[1]) + 0x632BE59BD9B4E019ULL + (h << 6) + (h >> 2)
    h ^= h >> 31
    h *= 0xBF58476D1CE4E5B9ULL
    h ^= h >> 29
    return <int64_t>(h >> 1)


cdef inline object exact(object name):
    """A name as the exact str it equals: a str subclass's own methods never run here."""
    if name is None or type(name) is str:
        return name
    return str.__str__(name)


cdef inline bint is_exact(object name) noexcept:
    """Is ``exact(name)`` the very object? (The per-call steps take their names as
    given then: an argument they rebind is a reference taken and dropped per call.)"""
    return name is None or type(name) is str


cdef inline size_t alloc_bytes(size_t count, size_t size) except? 0:
    """The bytes of ``count`` items of ``size`` (1 for none: never a zero-size
    allocation); MemoryError past half the address space."""
    if size and count > (<size_t>-1) // size // 2:
        raise MemoryError()
    return count * size if count else 1


cdef void *checked_realloc(void *old, size_t count, size_t size) except NULL:
    cdef void *fresh = PyMem_Realloc(old, alloc_bytes(count, size))
    if fresh == NULL:
        raise MemoryError()
    return fresh


cdef void *checked_raw_realloc(void *old, size_t count, size_t size) except NULL:
    cdef void *fresh = PyMem_RawRealloc(old, alloc_bytes(count, size))
    if fresh == NULL:
        raise MemoryError()
    return fresh


cdef void *checked_raw_malloc(size_t count, size_t size) except NULL:
    # The raw allocator: no GIL needed, never a collection.
    cdef void *block = PyMem_RawMalloc(alloc_bytes(count, size))
    if block == NULL:
        raise MemoryError()
    return block


cdef inline int64_t key_hash_of(RingStore self, object key) except? -1:
    """``scope_hash(key)``, taken before the lock; the key found last has it kept."""
    if not GIL_DISABLED and key is self.found_key:
        return self.found_hash
    return scope_hash(<tuple>key)


# A collection can run whenever a new container object is allocated, and the
# finalisers it runs are host code that may call back into the store. Under the
# lock, the per-call steps allocate no container (records are built after the
# lock is released); the steps that must (history, a scan's stats) take the
# lock with the collector off, and ``no_collection`` covers the rare one in
# between (a session's second run, the first released key).


cdef inline int enter(RingStore self) noexcept:
    """Take the lock (``leave`` releases it); returns 0: the collector was not touched."""
    acquire(&self.lock)
    return 0


cdef inline int enter_no_collection(RingStore self) noexcept:
    """Take the lock with the collector off until ``leave``; returns its previous state."""
    acquire(&self.lock)
    return PyGC_Disable()


cdef inline void leave(RingStore self, int gc_was) noexcept:
    """Release the lock, then drop what was released under it (finalisers may run)."""
    if self.dead is None:  # the common call released nothing
        if gc_was:
            PyGC_Enable()
        release(&self.lock)
        return
    leave_dead(self, gc_was)


cdef void leave_dead(RingStore self, int gc_was) noexcept:
    dead = self.dead
    if dead is not None:
        self.dead = None
    if gc_was:
        PyGC_Enable()
    release(&self.lock)

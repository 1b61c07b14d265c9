# Where do rows' record blocks come from? The process-wide slab of _ring_slab.h,
# which takes first touches of fresh memory off the calling thread. (included
# by _ring_c.pyx)

from libc.stdint cimport uintptr_t

cdef extern from "_ring_slab.h":
    ctypedef struct loopcore_slab_stats:
        size_t chunks
        size_t mapped
        size_t taken
        size_t blocks
        size_t reused
        size_t pooled
        size_t recycled
        size_t prefaulted
        size_t regions
        int ready
        int queued
        int thread
        int refused
    # Under the slab's own lock (_lock.h): the caller holds the GIL or a thread state.
    void *slab_alloc "loopcore_slab_alloc" (size_t size) noexcept
    void slab_release "loopcore_slab_release" (void *block, size_t size) noexcept
    void slab_read "loopcore_slab_read" (loopcore_slab_stats *stats) noexcept
    int slab_reserve "loopcore_slab_reserve" (uintptr_t *out, int room) noexcept


cdef void *block_alloc(size_t count, size_t size) except NULL:
    """Room for ``count`` items of ``size`` bytes in a row (freed by ``block_free``)."""
    cdef void *block = slab_alloc(alloc_bytes(count, size))
    if block == NULL:
        raise MemoryError()
    return block


cdef inline void block_free(void *block, size_t count, size_t size) noexcept:
    # The slab's size class is the one the block was allocated with.
    slab_release(block, count * size if count else 1)


def _slab_stats():
    """The row-block slab's counters (for tests): chunks, blocks, the prefault thread."""
    cdef loopcore_slab_stats s
    slab_read(&s)
    return {
        "chunks": s.chunks,
        "mapped": s.mapped,
        "taken": s.taken,
        "blocks": s.blocks,
        "reused": s.reused,
        "pooled": s.pooled,
        "recycled": s.recycled,
        "prefaulted": s.prefaulted,
        "regions": s.regions,
        "ready": s.ready,
        "queued": s.queued,
        "thread": bool(s.thread),
        "refused": bool(s.refused),
    }


def _slab_reserve():
    """The addresses of the chunks in the prefault reserve, ready or queued (for tests)."""
    cdef uintptr_t out[16]
    cdef int count = slab_reserve(out, 16)
    return [out[k] for k in range(count)]

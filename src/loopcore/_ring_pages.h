/*
 * How does a store take a large scope table's memory from the system, and give
 * it back a piece at a time?
 *
 * Freeing a table of many megabytes in one go unmaps thousands of pages: a
 * pause of a millisecond or more inside one call. Where the system lets a
 * mapping be returned in parts (POSIX munmap), a retired table is given back
 * a slice per new scope instead; elsewhere it is freed whole, as before.
 * Small tables come from the raw allocator either way.
 */
#ifndef LOOPCORE_RING_PAGES_H
#define LOOPCORE_RING_PAGES_H

#include <Python.h>
#include <stddef.h>
#include <string.h>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#define LOOPCORE_PAGED 1
#else
#define LOOPCORE_PAGED 0
#endif

/* Tables of at least this many bytes are mapped (and given back in parts). */
#define LOOPCORE_PAGED_MIN ((size_t)1 << 20)

/* Zeroed memory for a table of `size` bytes, or NULL. A mapping's pages are
 * zeroed by the system when first touched, never in one go here. */
static void *loopcore_table_alloc(size_t size) {
#if LOOPCORE_PAGED
    if (size >= LOOPCORE_PAGED_MIN) {
        void *block = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                           -1, 0);
        return block == MAP_FAILED ? NULL : block;
    }
#endif
    return PyMem_RawCalloc(1, size);
}

/* Give back the whole pages of bytes [from, to) of a table of `size` bytes;
 * returns the offset up to which it is given back (`from` when it cannot be). */
static size_t loopcore_table_release(void *block, size_t size, size_t from, size_t to) {
#if LOOPCORE_PAGED
    if (size >= LOOPCORE_PAGED_MIN) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t end = to >= size ? size : to - to % page;
        if (end > from && munmap((char *)block + from, end - from) == 0) {
            return end;
        }
    }
#endif
    (void)block;
    (void)size;
    (void)to;
    return from;
}

/* Free a table of `size` bytes whose first `released` bytes were given back. */
static void loopcore_table_free(void *block, size_t size, size_t released) {
    if (block == NULL) {
        return;
    }
#if LOOPCORE_PAGED
    if (size >= LOOPCORE_PAGED_MIN) {
        if (released < size) {
            munmap((char *)block + released, size - released);
        }
        return;
    }
#endif
    (void)released;
    PyMem_RawFree(block);
}

#endif

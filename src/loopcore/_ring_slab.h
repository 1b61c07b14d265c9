/*
 * Where do rows' record blocks come from, so that a call never waits while the
 * system supplies fresh memory?
 *
 * A row's blocks grow (4, 8, 16 ... records): with a million live scopes that
 * is a gigabyte of memory touched for the first time while calls are served,
 * and each first touch of a page is a fault on the calling thread (tens of
 * microseconds at the tail on a virtual machine). Here every store's blocks
 * come from one process-wide slab: chunks of 2 MiB (aligned to their size),
 * cut into pages of 64 KiB, each page holding blocks of one size class (a
 * multiple of 16 bytes). A freed block is reused by the next block of its
 * class; a page whose blocks are all freed goes back to a pool that any class
 * takes pages from (rows that grow from 4 to 8 to 16 records leave whole pages
 * of the smaller blocks behind them, which the larger ones then fill). Memory
 * is never given back to the system: new scopes reuse it.
 *
 * Chunks come from _ring_chunks.h (on Linux, faulted in ahead by a thread).
 *
 * Callers hold the GIL or, without one, a thread state: the slab's own lock
 * (_lock.h) guards the pages, their lists and free blocks, and the chunks.
 */
#ifndef LOOPCORE_RING_SLAB_H
#define LOOPCORE_RING_SLAB_H

#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_lock.h"
#include "_ring_chunks.h"

/* Blocks are multiples of 16 bytes (malloc's alignment); larger than the last
 * class (rows of more than 199 records), they come from the raw allocator. */
#define LOOPCORE_SLAB_GRAIN ((size_t)16)
#define LOOPCORE_SLAB_CLASSES 512
#define LOOPCORE_SLAB_LARGEST (LOOPCORE_SLAB_GRAIN * LOOPCORE_SLAB_CLASSES)
/* 32 pages a chunk: a page's tail after its last whole block is unused (under
 * 0.5% for the blocks of a 30-record row; 2% with pages of 32 KiB). */
#define LOOPCORE_SLAB_PAGE ((size_t)64 << 10)
#define LOOPCORE_SLAB_PAGES (LOOPCORE_SLAB_CHUNK / LOOPCORE_SLAB_PAGE)

typedef struct loopcore_slab_free {
    struct loopcore_slab_free *next;
} loopcore_slab_free;

/* A page's bookkeeping; a chunk's 32 of them open its first page. */
typedef struct loopcore_slab_page {
    /* Neighbours on its class's list of pages with room, or (next) in the pool. */
    struct loopcore_slab_page *prev;
    struct loopcore_slab_page *next;
    loopcore_slab_free *free; /* its freed blocks */
    char *base;               /* its first block */
    uint32_t size;            /* its blocks' bytes */
    uint32_t live;            /* blocks handed out */
    uint32_t cut;             /* blocks cut from it so far (the rest were never used) */
    uint32_t capacity;        /* blocks it holds */
    int listed;               /* on its class's list */
} loopcore_slab_page;

#define LOOPCORE_SLAB_HEADER                                                            \
    ((sizeof(loopcore_slab_page) * LOOPCORE_SLAB_PAGES + 63) & ~(size_t)63)

typedef struct {
    size_t chunks;     /* chunks in the slab, whoever mapped them */
    size_t mapped;     /* of those, mapped by a caller for its own use */
    size_t taken;      /* of those, taken ready (faulted in by the thread) */
    size_t blocks;     /* blocks handed out and not freed */
    size_t reused;     /* blocks handed out from a free list */
    size_t pooled;     /* pages whose blocks were all freed, waiting for any class */
    size_t recycled;   /* pages taken back from the pool */
    size_t prefaulted; /* chunks the thread faulted in (its count: under its mutex) */
    size_t regions;    /* mappings callers made for the thread to fault in */
    int ready;         /* ready chunks now */
    int queued;        /* chunks mapped for the thread and not faulted in yet */
    int thread;        /* 1: this process has a running prefault thread */
    int refused;       /* 1: switched off, or the thread could not start */
} loopcore_slab_stats;

static struct {
    loopcore_lock lock;
    /* Per class, the pages with a block to hand out. */
    loopcore_slab_page *room[LOOPCORE_SLAB_CLASSES];
    loopcore_slab_page *pool;
    char *chunk;      /* the chunk pages are cut from */
    size_t next_page; /* its first page not cut yet */
    size_t blocks, reused, pooled, recycled;
} loopcore_slab;


static inline size_t loopcore_slab_class(size_t size) {
    return size == 0 ? 0 : (size - 1) / LOOPCORE_SLAB_GRAIN;
}

static inline loopcore_slab_page *loopcore_slab_page_of(void *block) {
    uintptr_t at = (uintptr_t)block;
    uintptr_t chunk = at & ~(uintptr_t)(LOOPCORE_SLAB_CHUNK - 1);
    return &((loopcore_slab_page *)chunk)[(at - chunk) / LOOPCORE_SLAB_PAGE];
}

static void loopcore_slab_unlist(loopcore_slab_page *page, size_t index) {
    if (page->prev != NULL) {
        page->prev->next = page->next;
    } else {
        loopcore_slab.room[index] = page->next;
    }
    if (page->next != NULL) {
        page->next->prev = page->prev;
    }
    page->prev = page->next = NULL;
    page->listed = 0;
}

static void loopcore_slab_list(loopcore_slab_page *page, size_t index) {
    page->prev = NULL;
    page->next = loopcore_slab.room[index];
    if (page->next != NULL) {
        page->next->prev = page;
    }
    loopcore_slab.room[index] = page;
    page->listed = 1;
}

/* A page for blocks of `bytes` (under the slab's lock): from the pool, else cut
 * from the chunk (a new one when it is used up); NULL when out of memory. */
static loopcore_slab_page *loopcore_slab_new_page(size_t bytes) {
    loopcore_slab_page *page = loopcore_slab.pool;
    char *start, *end;
    if (page != NULL) {
        loopcore_slab.pool = page->next;
        loopcore_slab.pooled--;
        loopcore_slab.recycled++;
    } else {
        if (loopcore_slab.chunk == NULL || loopcore_slab.next_page == LOOPCORE_SLAB_PAGES) {
            char *chunk = loopcore_slab_chunk();
            if (chunk == NULL) {
                return NULL;
            }
            loopcore_slab.chunk = chunk;
            loopcore_slab.next_page = 0;
        }
        page = &((loopcore_slab_page *)loopcore_slab.chunk)[loopcore_slab.next_page++];
    }
    uintptr_t chunk = (uintptr_t)page & ~(uintptr_t)(LOOPCORE_SLAB_CHUNK - 1);
    size_t number = (size_t)(page - (loopcore_slab_page *)chunk);
    start = (char *)chunk + number * LOOPCORE_SLAB_PAGE;
    end = start + LOOPCORE_SLAB_PAGE;
    if (number == 0) {
        start += LOOPCORE_SLAB_HEADER; /* the first page also holds the bookkeeping */
    }
    page->base = start;
    page->size = (uint32_t)bytes;
    page->capacity = (uint32_t)((size_t)(end - start) / bytes);
    page->free = NULL;
    page->live = 0;
    page->cut = 0;
    page->prev = page->next = NULL;
    page->listed = 0;
    return page;
}

/* `size` bytes (16-byte aligned, contents undefined), or NULL. */
static void *loopcore_slab_alloc(size_t size) {
    if (size > LOOPCORE_SLAB_LARGEST) {
        return PyMem_RawMalloc(size);
    }
    size_t index = loopcore_slab_class(size);
    size_t bytes = (index + 1) * LOOPCORE_SLAB_GRAIN;
    void *block;
    loopcore_lock_acquire(&loopcore_slab.lock);
    loopcore_slab_page *page = loopcore_slab.room[index];
    if (page == NULL) {
        page = loopcore_slab_new_page(bytes);
        if (page == NULL) {
            loopcore_lock_release(&loopcore_slab.lock);
            return NULL;
        }
        loopcore_slab_list(page, index);
    }
    if (page->free != NULL) {
        block = page->free;
        page->free = page->free->next;
        loopcore_slab.reused++;
    } else {
        block = page->base + (size_t)page->cut * bytes;
        page->cut++;
    }
    page->live++;
    if (page->free == NULL && page->cut == page->capacity) {
        loopcore_slab_unlist(page, index); /* full */
    }
    loopcore_slab.blocks++;
    loopcore_lock_release(&loopcore_slab.lock);
    return block;
}

/* Give back a block of `size` bytes (its size when allocated); NULL is nothing. */
static void loopcore_slab_release(void *block, size_t size) {
    if (block == NULL) {
        return;
    }
    if (size > LOOPCORE_SLAB_LARGEST) {
        PyMem_RawFree(block);
        return;
    }
    size_t index = loopcore_slab_class(size);
    loopcore_slab_page *page = loopcore_slab_page_of(block);
    loopcore_lock_acquire(&loopcore_slab.lock);
    ((loopcore_slab_free *)block)->next = page->free;
    page->free = (loopcore_slab_free *)block;
    page->live--;
    loopcore_slab.blocks--;
    if (page->live == 0) {
        /* Its blocks (and what they held) are forgotten: any class may take it. */
        if (page->listed) {
            loopcore_slab_unlist(page, index);
        }
        page->next = loopcore_slab.pool;
        loopcore_slab.pool = page;
        loopcore_slab.pooled++;
    } else if (!page->listed) {
        loopcore_slab_list(page, index);
    }
    loopcore_lock_release(&loopcore_slab.lock);
}

static void loopcore_slab_read(loopcore_slab_stats *stats) {
    memset(stats, 0, sizeof(*stats));
    loopcore_lock_acquire(&loopcore_slab.lock);
    stats->chunks = loopcore_chunks.chunks;
    stats->mapped = loopcore_chunks.mapped;
    stats->taken = loopcore_chunks.taken;
    stats->blocks = loopcore_slab.blocks;
    stats->reused = loopcore_slab.reused;
    stats->pooled = loopcore_slab.pooled;
    stats->recycled = loopcore_slab.recycled;
#if LOOPCORE_SLAB_PREFAULT
    stats->thread = loopcore_chunks.thread_pid == getpid() && !loopcore_chunks.refused;
    stats->refused = loopcore_chunks.refused;
    /* The thread holds it only between two chunks: a short wait. */
    pthread_mutex_lock(&loopcore_slab_hand);
    stats->ready = loopcore_slab_ready_count;
    stats->prefaulted = loopcore_slab_prefaulted;
    stats->queued = loopcore_slab_queued_count + loopcore_slab_faulting;
    stats->regions = loopcore_slab_regions;
    pthread_mutex_unlock(&loopcore_slab_hand);
#else
    stats->refused = 1;
#endif
    loopcore_lock_release(&loopcore_slab.lock);
}


#endif /* LOOPCORE_RING_SLAB_H */

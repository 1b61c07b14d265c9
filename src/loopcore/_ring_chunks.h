/*
 * Where does the row-block slab get its next 2 MiB chunk, so that a call
 * does not fault in fresh memory page by page?
 *
 * On Linux, once the slab has mapped enough that faults matter, a plain
 * pthread keeps a few chunks already faulted in, ready to be taken: the
 * faults happen on that thread. Callers map the chunks (a few system calls
 * for several chunks, when the reserve is half used) and the thread writes
 * one byte of each page before handing a chunk back, so no caller sees a
 * chunk while it is written. The thread makes no system call that changes
 * the memory map, and its chunks are a mapping of their own (guard pages on
 * each side): its page faults lock only that mapping, which no caller
 * changes, so a caller's mmap or fault never waits for it even when the
 * thread is off the core (before, the thread mapped its own chunks and a
 * busy machine's callers waited up to 0.4 s for it: see loopcore_slab_prefault).
 * It never touches a Python object or the GIL, a caller never waits for it
 * (one that finds no ready chunk, or the hand-over busy, maps its own chunk
 * as before), and the reserve is bounded (about 1/128 of the slab, at most
 * 16 MiB). It runs at idle priority: it only takes a core nothing else wants,
 * so on a busy machine it falls behind and callers fault their own pages, as
 * without it. LOOPCORE_PREFAULT=0 in the environment keeps it from starting.
 * After a fork the child drops the parent's reserve and starts its own
 * thread when it next needs a chunk. Elsewhere chunks are mapped (or
 * malloc'd) on demand, with no thread.
 *
 * Everything here runs under the slab's lock (_ring_slab.h), but the thread,
 * which shares only the hand-over mutex: callers only ever try it (the thread
 * holds it only between two chunks, and a fork holds it across, so that the
 * child finds the hand-over whole).
 */
#ifndef LOOPCORE_RING_CHUNKS_H
#define LOOPCORE_RING_CHUNKS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#include <unistd.h>
#define LOOPCORE_SLAB_MAPPED 1
#else
#define LOOPCORE_SLAB_MAPPED 0
#endif
#if defined(_WIN32)
#include <malloc.h>
#endif

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#define LOOPCORE_SLAB_PREFAULT 1
#else
#define LOOPCORE_SLAB_PREFAULT 0
#endif

#define LOOPCORE_SLAB_CHUNK ((size_t)2 << 20)
/* The thread writes one byte per this many (the smallest page size there is). */
#define LOOPCORE_SLAB_TOUCH ((size_t)4096)
/* Chunks mapped before the thread starts (16 MiB): small stores never get one. */
#define LOOPCORE_SLAB_THREAD_AFTER 8
/* Ready chunks: at most this many (16 MiB), and one per 128 chunks of the slab
 * (256 MiB): at 100,000 scopes the reserve is some 20 bytes a scope. */
#define LOOPCORE_SLAB_READY_MAX 8
#define LOOPCORE_SLAB_READY_SHARE 128

/* The slab's chunks (under the slab's lock). */
static struct {
    size_t chunks; /* chunks in the slab, whoever mapped them */
    size_t mapped; /* of those, mapped by a caller for its own use */
    size_t taken;  /* of those, taken ready (faulted in by the thread) */
#if LOOPCORE_SLAB_PREFAULT
    pid_t thread_pid; /* the process whose thread runs (a fork child's is not it) */
    int refused;      /* the thread is not to run again in this process */
    int atfork;
#endif
} loopcore_chunks;

#if LOOPCORE_SLAB_PREFAULT
/* The hand-over, under `loopcore_slab_hand`: callers map chunks into `queued`
 * and signal `loopcore_slab_wake`; the thread faults each in and moves it to
 * `ready`, where callers take it. Queued, in the thread's hands (`faulting`)
 * and ready together are never more than the reserve's target. */
static pthread_mutex_t loopcore_slab_hand = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t loopcore_slab_wake = PTHREAD_COND_INITIALIZER;
static char *loopcore_slab_ready[LOOPCORE_SLAB_READY_MAX];
static int loopcore_slab_ready_count;
static char *loopcore_slab_queued[LOOPCORE_SLAB_READY_MAX];
static int loopcore_slab_queued_count;
static int loopcore_slab_faulting;
static size_t loopcore_slab_prefaulted;
static size_t loopcore_slab_regions; /* mappings callers made for the thread */
#endif

/* `count` chunks of fresh memory side by side, the first aligned to the chunk
 * size (a block finds its page from its address), or NULL. `guarded`: with a
 * page no one can use on either side, so that the system never merges them
 * with a neighbouring mapping (see loopcore_slab_queue). */
static char *loopcore_slab_map(size_t count, int guarded) {
#if LOOPCORE_SLAB_MAPPED
    size_t bytes = count * LOOPCORE_SLAB_CHUNK;
    size_t guard = guarded ? (size_t)sysconf(_SC_PAGESIZE) : 0;
    size_t span = bytes + LOOPCORE_SLAB_CHUNK + 2 * guard;
    void *mapped = mmap(NULL, span, guarded ? PROT_NONE : PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) {
        return NULL;
    }
    uintptr_t start = (uintptr_t)mapped;
    uintptr_t aligned = (start + guard + LOOPCORE_SLAB_CHUNK - 1) &
                        ~(uintptr_t)(LOOPCORE_SLAB_CHUNK - 1);
    uintptr_t low = aligned - guard, high = aligned + bytes + guard;
    if (low > start) {
        munmap(mapped, low - start);
    }
    if (start + span > high) {
        munmap((void *)high, start + span - high);
    }
    if (guarded && mprotect((void *)aligned, bytes, PROT_READ | PROT_WRITE) != 0) {
        munmap((void *)low, high - low);
        return NULL;
    }
    return (char *)aligned;
#elif defined(_WIN32)
    (void)guarded;
    return count == 1 ? (char *)_aligned_malloc(LOOPCORE_SLAB_CHUNK, LOOPCORE_SLAB_CHUNK)
                      : NULL;
#else
    void *chunk = NULL;
    (void)guarded;
    return count == 1 &&
                   posix_memalign(&chunk, LOOPCORE_SLAB_CHUNK, LOOPCORE_SLAB_CHUNK) == 0
               ? (char *)chunk
               : NULL;
#endif
}

#if LOOPCORE_SLAB_PREFAULT

/* The thread only writes to chunks it was given: it never maps, unmaps or
 * otherwise changes a mapping, because a thread at idle priority that is
 * taken off the core inside such a system call keeps the process's memory
 * map locked, and every caller's own mmap or page fault then waits for it
 * (calls of hundreds of milliseconds on a busy 2-core VM, traced). Its page
 * faults lock only the mapping they touch, which no caller changes. */
static void *loopcore_slab_prefault(void *unused) {
    struct sched_param idle;
    (void)unused;
    memset(&idle, 0, sizeof(idle));
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle); /* best effort */
    pthread_mutex_lock(&loopcore_slab_hand);
    for (;;) {
        while (loopcore_slab_queued_count == 0) {
            pthread_cond_wait(&loopcore_slab_wake, &loopcore_slab_hand);
        }
        char *chunk = loopcore_slab_queued[--loopcore_slab_queued_count];
        loopcore_slab_faulting = 1;
        pthread_mutex_unlock(&loopcore_slab_hand);
        size_t done;
        /* Fresh pages read as zero: writing a zero faults each in and changes
         * nothing (no caller sees the chunk until it is handed over). */
        for (done = 0; done < LOOPCORE_SLAB_CHUNK; done += LOOPCORE_SLAB_TOUCH) {
            ((volatile char *)chunk)[done] = 0;
        }
        pthread_mutex_lock(&loopcore_slab_hand);
        loopcore_slab_faulting = 0;
        /* Room: callers queue no more than the reserve holds. */
        loopcore_slab_ready[loopcore_slab_ready_count++] = chunk;
        loopcore_slab_prefaulted++;
    }
    return NULL;
}

static void loopcore_slab_before_fork(void) { pthread_mutex_lock(&loopcore_slab_hand); }

static void loopcore_slab_after_fork_parent(void) {
    pthread_mutex_unlock(&loopcore_slab_hand);
}

/* The child has no thread: its parent's ready and queued chunks (shared with
 * the parent until written) are dropped (the one the parent's thread had in
 * hand is only address space, never used), and its own thread starts when it
 * next needs a chunk (`thread_pid` is the parent's). */
static void loopcore_slab_after_fork_child(void) {
    int k;
    for (k = 0; k < loopcore_slab_ready_count; k++) {
        munmap(loopcore_slab_ready[k], LOOPCORE_SLAB_CHUNK);
    }
    for (k = 0; k < loopcore_slab_queued_count; k++) {
        munmap(loopcore_slab_queued[k], LOOPCORE_SLAB_CHUNK);
    }
    loopcore_slab_ready_count = 0;
    loopcore_slab_queued_count = 0;
    loopcore_slab_faulting = 0;
    /* The forking thread took the hand-over in before_fork and is the child's
     * only thread: it gives it back. The condition may still count the
     * parent's thread as a waiter, which the child does not have. */
    pthread_cond_init(&loopcore_slab_wake, NULL);
    pthread_mutex_unlock(&loopcore_slab_hand);
}

/* Start this process's thread once the slab is large enough (under the slab's lock). */
static void loopcore_slab_start(void) {
    if (loopcore_chunks.refused || loopcore_chunks.chunks < LOOPCORE_SLAB_THREAD_AFTER) {
        return;
    }
    pid_t pid = getpid();
    if (loopcore_chunks.thread_pid == pid) {
        return;
    }
    const char *wanted = getenv("LOOPCORE_PREFAULT");
    if (wanted != NULL && strcmp(wanted, "0") == 0) {
        loopcore_chunks.refused = 1;
        return;
    }
    if (!loopcore_chunks.atfork) {
        if (pthread_atfork(loopcore_slab_before_fork, loopcore_slab_after_fork_parent,
                           loopcore_slab_after_fork_child) != 0) {
            loopcore_chunks.refused = 1;
            return;
        }
        loopcore_chunks.atfork = 1;
    }
    pthread_attr_t attr;
    pthread_t thread;
    sigset_t all, was;
    int started;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, (size_t)1 << 16);
    /* Signals stay with the interpreter's threads. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &was);
    started = pthread_create(&thread, &attr, loopcore_slab_prefault, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &was, NULL);
    pthread_attr_destroy(&attr);
    if (started) {
        loopcore_chunks.thread_pid = pid;
    } else {
        loopcore_chunks.refused = 1;
    }
}

/* Map chunks for the thread to fault in, once the reserve is down to half its
 * target (under the hand-over): one mapping tops it up, a few system calls of
 * the caller's for several chunks. The mapping has a guard page on each side,
 * so the system never merges a later mapping of the process into it: a merge
 * would have the caller's mmap wait until the thread's page fault in it is
 * done, which at idle priority can be a long wait. Its first page is written
 * here: the first fault of a mapping sets up what every later fault of it
 * shares, under the lock of the whole memory map; later ones lock only it. */
static void loopcore_slab_queue(void) {
    size_t wanted = loopcore_chunks.chunks / LOOPCORE_SLAB_READY_SHARE;
    int target = wanted < 1 ? 1
                 : wanted > LOOPCORE_SLAB_READY_MAX ? LOOPCORE_SLAB_READY_MAX
                                                    : (int)wanted;
    int held = loopcore_slab_ready_count + loopcore_slab_queued_count + loopcore_slab_faulting;
    if (loopcore_slab_queued_count > 0 || 2 * held > target) {
        return; /* the thread has work, or the reserve is more than half full */
    }
    int more = target - held, k;
    char *region = loopcore_slab_map((size_t)more, 1);
    if (region == NULL) {
        return; /* callers map their own chunks, as without the thread */
    }
    ((volatile char *)region)[0] = 0;
    loopcore_slab_regions++;
    /* The thread takes from the end: the lowest chunk first. */
    for (k = more - 1; k >= 0; k--) {
        loopcore_slab_queued[loopcore_slab_queued_count++] =
            region + (size_t)k * LOOPCORE_SLAB_CHUNK;
    }
    pthread_cond_signal(&loopcore_slab_wake);
}

/* A ready chunk, or NULL; queues more for the thread (under the slab's lock). */
static char *loopcore_slab_take(void) {
    char *chunk = NULL;
    if (loopcore_chunks.thread_pid != getpid() || pthread_mutex_trylock(&loopcore_slab_hand) != 0) {
        return NULL;
    }
    if (loopcore_slab_ready_count > 0) {
        chunk = loopcore_slab_ready[--loopcore_slab_ready_count];
    }
    loopcore_slab_queue();
    pthread_mutex_unlock(&loopcore_slab_hand);
    return chunk;
}

#endif /* LOOPCORE_SLAB_PREFAULT */

/* A new chunk to bump through (under the slab's lock), or NULL. */
static char *loopcore_slab_chunk(void) {
    char *chunk = NULL;
#if LOOPCORE_SLAB_PREFAULT
    loopcore_slab_start();
    chunk = loopcore_slab_take();
    if (chunk != NULL) {
        loopcore_chunks.taken++;
        loopcore_chunks.chunks++;
        return chunk;
    }
#endif
    chunk = loopcore_slab_map(1, 0);
    if (chunk != NULL) {
        loopcore_chunks.mapped++;
        loopcore_chunks.chunks++;
    }
    return chunk;
}

/* The addresses of the reserve's chunks, ready and queued (for tests): up to
 * `room` of them in `out`; returns how many. */
static int loopcore_slab_reserve(uintptr_t *out, int room) {
    int count = 0;
#if LOOPCORE_SLAB_PREFAULT
    int k;
    pthread_mutex_lock(&loopcore_slab_hand);
    for (k = 0; k < loopcore_slab_ready_count && count < room; k++) {
        out[count++] = (uintptr_t)loopcore_slab_ready[k];
    }
    for (k = 0; k < loopcore_slab_queued_count && count < room; k++) {
        out[count++] = (uintptr_t)loopcore_slab_queued[k];
    }
    pthread_mutex_unlock(&loopcore_slab_hand);
#else
    (void)out;
    (void)room;
#endif
    return count;
}

#endif /* LOOPCORE_RING_CHUNKS_H */

/*
 * The mutex of a history store: short critical sections, uncontended almost
 * always, that may still run a little Python code (a session's __eq__, an
 * allocation that triggers a finaliser), during which another thread can run.
 *
 * Python 3.13+ has PyMutex: a byte, no syscall when free, and it detaches the
 * thread state while it waits. Before 3.13 every caller holds the GIL, so a
 * flag read and written under the GIL is enough; a thread that finds it held
 * hands the GIL back until the owner has finished. (Cython's pymutex falls
 * back to PyThread locks there, whose try-acquire reads the monotonic clock on
 * every call: a measurable part of a sub-microsecond call.)
 */
#ifndef LOOPCORE_LOCK_H
#define LOOPCORE_LOCK_H

#include <Python.h>

#if PY_VERSION_HEX >= 0x030D0000

typedef PyMutex loopcore_lock;

static inline void loopcore_lock_acquire(loopcore_lock *lock) { PyMutex_Lock(lock); }
static inline void loopcore_lock_release(loopcore_lock *lock) { PyMutex_Unlock(lock); }

#else

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#define LOOPCORE_YIELD() SwitchToThread()
#else
#include <sched.h>
#define LOOPCORE_YIELD() sched_yield()
#endif

typedef struct {
    int held;
} loopcore_lock;

static inline void loopcore_lock_acquire(loopcore_lock *lock)
{
    while (lock->held) {
        Py_BEGIN_ALLOW_THREADS
        LOOPCORE_YIELD();
        Py_END_ALLOW_THREADS
    }
    lock->held = 1;
}

static inline void loopcore_lock_release(loopcore_lock *lock) { lock->held = 0; }

#endif

#endif /* LOOPCORE_LOCK_H */

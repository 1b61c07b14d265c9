/* What time is it, as time.time() would say? (A record's timestamp; included by
   _ring_c.pyx.)

   time.time() on Linux is clock_gettime(CLOCK_REALTIME) turned into whole
   nanoseconds, then into seconds: a whole second by integer division, else
   the nanoseconds as a double divided by 1e9 (CPython's pytime.c; checked
   against 3.11's _PyTime_GetSystemClock and _PyTime_AsSecondsDouble). The
   same steps here give the same double without CPython's two calls and their
   overflow checks (about 30 instructions of each append); elsewhere
   ``LOOPCORE_FAST_CLOCK`` is 0 and the store asks CPython. */

#ifndef LOOPCORE_RING_CLOCK_H
#define LOOPCORE_RING_CLOCK_H

#include <stdint.h>

#if defined(__linux__)
#include <time.h>
#define LOOPCORE_FAST_CLOCK 1

/* The wall clock in seconds, or -1.0 when the system clock cannot be read
   (the caller asks CPython then). */
static inline double loopcore_wall_clock(void)
{
    struct timespec ts;
    int64_t ns;
    /* As CPython: a volatile keeps the compiler from changing the rounding. */
    volatile double seconds;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1.0;
    ns = (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
    if (ns % 1000000000 == 0) {
        seconds = (double)(ns / 1000000000);
    } else {
        seconds = (double)ns;
        seconds /= 1e9;
    }
    return seconds;
}
#else
#define LOOPCORE_FAST_CLOCK 0
static inline double loopcore_wall_clock(void) { return -1.0; }
#endif

#endif

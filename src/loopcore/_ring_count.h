/* How many of a row's hashes equal the call's? (SPEC §4's ``recent``, the first
   count of every scan, and the records an outcome's call id may name; included
   by _ring_c.pyx.)

   Most calls are new: no hash in the window equals theirs. On x86-64 (SSE2 is
   part of the architecture) the common answer is found from the hashes' low
   halves alone, four at a time, and only when one of those matches are whole
   hashes compared, two at a time; elsewhere (aarch64 wheels) a scalar loop
   gives the same count.

   Measured (callgrind, 30-record rows): the scalar loop the compiler made of
   ``count += v[i] == x`` took 7 instructions a record (214 of row_scan's 384);
   this pass takes about 100. A two-hash vector step for the tail of a row of
   4k+2 records was tried and took 3 instructions more than the scalar tail. */

#ifndef LOOPCORE_RING_COUNT_H
#define LOOPCORE_RING_COUNT_H

#include <stddef.h>
#include <stdint.h>

#if (defined(__SSE2__) && defined(__x86_64__)) || defined(_M_X64)
#define LOOPCORE_COUNT_SSE2 1
#include <emmintrin.h>
#else
#define LOOPCORE_COUNT_SSE2 0
#endif

#if LOOPCORE_COUNT_SSE2
/* The exact count over ``n`` hashes, ``n`` a multiple of 4: a 64-bit lane is
   equal when both of its 32-bit halves are (SSE2 has no 64-bit compare). */
static inline int64_t loopcore_count_whole(const uint64_t *v, ptrdiff_t n, uint64_t x)
{
    const __m128i needle = _mm_set1_epi64x((long long)x);
    __m128i sum0 = _mm_setzero_si128(), sum1 = _mm_setzero_si128();
    ptrdiff_t i;
    for (i = 0; i < n; i += 4) {
        __m128i a = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(v + i)), needle);
        __m128i b = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(v + i + 2)), needle);
        a = _mm_and_si128(a, _mm_shuffle_epi32(a, _MM_SHUFFLE(2, 3, 0, 1)));
        b = _mm_and_si128(b, _mm_shuffle_epi32(b, _MM_SHUFFLE(2, 3, 0, 1)));
        /* An equal lane is all ones, -1: subtracting it counts one. */
        sum0 = _mm_sub_epi64(sum0, a);
        sum1 = _mm_sub_epi64(sum1, b);
    }
    sum0 = _mm_add_epi64(sum0, sum1);
    return (int64_t)_mm_cvtsi128_si64(sum0) +
           (int64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(sum0, sum0));
}
#endif

/* How many of the ``n`` hashes from ``v`` equal ``x``. */
static inline int64_t loopcore_count_equal(const uint64_t *v, ptrdiff_t n, uint64_t x)
{
    int64_t count = 0;
    ptrdiff_t i = 0;
#if LOOPCORE_COUNT_SSE2
    const ptrdiff_t body = n & ~(ptrdiff_t)3;
    if (body) {
        /* The low halves of four hashes in one register (little-endian: each
           hash's low half is its first dword), compared with the call's. */
        const __m128i low = _mm_set1_epi32((int)(uint32_t)x);
        __m128i seen = _mm_setzero_si128();
        for (; i < body; i += 4) {
            __m128 a = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(v + i)));
            __m128 b = _mm_castsi128_ps(_mm_loadu_si128((const __m128i *)(v + i + 2)));
            __m128i lows = _mm_castps_si128(_mm_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)));
            seen = _mm_or_si128(seen, _mm_cmpeq_epi32(lows, low));
        }
        if (_mm_movemask_epi8(seen))
            count = loopcore_count_whole(v, body, x);
    }
#endif
    for (; i < n; i++)
        count += v[i] == x;
    return count;
}

#endif

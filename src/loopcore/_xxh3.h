/*
 * XXH3-64 (seed 0, default secret), bit-for-bit compatible with
 * `xxhash.xxh3_64_intdigest(data)`.
 *
 * It lives here so the Cython core can fingerprint byte buffers without the
 * GIL-bound round trip through the Python `xxhash` module and without linking
 * an external C library. Written from the published algorithm; only the
 * numeric constants and the default secret are taken from the specification.
 *
 * Plain C99 (the long-input stripes in SSE2 where the compiler targets it),
 * no alignment requirements, same output on little- and big-endian hosts.
 * Depends only on <stdint.h>, <stddef.h>, <string.h> (and <emmintrin.h>).
 *
 * Test knobs (never set them in production builds):
 *   LOOPCORE_XXH3_PORTABLE_MUL     use the 32-bit-limb 64x64->128 multiply
 *   LOOPCORE_XXH3_BYTEWISE_READS   use the endian-neutral byte-by-byte reads
 *   LOOPCORE_XXH3_SCALAR           use the scalar stripes even with SSE2
 */
#ifndef LOOPCORE_XXH3_H
#define LOOPCORE_XXH3_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- little-endian loads ------------------------------------------------ */

/* A plain memcpy is a single unaligned load on hosts known to be
 * little-endian; anywhere else we assemble the value byte by byte, which is
 * correct regardless of byte order (gcc/clang turn it into load+bswap). */
#if !defined(LOOPCORE_XXH3_BYTEWISE_READS)
#  if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
#    if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#      define LOOPCORE_XXH3_HOST_LE 1
#    endif
#  elif defined(_MSC_VER) || defined(__x86_64__) || defined(__i386__) || \
        defined(_M_X64) || defined(_M_IX86) || defined(_M_ARM64) ||      \
        defined(_M_ARM)
#    define LOOPCORE_XXH3_HOST_LE 1
#  endif
#endif

static inline uint32_t loopcore_xxh3_le32(const uint8_t *p)
{
#if defined(LOOPCORE_XXH3_HOST_LE)
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
#endif
}

static inline uint64_t loopcore_xxh3_le64(const uint8_t *p)
{
#if defined(LOOPCORE_XXH3_HOST_LE)
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
#else
    return (uint64_t)loopcore_xxh3_le32(p) |
           ((uint64_t)loopcore_xxh3_le32(p + 4) << 32);
#endif
}

static inline uint64_t loopcore_xxh3_bswap64(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_bswap64(x);
#else
    x = ((x & 0x00FF00FF00FF00FFULL) << 8) | ((x >> 8) & 0x00FF00FF00FF00FFULL);
    x = ((x & 0x0000FFFF0000FFFFULL) << 16) | ((x >> 16) & 0x0000FFFF0000FFFFULL);
    return (x << 32) | (x >> 32);
#endif
}

/* ---- 64x64 -> 128 multiply, folded to 64 bits ---------------------------- */

/* The hash's quality comes from this full-width product; all three variants
 * must agree exactly, the fast ones merely let the compiler use one mul. */
#if !defined(LOOPCORE_XXH3_PORTABLE_MUL) && defined(__SIZEOF_INT128__)
#  if defined(__GNUC__)
__extension__ typedef unsigned __int128 loopcore_xxh3_u128;
#  else
typedef unsigned __int128 loopcore_xxh3_u128;
#  endif
static inline uint64_t loopcore_xxh3_mulfold(uint64_t a, uint64_t b)
{
    loopcore_xxh3_u128 p = (loopcore_xxh3_u128)a * b;
    return (uint64_t)p ^ (uint64_t)(p >> 64);
}
#elif !defined(LOOPCORE_XXH3_PORTABLE_MUL) && defined(_MSC_VER) && \
      defined(_M_X64) && !defined(_M_ARM64EC)
/* Declared by hand so the header needs nothing beyond the C standard ones. */
unsigned __int64 _umul128(unsigned __int64, unsigned __int64, unsigned __int64 *);
#  pragma intrinsic(_umul128)
static inline uint64_t loopcore_xxh3_mulfold(uint64_t a, uint64_t b)
{
    unsigned __int64 hi;
    unsigned __int64 lo = _umul128(a, b, &hi);
    return (uint64_t)lo ^ (uint64_t)hi;
}
#else
static inline uint64_t loopcore_xxh3_mulfold(uint64_t a, uint64_t b)
{
    uint64_t a0 = a & 0xFFFFFFFFu, a1 = a >> 32;
    uint64_t b0 = b & 0xFFFFFFFFu, b1 = b >> 32;
    uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    /* Sum of three values < 2^32 each: cannot overflow 64 bits. */
    uint64_t mid = (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
    uint64_t lo = (mid << 32) | (p00 & 0xFFFFFFFFu);
    uint64_t hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    return lo ^ hi;
}
#endif

/* ---- constants ----------------------------------------------------------- */

#define LOOPCORE_XXH3_P32_1 0x9E3779B1U
#define LOOPCORE_XXH3_P32_2 0x85EBCA77U
#define LOOPCORE_XXH3_P32_3 0xC2B2AE3DU
#define LOOPCORE_XXH3_P64_1 0x9E3779B185EBCA87ULL
#define LOOPCORE_XXH3_P64_2 0xC2B2AE3D27D4EB4FULL
#define LOOPCORE_XXH3_P64_3 0x165667B19E3779F9ULL
#define LOOPCORE_XXH3_P64_4 0x85EBCA77C2B2AE63ULL
#define LOOPCORE_XXH3_P64_5 0x27D4EB2F165667C5ULL
#define LOOPCORE_XXH3_MX_1 0x165667919E3779F9ULL
#define LOOPCORE_XXH3_MX_2 0x9FB21C651E98DF25ULL

#define LOOPCORE_XXH3_SECRET_LEN 192
#define LOOPCORE_XXH3_STRIPE 64
/* Each stripe advances 8 bytes into the secret, so a 192-byte secret covers
 * (192 - 64) / 8 = 16 stripes before the accumulators must be scrambled. */
#define LOOPCORE_XXH3_STRIPES_PER_BLOCK 16
#define LOOPCORE_XXH3_BLOCK (LOOPCORE_XXH3_STRIPE * LOOPCORE_XXH3_STRIPES_PER_BLOCK)

/* Wrapped in a function so translation units that include the header but
 * never hash do not get an unused-variable warning. */
static inline const uint8_t *loopcore_xxh3_secret(void)
{
    static const uint8_t secret[LOOPCORE_XXH3_SECRET_LEN] = {
        0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c,
        0xf7, 0x21, 0xad, 0x1c, 0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb,
        0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e,
        0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
        0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6,
        0x81, 0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb,
        0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97,
        0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
        0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7,
        0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31,
        0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, 0xea, 0xc5, 0xac, 0x83,
        0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
        0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26,
        0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc,
        0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f,
        0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
    };
    return secret;
}

/* ---- finalisers ---------------------------------------------------------- */

/* The XXH64 finaliser: XXH3 reuses it for the 0..3 byte inputs. */
static inline uint64_t loopcore_xxh3_fmix_xxh64(uint64_t h)
{
    h ^= h >> 33;
    h *= LOOPCORE_XXH3_P64_2;
    h ^= h >> 29;
    h *= LOOPCORE_XXH3_P64_3;
    h ^= h >> 32;
    return h;
}

static inline uint64_t loopcore_xxh3_fmix(uint64_t h)
{
    h ^= h >> 37;
    h *= LOOPCORE_XXH3_MX_1;
    h ^= h >> 32;
    return h;
}

/* Stronger finaliser for 4..8 bytes, where a single keyed word has to carry
 * all of the entropy and the length. */
static inline uint64_t loopcore_xxh3_fmix_short(uint64_t h, uint64_t len)
{
    h ^= ((h << 49) | (h >> 15)) ^ ((h << 24) | (h >> 40));
    h *= LOOPCORE_XXH3_MX_2;
    h ^= (h >> 35) + len;
    h *= LOOPCORE_XXH3_MX_2;
    h ^= h >> 28;
    return h;
}

/* ---- 0..240 bytes -------------------------------------------------------- */

static inline uint64_t loopcore_xxh3_upto16(const uint8_t *p, size_t len,
                                            const uint8_t *key)
{
    if (len > 8) {
        uint64_t lo = loopcore_xxh3_le64(p) ^
                      (loopcore_xxh3_le64(key + 24) ^ loopcore_xxh3_le64(key + 32));
        uint64_t hi = loopcore_xxh3_le64(p + len - 8) ^
                      (loopcore_xxh3_le64(key + 40) ^ loopcore_xxh3_le64(key + 48));
        uint64_t h = (uint64_t)len + loopcore_xxh3_bswap64(lo) + hi +
                     loopcore_xxh3_mulfold(lo, hi);
        return loopcore_xxh3_fmix(h);
    }
    if (len >= 4) {
        /* The two (possibly overlapping) words cover every byte. */
        uint64_t word = (uint64_t)loopcore_xxh3_le32(p + len - 4) +
                        ((uint64_t)loopcore_xxh3_le32(p) << 32);
        word ^= loopcore_xxh3_le64(key + 8) ^ loopcore_xxh3_le64(key + 16);
        return loopcore_xxh3_fmix_short(word, (uint64_t)len);
    }
    if (len > 0) {
        /* First, middle and last byte (repeats for len < 3) plus the length. */
        uint32_t packed = ((uint32_t)p[len - 1]) | ((uint32_t)len << 8) |
                          ((uint32_t)p[0] << 16) | ((uint32_t)p[len >> 1] << 24);
        uint64_t flip = (uint64_t)(loopcore_xxh3_le32(key) ^ loopcore_xxh3_le32(key + 4));
        return loopcore_xxh3_fmix_xxh64((uint64_t)packed ^ flip);
    }
    return loopcore_xxh3_fmix_xxh64(loopcore_xxh3_le64(key + 56) ^
                                    loopcore_xxh3_le64(key + 64));
}

static inline uint64_t loopcore_xxh3_mix16(const uint8_t *p, const uint8_t *key)
{
    return loopcore_xxh3_mulfold(loopcore_xxh3_le64(p) ^ loopcore_xxh3_le64(key),
                                 loopcore_xxh3_le64(p + 8) ^ loopcore_xxh3_le64(key + 8));
}

static inline uint64_t loopcore_xxh3_upto128(const uint8_t *p, size_t len,
                                             const uint8_t *key)
{
    /* Pairs of 16-byte chunks taken from both ends, working inwards; one pair
     * per started 32 bytes, each pair using the next 32 bytes of secret. */
    uint64_t h = (uint64_t)len * LOOPCORE_XXH3_P64_1;
    size_t pairs = (len - 1) / 32 + 1;
    size_t i;
    for (i = 0; i < pairs; i++) {
        h += loopcore_xxh3_mix16(p + 16 * i, key + 32 * i);
        h += loopcore_xxh3_mix16(p + len - 16 - 16 * i, key + 32 * i + 16);
    }
    return loopcore_xxh3_fmix(h);
}

static inline uint64_t loopcore_xxh3_upto240(const uint8_t *p, size_t len,
                                             const uint8_t *key)
{
    /* The first 128 bytes are mixed and finalised on their own; chunks past
     * that reuse the secret from a 3-byte offset, and the final 16 bytes use
     * an offset of 136 - 17 = 119 so they never line up with earlier keys. */
    uint64_t head = (uint64_t)len * LOOPCORE_XXH3_P64_1;
    uint64_t tail;
    size_t chunks = len / 16;
    size_t i;
    for (i = 0; i < 8; i++)
        head += loopcore_xxh3_mix16(p + 16 * i, key + 16 * i);
    head = loopcore_xxh3_fmix(head);
    tail = loopcore_xxh3_mix16(p + len - 16, key + 119);
    for (i = 8; i < chunks; i++)
        tail += loopcore_xxh3_mix16(p + 16 * i, key + 3 + 16 * (i - 8));
    return loopcore_xxh3_fmix(head + tail);
}

/* ---- > 240 bytes: eight-lane accumulator --------------------------------- */

#if defined(__SSE2__) && !defined(LOOPCORE_XXH3_SCALAR)
#include <emmintrin.h>
/* The same lanes two at a time in SSE2 registers (every x86-64 host has
 * them): the 32x32 products are _mm_mul_epu32 of the keyed words and of
 * their high halves moved down, the neighbour's word a swap of the two lanes. */
static inline void loopcore_xxh3_stripe(uint64_t acc[8], const uint8_t *p,
                                        const uint8_t *key)
{
    size_t i;
    for (i = 0; i < 8; i += 2) {
        __m128i data = _mm_loadu_si128((const __m128i *)(const void *)(p + 8 * i));
        __m128i keyed = _mm_xor_si128(
            data, _mm_loadu_si128((const __m128i *)(const void *)(key + 8 * i)));
        __m128i product = _mm_mul_epu32(keyed, _mm_shuffle_epi32(keyed, _MM_SHUFFLE(0, 3, 0, 1)));
        __m128i swapped = _mm_shuffle_epi32(data, _MM_SHUFFLE(1, 0, 3, 2));
        __m128i lanes = _mm_loadu_si128((const __m128i *)(void *)(acc + i));
        lanes = _mm_add_epi64(lanes, _mm_add_epi64(product, swapped));
        _mm_storeu_si128((__m128i *)(void *)(acc + i), lanes);
    }
}
#else
static inline void loopcore_xxh3_stripe(uint64_t acc[8], const uint8_t *p,
                                        const uint8_t *key)
{
    /* Each lane gets the keyed 32x32 product of its own word plus the raw
     * word of its neighbour, so no input word is ever lost to a zero multiply. */
    size_t i;
    for (i = 0; i < 8; i += 2) {
        uint64_t d0 = loopcore_xxh3_le64(p + 8 * i);
        uint64_t d1 = loopcore_xxh3_le64(p + 8 * i + 8);
        uint64_t k0 = d0 ^ loopcore_xxh3_le64(key + 8 * i);
        uint64_t k1 = d1 ^ loopcore_xxh3_le64(key + 8 * i + 8);
        acc[i] += d1 + (k0 & 0xFFFFFFFFu) * (k0 >> 32);
        acc[i + 1] += d0 + (k1 & 0xFFFFFFFFu) * (k1 >> 32);
    }
}
#endif

static inline void loopcore_xxh3_scramble(uint64_t acc[8], const uint8_t *key)
{
    size_t i;
    for (i = 0; i < 8; i++) {
        uint64_t a = acc[i];
        a ^= a >> 47;
        a ^= loopcore_xxh3_le64(key + 8 * i);
        acc[i] = a * LOOPCORE_XXH3_P32_1;
    }
}

static inline uint64_t loopcore_xxh3_long(const uint8_t *p, size_t len,
                                          const uint8_t *key)
{
    uint64_t acc[8] = {
        LOOPCORE_XXH3_P32_3, LOOPCORE_XXH3_P64_1, LOOPCORE_XXH3_P64_2,
        LOOPCORE_XXH3_P64_3, LOOPCORE_XXH3_P64_4, LOOPCORE_XXH3_P32_2,
        LOOPCORE_XXH3_P64_5, LOOPCORE_XXH3_P32_1,
    };
    /* (len - 1) so that the final partial block is never empty: the last
     * stripe below always has real data to overlap with. */
    size_t full_blocks = (len - 1) / LOOPCORE_XXH3_BLOCK;
    size_t rest, stripes, b, s;
    uint64_t h;

    for (b = 0; b < full_blocks; b++) {
        const uint8_t *block = p + b * LOOPCORE_XXH3_BLOCK;
        for (s = 0; s < LOOPCORE_XXH3_STRIPES_PER_BLOCK; s++)
            loopcore_xxh3_stripe(acc, block + s * LOOPCORE_XXH3_STRIPE, key + 8 * s);
        loopcore_xxh3_scramble(acc, key + LOOPCORE_XXH3_SECRET_LEN - LOOPCORE_XXH3_STRIPE);
    }

    rest = len - full_blocks * LOOPCORE_XXH3_BLOCK;
    stripes = (rest - 1) / LOOPCORE_XXH3_STRIPE;
    p += full_blocks * LOOPCORE_XXH3_BLOCK;
    for (s = 0; s < stripes; s++)
        loopcore_xxh3_stripe(acc, p + s * LOOPCORE_XXH3_STRIPE, key + 8 * s);
    /* The last 64 bytes (overlapping what came before) use a secret window
     * shifted by 7 bytes so it differs from both the stripe and scramble keys. */
    loopcore_xxh3_stripe(acc, p + rest - LOOPCORE_XXH3_STRIPE,
                         key + LOOPCORE_XXH3_SECRET_LEN - LOOPCORE_XXH3_STRIPE - 7);

    /* Merge: fold lane pairs against the secret at offset 11. */
    h = (uint64_t)len * LOOPCORE_XXH3_P64_1;
    for (s = 0; s < 4; s++)
        h += loopcore_xxh3_mulfold(acc[2 * s] ^ loopcore_xxh3_le64(key + 11 + 16 * s),
                                   acc[2 * s + 1] ^ loopcore_xxh3_le64(key + 19 + 16 * s));
    return loopcore_xxh3_fmix(h);
}

/* ---- public entry point -------------------------------------------------- */

static inline uint64_t loopcore_xxh3_64(const void *data, size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    const uint8_t *key = loopcore_xxh3_secret();
    if (len <= 16)
        return loopcore_xxh3_upto16(p, len, key);
    if (len <= 128)
        return loopcore_xxh3_upto128(p, len, key);
    if (len <= 240)
        return loopcore_xxh3_upto240(p, len, key);
    return loopcore_xxh3_long(p, len, key);
}

#endif /* LOOPCORE_XXH3_H */

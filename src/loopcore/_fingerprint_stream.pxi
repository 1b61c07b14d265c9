# How is a long encoding hashed while it is written? (included by _fingerprint_c.pyx)
#
# XXH3-64's long-input loop, run incrementally over the encoder's buffer and
# over large payloads straight from their own storage, so fingerprinting a
# huge str or bytes never copies it (SPEC §11 "Bounded work on huge values").
# The one-shot ``loopcore_xxh3_64`` stays the path for everything else: a
# digest equals it bit for bit (tests/test_fingerprint_twins.py).
#
# State (in the Encoder): ``acc`` and ``stripes`` are the accumulator and the
# stripe count within the current block after ``hashed`` bytes (a multiple of
# 64); ``data[:size]`` are the bytes after those, never empty once anything
# was hashed, and ``last`` holds the last 64 bytes hashed, for the final
# stripe, which overlaps what came before when fewer than 64 bytes remain.

from libc.stdint cimport uint8_t, uint64_t
from libc.string cimport memcpy, memmove


cdef extern from "_xxh3.h":
    const uint8_t *loopcore_xxh3_secret() noexcept nogil
    void loopcore_xxh3_stripe(uint64_t *acc, const uint8_t *p, const uint8_t *key) noexcept nogil
    void loopcore_xxh3_scramble(uint64_t *acc, const uint8_t *key) noexcept nogil
    uint64_t loopcore_xxh3_mulfold(uint64_t a, uint64_t b) noexcept nogil
    uint64_t loopcore_xxh3_fmix(uint64_t h) noexcept nogil
    uint64_t loopcore_xxh3_le64(const uint8_t *p) noexcept nogil
    uint64_t _P32_1 "LOOPCORE_XXH3_P32_1"
    uint64_t _P32_2 "LOOPCORE_XXH3_P32_2"
    uint64_t _P32_3 "LOOPCORE_XXH3_P32_3"
    uint64_t _P64_1 "LOOPCORE_XXH3_P64_1"
    uint64_t _P64_2 "LOOPCORE_XXH3_P64_2"
    uint64_t _P64_3 "LOOPCORE_XXH3_P64_3"
    uint64_t _P64_4 "LOOPCORE_XXH3_P64_4"
    uint64_t _P64_5 "LOOPCORE_XXH3_P64_5"


cdef extern from *:
    """
    /* memcpy, with the short runs most payloads are (keys, names, small
       values) copied inline: two overlapping loads and stores, no libc call. */
    static inline void lc_copy(unsigned char *dst, const void *src, size_t n) {
        const unsigned char *s = (const unsigned char *)src;
        uint64_t a, b;
        uint32_t c, d;
        if (n > 16) {
            memcpy(dst, s, n);
        } else if (n >= 8) {
            memcpy(&a, s, 8);
            memcpy(&b, s + n - 8, 8);
            memcpy(dst, &a, 8);
            memcpy(dst + n - 8, &b, 8);
        } else if (n >= 4) {
            memcpy(&c, s, 4);
            memcpy(&d, s + n - 4, 4);
            memcpy(dst, &c, 4);
            memcpy(dst + n - 4, &d, 4);
        } else {
            while (n--)
                *dst++ = *s++;
        }
    }
    """
    void lc_copy(unsigned char *dst, const void *src, size_t n) noexcept nogil


cdef enum:
    _STRIPE = 64
    _STRIPES_PER_BLOCK = 16
    _SECRET_LEN = 192
    # Payloads at least this long are hashed in place (when the encoder may
    # stream): below it, copying is cheaper than the bookkeeping.
    _STREAM_MIN = 1 << 20


if _ref.STREAM_MIN != _STREAM_MIN:
    raise ImportError("loopcore._fingerprint_c: STREAM_MIN differs from the reference")


cdef inline bint _can_stream(Encoder *enc) noexcept nogil:
    # Bytes written inside a mapping or set are sorted in the buffer later:
    # they must stay there.
    return enc.stream and enc.sorting == 0


cdef void _hash_stripes(Encoder *enc, const unsigned char *p, Py_ssize_t count) noexcept nogil:
    # ``count`` whole stripes, each followed by more input.
    cdef const uint8_t *key = loopcore_xxh3_secret()
    cdef Py_ssize_t i
    if count <= 0:
        return
    if enc.hashed == 0:
        enc.acc[0] = _P32_3
        enc.acc[1] = _P64_1
        enc.acc[2] = _P64_2
        enc.acc[3] = _P64_3
        enc.acc[4] = _P64_4
        enc.acc[5] = _P32_2
        enc.acc[6] = _P64_5
        enc.acc[7] = _P32_1
        enc.stripes = 0
    for i in range(count):
        loopcore_xxh3_stripe(enc.acc, p + i * _STRIPE, key + 8 * enc.stripes)
        enc.stripes += 1
        if enc.stripes == _STRIPES_PER_BLOCK:
            loopcore_xxh3_scramble(enc.acc, key + _SECRET_LEN - _STRIPE)
            enc.stripes = 0
    memcpy(enc.last, p + (count - 1) * _STRIPE, _STRIPE)
    enc.hashed += <uint64_t>(count * _STRIPE)


cdef void _absorb(Encoder *enc) noexcept nogil:
    """Hash the buffer but for its last 1 to 64 bytes."""
    cdef Py_ssize_t count
    if enc.size <= _STRIPE:
        return
    count = (enc.size - 1) // _STRIPE
    _hash_stripes(enc, enc.data, count)
    enc.size -= count * _STRIPE
    memmove(enc.data, enc.data + count * _STRIPE, <size_t>enc.size)


cdef inline int _put_payload(Encoder *enc, const void *data, Py_ssize_t n) except -1:
    """Append ``n`` bytes; a long run is hashed from where it lies, not copied."""
    if n < _STREAM_MIN or not _can_stream(enc):
        # The common case, inlined: most payloads are a few bytes.
        if n > 0:
            _reserve(enc, n)
            lc_copy(enc.data + enc.size, data, <size_t>n)
            enc.size += n
        return 0
    return _put_long_payload(enc, data, n)


cdef int _put_long_payload(Encoder *enc, const void *data, Py_ssize_t n) except -1:
    cdef const unsigned char *p = <const unsigned char *>data
    cdef Py_ssize_t fill, count
    # Complete the buffer's last stripe, then hash the buffer (more follows).
    fill = (_STRIPE - enc.size % _STRIPE) % _STRIPE
    enc_raw(enc, p, fill)
    p += fill
    n -= fill
    if enc.size:
        _hash_stripes(enc, enc.data, enc.size // _STRIPE)
        enc.size = 0
    # The payload's own stripes, but for the last 1 to 64 bytes, which stay
    # buffered: hashing a stripe needs input after it.
    count = (n - 1) // _STRIPE
    with nogil:
        _hash_stripes(enc, p, count)
    return enc_raw(enc, p + count * _STRIPE, n - count * _STRIPE)


cdef uint64_t _digest_streamed(Encoder *enc) noexcept:
    # The rest of the long loop on copies of the state, then the final stripe
    # and the merge, as loopcore_xxh3_long does for the whole input at once.
    cdef const uint8_t *key = loopcore_xxh3_secret()
    cdef uint64_t acc[8]
    cdef unsigned char tail[_STRIPE]
    cdef const unsigned char *final
    cdef uint64_t total = enc.hashed + <uint64_t>enc.size, h
    cdef Py_ssize_t i, count = (enc.size - 1) // _STRIPE
    cdef int stripes = enc.stripes
    memcpy(acc, enc.acc, sizeof(acc))
    for i in range(count):
        loopcore_xxh3_stripe(acc, enc.data + i * _STRIPE, key + 8 * stripes)
        stripes += 1
        if stripes == _STRIPES_PER_BLOCK:
            loopcore_xxh3_scramble(acc, key + _SECRET_LEN - _STRIPE)
            stripes = 0
    if enc.size >= _STRIPE:
        final = enc.data + enc.size - _STRIPE
    else:
        memcpy(tail, enc.last + enc.size, <size_t>(_STRIPE - enc.size))
        memcpy(tail + _STRIPE - enc.size, enc.data, <size_t>enc.size)
        final = tail
    loopcore_xxh3_stripe(acc, final, key + _SECRET_LEN - _STRIPE - 7)
    h = total * _P64_1
    for i in range(4):
        h += loopcore_xxh3_mulfold(acc[2 * i] ^ loopcore_xxh3_le64(key + 11 + 16 * i),
                                   acc[2 * i + 1] ^ loopcore_xxh3_le64(key + 19 + 16 * i))
    return loopcore_xxh3_fmix(h)

# cython: language_level=3, freethreading_compatible=True
"""C-level API of the compiled fingerprint twin, for the other compiled modules."""

from cpython.object cimport PyObject
from libc.stdint cimport uint64_t


cdef struct Encoder:
    # Growable output buffer; starts in ``inline`` so typical values never malloc.
    # Once a long payload has been hashed in place (see ``stream``), it holds
    # only the bytes not hashed yet: read the encoding through enc_digest.
    unsigned char *data
    Py_ssize_t size
    Py_ssize_t capacity
    # Nesting level at which enc_value encodes: 0 from enc_init, one more
    # after each enc_list_header, so values appended as a list's items hit the
    # depth limit where the Python twin, encoding the whole tuple, does.
    int depth
    # 1 (from enc_init): a str or bytes payload of 1 MiB or more is hashed
    # from its own storage as it is written, never copied; 0 keeps every byte
    # in ``data`` (``encode()``, which returns them).
    int stream
    # Mappings and sets open whose entries are still to be sorted in ``data``:
    # nothing is hashed in place while one is.
    int sorting
    # XXH3 long-input state after ``hashed`` bytes (_fingerprint_stream.pxi).
    int stripes
    uint64_t hashed
    uint64_t acc[8]
    unsigned char last[64]
    # 508, not 512, and ``nonces`` last: the struct keeps the size and the
    # field offsets it had before ``nonces`` (688 bytes), so a module built
    # against the older declaration still allocates and passes it correctly.
    unsigned char inline[508]
    # 1: str values are nonce-normalised first (SPEC §8.5, outcome hashes),
    # except mapping keys, which are always written as they are; 0 from enc_init.
    int nonces


# The fields of an empty encoder (what enc_init sets), compiled into each module
# that cimports this one, so that a hash on a hot path starts without a call
# through the module's pointer table.
cdef inline void enc_reset(Encoder *enc) noexcept:
    enc.data = enc.inline
    enc.size = 0
    enc.capacity = sizeof(enc.inline)
    enc.depth = 0
    enc.stream = 1
    enc.sorting = 0
    enc.nonces = 0
    enc.stripes = 0
    enc.hashed = 0


cdef void enc_init(Encoder *enc) noexcept
cdef void enc_free(Encoder *enc) noexcept
# Raw bytes (a domain prefix, a tag) appended as they are.
cdef int enc_raw(Encoder *enc, const void *data, Py_ssize_t size) except -1
# ``l`` + u64 count: the header of a list of ``count`` encoded items that follow
# (they must be the last thing appended); raises ``depth`` by one.
cdef int enc_list_header(Encoder *enc, Py_ssize_t count) except -1
# The canonical encoding of ``value`` (SPEC §2); raises only MemoryError.
cdef int enc_value(Encoder *enc, object value) except -1
# enc_value of an exact str, without the walk.
cdef int enc_str(Encoder *enc, str text) except -1
# enc_value of a dict given as its ``n`` (key, value) pairs (``2 * n`` references
# the caller holds), when every key is an ASCII str and every value None, a bool
# or an exact str, int or float: 1, else 0 and nothing written.
cdef int enc_flat_dict(Encoder *enc, PyObject **items, Py_ssize_t n) except -1
# xxh3-64 of everything appended so far (whether hashed in place or buffered).
cdef uint64_t enc_digest(Encoder *enc) noexcept
# Could this str (exact or a subclass) hold a §8.5 wrapper, so that nonces mode
# may change its encoding? Long enough and holding the opening marker; True for
# an object that is not really a str (whatever its __class__ claims).
cdef bint str_wrapped(object text) except -1
# xxh3-64 of a str's canonical encoding (no domain), used to key names kept
# beside the hash rings; raises only MemoryError.
cdef uint64_t str_hash(str text) except? 0

# What does a record's flag byte hold, and how are the table and rows sized?
# (included by _ring_c.pyx)

cdef enum:
    SLOT_EMPTY = 0
    SLOT_DELETED = -1
    # Old-table slots moved to the new table per new scope while the table grows.
    MIGRATE_STEP = 8
    # Bytes of a retired table given back per new scope (a whole number of pages).
    RELEASE_BYTES = 1 << 16
    # Rows per chunk of bookkeeping (and of keys): a power of two.
    ROW_CHUNK_SHIFT = 8
    ROW_CHUNK = 1 << ROW_CHUNK_SHIFT
    ROW_CHUNK_MASK = ROW_CHUNK - 1
    # Bytes of a cache line: a row's bookkeeping is one.
    CACHE_LINE = 64
    # A record's flag byte: what its optional fields hold, and its outcome.
    HAS_RESULT = 1
    HAS_UNKNOWN = 2
    HAS_CALL_ID = 4
    # The call id is in ``long_ids``, not inline.
    LONG_ID = 8
    # The outcome kind's code (SPEC §8.0, ``_records.KIND_*``) in bits 4-5.
    KIND_SHIFT = 4
    KIND_BITS = 0x30
    VETO = 0x10
    TERMINAL = 0x20
    # The outcome itself proves nothing changed (SPEC §8.3's churn reads it).
    NO_PROGRESS = 0x40
    HAS_IDENTITY = 0x80
    # A record is complete once it has a result or an outcome kind (SPEC §8.0).
    COMPLETE = HAS_RESULT | KIND_BITS
    # Inline bytes of a call id: OpenAI's and Anthropic's ids fit.
    ID_BYTES = 32
    NO_NAME = 0xFFFFFFFF
    # Bytes of one record in a row's block: four 8-byte columns, two 4-byte, flags.
    RECORD_BYTES = 4 * 8 + 2 * 4 + 1
    # What a row scan returns when its churn walk needs the heap variant table.
    NEED_VARIANTS = 2

if KIND_VETO << KIND_SHIFT != VETO or KIND_TERMINAL_EXEC << KIND_SHIFT != TERMINAL:
    raise ImportError("loopcore._ring_c: the outcome kind codes of _records moved")

if sizeof(RowMeta) != CACHE_LINE:
    raise ImportError("loopcore._ring_c: a row's bookkeeping no longer fills one cache line")

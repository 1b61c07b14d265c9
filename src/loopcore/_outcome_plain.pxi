# Which common outcomes are hashed in C, and how? (the fast path of the outcome rules)
#
# Included by _outcome_c.pyx (the compiled outcome twin, whose outcome_of uses it)
# and by _percall_c.pyx (the per-call path): written once, compiled into both, so
# that the per-call path inlines it instead of calling across modules. Every other
# branch of the rules runs the reference functions of _outcome_py.
#
# plain_outcome answers True only for an ordinary result (kind none, not no
# progress) that it hashed in full. Its strings go through the encoder's nonces
# mode (SPEC §8.5), which finds a wrapper's marker in C and normalises only the
# rare str that holds one. The one thing it hands back (False) because of nonces
# is a content entry whose text may hold a wrapper: entries are normalised one by
# one before they are joined (§12.10), which the reference does.

from cpython.object cimport PyObject
from cpython.unicode cimport Py_UNICODE_ISSPACE, PyUnicode_GET_LENGTH, PyUnicode_READ_CHAR
from libc.stdint cimport uint64_t
from libc.string cimport memcpy

from ._fingerprint_c cimport (
    Encoder,
    enc_digest,
    enc_flat_dict,
    enc_free,
    enc_init,
    enc_list_header,
    enc_raw,
    enc_reset,
    enc_str,
    enc_value,
    str_wrapped,
)

import sys

from ._outcome_py import CALL_DOMAIN as _CALL_DOMAIN
from ._outcome_py import RESULT_DOMAIN as _RESULT_DOMAIN
from ._outcome_py import UNSET as _UNSET
from ._outcome_py import hash_call as _py_hash_call
from ._nonce import MIN_WRAPPED as _MIN_WRAPPED

cdef bytes C_CALL_DOMAIN = _CALL_DOMAIN
# The "no value given" marker, held in C: each test is one pointer compare, not
# a module-global look-up.
cdef object C_UNSET = _UNSET
cdef bytes C_RESULT_DOMAIN = _RESULT_DOMAIN
cdef str RESULT_TAG = "result"
cdef str STATUS_KEY = sys.intern("status")
# The keys a result is read by, interned (as the C look-up wants them).
cdef str CONTENT_KEY = sys.intern("content")
cdef str DETAILS_KEY = sys.intern("details")
cdef str TYPE_KEY = sys.intern("type")
cdef str TEXT_KEY = sys.intern("text")
cdef dict EMPTY_DETAILS = {}
# A key absent from a result dict (UNSET itself could be a value there).
cdef object MISSING = object()


cdef extern from "_fingerprint_flat.h":
    # The one-pass flat dict writer and the wrapper test, compiled in here as
    # well: the common result's details and text need no call into the
    # fingerprint module (whose C API covers every other case).
    Py_ssize_t flat_dict "lc_flat_dict" (
        PyObject **items, Py_ssize_t n, Py_ssize_t min_wrapped, unsigned char *out,
        Py_ssize_t room
    ) noexcept
    bint has_wrap_start "lc_has_wrap_start" (PyObject *s) noexcept
    # A covered scalar's bytes (a compact ASCII str's: its tag, length, text),
    # 0 when not covered, -1 when more than ``avail``.
    Py_ssize_t flat_value "lc_flat_value_write" (
        PyObject *v, Py_ssize_t min_wrapped, unsigned char *out, Py_ssize_t avail
    ) noexcept


cdef extern from "_xxh3.h":
    uint64_t loopcore_xxh3_64(const void *data, size_t len) noexcept nogil


cdef inline uint64_t enc_hash(Encoder *enc) noexcept:
    """``enc_digest`` without a call into the fingerprint module when no
    payload was hashed in place (the encoding is all in ``enc.data``)."""
    if enc.hashed == 0:
        return loopcore_xxh3_64(enc.data, <size_t>enc.size)
    return enc_digest(enc)


cdef inline void enc_release(Encoder *enc) noexcept:
    """``enc_free`` when the encoder left its inline buffer (else nothing to free)."""
    if enc.data != enc.inline:
        enc_free(enc)


# The shortest str that can hold a wrapper (SPEC §8.5).
cdef Py_ssize_t MIN_WRAPPED = _MIN_WRAPPED


cdef extern from "_dict_entries.h":
    Py_ssize_t dict_entries "lc_dict_entries" (PyObject *d, PyObject **out, Py_ssize_t cap) noexcept
    int dict_find_str "lc_dict_find_str" (PyObject *d, PyObject *key, PyObject **found) noexcept
    int dict_entries_verify "lc_dict_entries_verify" () except -1


dict_entries_verify()


cdef inline object field(dict d, str key, object default):
    """``d.get(key, default)`` for an interned ASCII ``key``, from the entry table
    where it can be read (no hash look-up, no Python code)."""
    cdef PyObject *found
    cdef int where = dict_find_str(<PyObject *>d, <PyObject *>key, &found)
    if where == 1:
        return <object>found
    if where == 0:
        return default
    return d.get(key, default)


cdef extern from "_outcome_common.h":
    const bint DICT_VERSIONS "LOOPCORE_DICT_VERSIONS"
    uint64_t dict_version "loopcore_dict_version" (PyObject *d) noexcept
    Py_ssize_t details_items "lc_details_items" (
        PyObject *d, PyObject **out, Py_ssize_t cap, PyObject *status_key, Py_ssize_t *status
    ) noexcept
    enum:
        LC_KEY_CONTENT
        LC_KEY_DETAILS
        LC_KEY_TYPE
        LC_KEY_TEXT
        LC_KEY_STATUS
        LC_KEYS
    bint common_result "lc_common_result" (
        PyObject *result, PyObject **keys, PyObject **details, PyObject **items,
        Py_ssize_t cap, Py_ssize_t *n_items, PyObject **text
    ) noexcept


cdef PyObject *COMMON_KEYS[LC_KEYS]
COMMON_KEYS[LC_KEY_CONTENT] = <PyObject *>CONTENT_KEY
COMMON_KEYS[LC_KEY_DETAILS] = <PyObject *>DETAILS_KEY
COMMON_KEYS[LC_KEY_TYPE] = <PyObject *>TYPE_KEY
COMMON_KEYS[LC_KEY_TEXT] = <PyObject *>TEXT_KEY
COMMON_KEYS[LC_KEY_STATUS] = <PyObject *>STATUS_KEY


cdef extern from "Python.h":
    # The reference counts of borrowed pointers, taken as they are: through
    # ``<object>`` casts Cython would add a reference of its own around each.
    void ref_take "Py_INCREF" (PyObject *value) noexcept
    void ref_drop "Py_DECREF" (PyObject *value) noexcept


cdef enum:
    # Entries of a details dict walked once for both its status and its bytes.
    DETAILS_HELD = 16


cdef inline bint exec_titled(object args):
    """Exec args the reference must reduce first (SPEC §8.4: ``title`` is ignored)."""
    if type(args) is not dict:
        return True  # rare: the reference decides what a non-dict mapping holds
    try:
        return "title" in <dict>args
    except Exception:
        return True  # a key whose __eq__ raises: the reference reads it safely


cdef inline uint64_t call_hash(object tool_name, object args) except? 0:
    # The bytes of fingerprint((tool_name, args), CALL_DOMAIN), without the tuple.
    if tool_name == "update_plan" or (tool_name == "exec" and exec_titled(args)):
        return _py_hash_call(tool_name, args)
    cdef Encoder enc
    enc_init(&enc)
    try:
        enc_raw(&enc, <char*>C_CALL_DOMAIN, len(C_CALL_DOMAIN))
        enc_list_header(&enc, 2)
        enc_value(&enc, tool_name)
        enc_value(&enc, args)
        return enc_hash(&enc)
    finally:
        enc_release(&enc)


cdef inline bint is_plain_leaf(object value):
    """Values that are certainly not mappings (a result that is hashed whole)."""
    cdef type kind = type(value)
    return (
        value is None
        or kind is str
        or kind is int
        or kind is float
        or kind is bool
        or kind is list
        or kind is tuple
        or kind is bytes
    )


cdef object content_text(object content):
    """``_outcome_py._content_text`` for plain lists of plain dicts; None means "ask Python"."""
    if type(content) is dict or (
        is_plain_leaf(content) and type(content) is not list and type(content) is not tuple
    ):
        return ""
    if type(content) is not list and type(content) is not tuple:
        return None
    # One text entry is the common case: keep it without building a list.
    first = None
    texts = None
    for entry in content:
        if type(entry) is dict:
            kind = field(<dict>entry, TYPE_KEY, None)
            text = field(<dict>entry, TEXT_KEY, None)
            if isinstance(kind, str) and isinstance(text, str):
                if str_wrapped(text):
                    return None  # normalised entry by entry: the reference's job
                if first is None:
                    first = text
                elif texts is None:
                    texts = [first, text]
                else:
                    texts.append(text)
        elif not is_plain_leaf(entry):
            return None
    if first is None:
        return ""
    # str.join gives an exact str, as the Python rule's join does: a str
    # subclass's own strip() must not run.
    joined = first if texts is None and type(first) is str else "\n".join(texts or [first])
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(joined)
    if n and (
        Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(joined, 0))
        or Py_UNICODE_ISSPACE(PyUnicode_READ_CHAR(joined, n - 1))
    ):
        return joined.strip()
    return joined


cdef uint64_t hash_whole(object value) except? 0:
    cdef Encoder enc
    enc_init(&enc)
    enc.nonces = 1
    try:
        enc_raw(&enc, <char*>C_RESULT_DOMAIN, len(C_RESULT_DOMAIN))
        enc_value(&enc, value)
        return enc_hash(&enc)
    finally:
        enc_release(&enc)


cdef bytes generic_prefix():
    """The bytes every generic hash starts with: the domain, the list header, the tag."""
    cdef Encoder enc
    enc_init(&enc)
    enc.nonces = 1
    try:
        enc_raw(&enc, <char*>C_RESULT_DOMAIN, len(C_RESULT_DOMAIN))
        enc_list_header(&enc, 3)
        enc_value(&enc, RESULT_TAG)
        return enc.data[:enc.size]
    finally:
        enc_free(&enc)


cdef bytes GENERIC_PREFIX = generic_prefix()


cdef bytes call_prefix():
    """The bytes every call hash starts with: the domain and the header of (name, args)."""
    cdef Encoder enc
    enc_init(&enc)
    try:
        enc_raw(&enc, <char*>C_CALL_DOMAIN, len(C_CALL_DOMAIN))
        enc_list_header(&enc, 2)
        return enc.data[:enc.size]
    finally:
        enc_free(&enc)


cdef bytes CALL_PREFIX = call_prefix()

# Prefixes are copied into a fresh encoder's inline buffer without a room check.
if len(GENERIC_PREFIX) > 256 or len(CALL_PREFIX) > 256:
    raise ImportError("loopcore: a hash prefix is longer than the encoder's inline buffer")


# Their bytes and sizes, as the inline copy reads them.
cdef const char *GENERIC_PREFIX_DATA = GENERIC_PREFIX
cdef Py_ssize_t GENERIC_PREFIX_SIZE = len(GENERIC_PREFIX)
cdef const char *CALL_PREFIX_DATA = CALL_PREFIX
cdef Py_ssize_t CALL_PREFIX_SIZE = len(CALL_PREFIX)


cdef inline void enc_start(Encoder *enc, const char *prefix, Py_ssize_t size) noexcept:
    """An empty encoder (``enc_reset``, inline: not a call through the fingerprint
    module's pointer table per hash), then a prefix (a list header's bytes among
    them: its items follow one level deeper, as after ``enc_list_header``), copied
    in place. ``depth`` and ``size`` are the prefix's.
    """
    enc_reset(enc)
    memcpy(enc.data, prefix, <size_t>size)
    enc.size = size
    enc.depth = 1


cdef uint64_t hash_generic(
    object details, object text, PyObject **items, Py_ssize_t n_items, uint64_t version
) except? 0:
    """The generic rule of SPEC §2: the hash of ("result", details, text).

    ``items``: the ``n_items`` entries of ``details`` as ``details_items`` took
    them at the dict's ``version`` (``n_items`` -1: none taken).
    """
    cdef Encoder enc
    cdef bint written = False
    cdef Py_ssize_t i, wrote
    enc_start(&enc, GENERIC_PREFIX_DATA, GENERIC_PREFIX_SIZE)
    enc.nonces = 1
    try:
        if n_items >= 0 and DICT_VERSIONS and dict_version(<PyObject *>details) == version:
            # Unchanged since the status check: written from the entries it took
            # (no second walk). The one-pass writer runs no Python code; what it
            # declines goes to the C API, the entries held meanwhile (a nonce's
            # normaliser may run).
            wrote = flat_dict(
                items, n_items, MIN_WRAPPED, enc.data + enc.size, enc.capacity - enc.size
            )
            if wrote > 0:
                enc.size += wrote
                written = True
            else:
                for i in range(2 * n_items):
                    ref_take(items[i])
                try:
                    written = enc_flat_dict(&enc, items, n_items)
                finally:
                    for i in range(2 * n_items):
                        ref_drop(items[i])
        if not written:
            enc_value(&enc, details)
        # No entry held a wrapper marker, and a join cannot make one: the text
        # is written as it is (in place when it is covered and fits).
        enc.nonces = 0
        wrote = flat_value(<PyObject *>text, -1, enc.data + enc.size, enc.capacity - enc.size)
        if wrote > 0:
            enc.size += wrote
        else:
            enc_str(&enc, <str>text)
        return enc_hash(&enc)
    finally:
        enc_release(&enc)


cdef extern from *:
    """
    /* After a call that failed: 0 (cleared) for an Exception, -1 (kept) for
       anything else (KeyboardInterrupt, SystemExit), as ``except Exception``. */
    static int lc_clear_exception(void) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return -1;
        PyErr_Clear();
        return 0;
    }
    """
    int clear_exception "lc_clear_exception" () noexcept

# plain_outcome_of as C sees it: -1 with an exception set when it failed. Called
# through this type, the failure is the caller's to handle, without the cost of
# a try statement (which saves and restores the handled exception) per outcome.
ctypedef int (*plain_entry)(object, object, uint64_t *) noexcept


cdef inline bint plain_outcome(object result, object error, uint64_t *out) except -1:
    cdef int found = (<plain_entry>plain_outcome_of)(result, error, out)
    if found == -1:
        # A key that collides with "content" and raises on ==, say: the reference
        # rules read the result safely and decide what it is.
        return clear_exception()
    return found


cdef bint plain_outcome_of(object result, object error, uint64_t *out) except -1:
    if error is not C_UNSET and error is not None:
        return False
    if result is C_UNSET:
        return False
    if type(result) is not dict:
        if is_plain_leaf(result):
            out[0] = hash_whole(result)
            return True
        return False
    # Most details dicts are walked once: for "status", then for the hash.
    cdef PyObject *items[2 * DETAILS_HELD]
    cdef Py_ssize_t n_items = -1, at_status
    cdef uint64_t version = 0
    # The common result first, read in C; the general path for every other.
    cdef PyObject *common_details
    cdef PyObject *common_text
    if common_result(
        <PyObject *>result, COMMON_KEYS, &common_details, items, DETAILS_HELD, &n_items,
        &common_text,
    ):
        text = <object>common_text
        # str_wrapped of an exact, ready str; a wrapper: the general path, which
        # hands it back.
        if PyUnicode_GET_LENGTH(text) < MIN_WRAPPED or not has_wrap_start(common_text):
            details = EMPTY_DETAILS if common_details == NULL else <object>common_details
            out[0] = hash_generic(
                details, text, items, n_items, dict_version(<PyObject *>details)
            )
            return True
        n_items = -1
    content = field(<dict>result, CONTENT_KEY, MISSING)
    details = field(<dict>result, DETAILS_KEY, MISSING)
    if content is MISSING and details is MISSING:
        out[0] = hash_whole(result)
        return True
    if type(details) is dict:
        n_items = details_items(
            <PyObject *>details, items, DETAILS_HELD, <PyObject *>STATUS_KEY, &at_status
        )
        if n_items >= 0:
            version = dict_version(<PyObject *>details)
            status = None if at_status < 0 else <object>items[2 * at_status + 1]
        else:
            status = (<dict>details).get("status")
        if status is not None and (type(status) is not str or status == "blocked"):
            return False
    elif details is MISSING or is_plain_leaf(details):
        details = EMPTY_DETAILS
    else:
        return False
    text = content_text(None if content is MISSING else content)
    if text is None:
        return False
    out[0] = hash_generic(details, text, items, n_items, version)
    return True

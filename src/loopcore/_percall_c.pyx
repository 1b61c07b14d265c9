# cython: language_level=3, freethreading_compatible=True
"""What runs on every tool call, before the rules are consulted? (the per-call path, compiled twin)

The same bases as ``_percall_py`` — ``DetectorCalls`` and ``GuardCalls``, the
native base classes of ``LoopDetector`` and ``ToolLoopGuard`` — with the common
path in C: the scope key, the call hash (remembered for a flat args dict seen
again, as ``after_call`` sees ``before_call``'s), the outcome hash of common
results, and one store step through the compiled ring's C API. A scan the store
calls quiet never creates a Python object; anything else goes to the policy
methods the subclass defines (``_verdict``, ``_decide``, ``_observe``).
"""

cimport cython
from cpython.contextvars cimport get_value
from cpython.dict cimport PyDict_Next, PyDict_Size
from cpython.exc cimport PyErr_Occurred
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.unicode cimport PyUnicode_CheckExact
from libc.stdint cimport int64_t, uint8_t, uint64_t

from ._ring_c cimport RingStore, Scan, loopcore_lock
from ._fingerprint_c cimport (
    Encoder,
    enc_digest,
    enc_flat_dict,
    enc_free,
    enc_init,
    enc_list_header,
    enc_raw,
    enc_str,
)

from ._outcome_c import UNSET, SPECIAL_OUTCOME_TOOLS, check_call_id, check_tool_name, is_known_poll
# The rules behind the C fast path (tried first, in ``plain``): the reference twin.
from ._outcome_c import outcome_of as _outcome_of
from ._percall_py import UNSCOPED
from ._records import KIND_VALIDATION, KIND_VETO, NOT_STUCK
from ._scopes import SessionRef
from ._scopes import scope_key as _py_scope_key

__all__ = ["IMPLEMENTATION", "UNSCOPED", "DetectorCalls", "GuardCalls"]

IMPLEMENTATION = "cython"

cdef extern from "_lock.h":
    void acquire "loopcore_lock_acquire" (loopcore_lock *lock)
    void release "loopcore_lock_release" (loopcore_lock *lock)

cdef extern from *:
    """
    #ifdef Py_GIL_DISABLED
    #define LOOPCORE_GIL_DISABLED 1
    #else
    #define LOOPCORE_GIL_DISABLED 0
    #endif
    /* Values whose identity fixes their encoding: nothing can change them. */
    static inline int loopcore_same_key(PyObject *last, PyObject *session, PyObject *run_id) {
        return last != Py_None && PyTuple_GET_ITEM(last, 0) == session
            && PyTuple_GET_ITEM(last, 1) == run_id;
    }
    static int loopcore_is_immutable_scalar(PyObject *v) {
        return v == Py_None || PyUnicode_CheckExact(v) || PyLong_CheckExact(v)
            || PyFloat_CheckExact(v) || PyBool_Check(v);
    }
    """
    # With the GIL, a section that runs no Python code needs no lock of its own.
    const bint GIL_DISABLED "LOOPCORE_GIL_DISABLED"
    # Is ``last`` (None, or a key tuple: nothing else is ever stored) the key
    # of these very objects?
    bint same_key "loopcore_same_key" (PyObject *last, PyObject *session, PyObject *run_id) noexcept
    bint is_immutable_scalar "loopcore_is_immutable_scalar" (PyObject *value) noexcept

cdef enum:
    # Entries of a flat args dict whose hash is remembered for the next call.
    MEMO_ENTRIES = 8
    # The references a memo holds at most: its entries', the dict's and the name's.
    MEMO_REFS = 2 * MEMO_ENTRIES + 2
    # Verdicts are pure functions of a scan; this many distinct ones are remembered.
    VERDICT_CACHE_SIZE = 4096

cdef frozenset SPECIAL = SPECIAL_OUTCOME_TOOLS
# Answers and types the common path returns or compares, held in C (no
# module-global look-up per call).
cdef object C_NOT_STUCK = NOT_STUCK
cdef type SESSION_REF = SessionRef
# The "active scope" default, held in C so that each call compares two pointers.
cdef object ACTIVE = UNSCOPED
# What an alarmed scan's verdict answers when a name it refers to moved
# meanwhile (another thread): the scan is made again.
cdef object RESCAN = object()

# The outcome twin's C fast path, compiled in here so that it inlines.
include "_outcome_plain.pxi"


include "_percall_memo.pxi"


include "_percall_keys.pxi"


cdef class _Calls:
    """What both per-call bases hold: the store, the switch and the outcome settings."""

    cdef readonly object _store
    # The compiled ring when it is the store (its C API), else None.
    cdef RingStore ring
    cdef readonly bint _enabled
    cdef readonly int64_t _alarm
    cdef readonly int64_t _unknown_alarm
    cdef readonly object _normalizers
    cdef readonly frozenset _send_tools
    # Tools whose outcomes need the Python rules: special, send or normalised.
    cdef frozenset exclusions
    # The last tool name found to have no special outcome rule.
    cdef object plain_tool
    # The last flat args dict hashed, with owned references to its keys and
    # values: a gateway hashes the same args for the check, the record and the
    # outcome, and identical immutable entries mean identical bytes.
    cdef Memo memo
    # The last scope key made, reused while the caller passes the same objects
    # (GIL builds only: replacing it must not race).
    cdef object last_key
    cdef loopcore_lock lock
    # What the policy's ``_verdict`` answered, by a digest of the scan (the
    # ring's name indices included, so kept for one name generation only).
    cdef dict verdicts
    cdef uint64_t generation

    def _bind_calls(self, store, enabled, alarm, unknown_alarm, normalizers, send_tools):
        self._store = store
        self.ring = store if type(store) is RingStore else None
        self._enabled = enabled
        self._alarm = alarm
        self._unknown_alarm = unknown_alarm
        self._normalizers = normalizers
        self._send_tools = frozenset(send_tools)
        self.exclusions = SPECIAL | self._send_tools | frozenset(normalizers or ())
        self.last_key = (None, None)
        self.verdicts = {}

    def __dealloc__(self):
        memo_release(&self.memo)

    @cython.final
    cdef inline uint64_t args_hash(self, object tool_name, object args) except? 0:
        # The memo's answer inline at each caller (two calls in three hit it);
        # the hash and the memo's renewal out of line, with their larger frame.
        if not GIL_DISABLED and memo_matches(&self.memo, tool_name, args):
            return self.memo.hash
        return self.args_hash_new(tool_name, args)

    @cython.final
    cdef uint64_t args_hash_new(self, object tool_name, object args) except? 0:
        cdef Memo fresh
        cdef PyObject *held[MEMO_REFS]
        cdef uint64_t found
        if GIL_DISABLED:
            acquire(&self.lock)
            try:
                if memo_matches(&self.memo, tool_name, args):
                    return self.memo.hash
            finally:
                release(&self.lock)
        # The entries are taken before hashing and must still be there after:
        # whatever ran meanwhile (a value's repr, another thread), the hash
        # is only remembered for the contents it was computed from.
        if not (type(args) is dict and memo_take(&fresh, tool_name, <dict>args)):
            return call_hash(tool_name, args)
        # Called through views that leave a failure to this code (no try
        # statement, which saves and restores the handled exception, per hash).
        cdef int done = (<memo_hash_view>memo_call_hash)(&fresh, tool_name, &found)
        if done == 0:
            found = (<call_hash_view>call_hash)(tool_name, args)
            if found == 0 and PyErr_Occurred() != NULL:
                done = -1
        if done == -1:
            return release_failed(&fresh)
        if not memo_matches(&fresh, tool_name, args):
            memo_release(&fresh)
            return found
        fresh.hash = found
        if GIL_DISABLED:
            acquire(&self.lock)
        cdef Py_ssize_t n_held = memo_put(&self.memo, &fresh, held)
        if GIL_DISABLED:
            release(&self.lock)
        # Released last: a finaliser it runs sees the new memo, never a half one.
        refs_drop(held, n_held)
        return found

    @cython.final
    cdef inline object key_of(self, object session, object run_id):
        # The last key inline at each caller (a caller's calls repeat their
        # scope); a new one out of line, with its larger frame.
        if not GIL_DISABLED and same_key(<PyObject*>self.last_key, <PyObject*>session,
                                         <PyObject*>run_id):
            return self.last_key
        return self.key_new(session, run_id)

    @cython.final
    cdef object key_new(self, object session, object run_id):
        key = make_key(session, run_id)
        # Only keys whose release runs no Python code (no session finaliser).
        if not GIL_DISABLED and (<tuple>key)[0] is session and (<tuple>key)[1] is run_id and (
            session is None or type(session) is str or type(session) is int
        ):
            self.last_key = key
        return key

    @cython.final
    cdef object attach(self, object tool_name, object args, object result, object error,
                       object tool_call_id, object key, bint vetoes=True, bint validation=False,
                       bint want_record=True):
        """Record an outcome; a loop veto only when ``vetoes`` (the guard has its own).

        The record is returned only when ``want_record``: building it is most of
        the cost of a cheap outcome, and ``after_call`` rarely needs it.
        """
        valid_tool(tool_name)
        cdef uint64_t args_hash = self.args_hash(tool_name, args)
        valid_call_id(tool_call_id)
        cdef uint64_t result_hash = 0, identity = 0
        cdef bint has_result = True, has_identity = False, no_progress = False
        cdef int kind = 0
        unknown = None
        if not self.plain(tool_name, result, error, &result_hash):
            found = _outcome_of(
                tool_name,
                args,
                result=result,
                error=error,
                normalizers=self._normalizers,
                send_tools=self._send_tools,
            )
            kind = found[2]
            if kind == KIND_VETO:
                if not vetoes:
                    return None
                has_result = False
            elif found[0] is None:
                return None
            else:
                result_hash = found[0]
            unknown = found[1]
            if found[3] is not None:
                identity = found[3]
                has_identity = True
            no_progress = found[4]
        if validation and kind != KIND_VETO:
            kind = KIND_VALIDATION
        if self.ring is not None:
            return self.ring.attach_c(
                key, tool_name, args_hash, tool_call_id, result_hash, has_result, unknown, kind,
                identity, has_identity, no_progress, want_record,
            )
        return self._store.attach(
            key, tool_name, args_hash, tool_call_id, result_hash if has_result else None,
            unknown, kind, identity if has_identity else None, no_progress,
        )

    @cython.final
    cdef inline bint plain(self, object tool_name, object result, object error,
                           uint64_t *out) except -1:
        if GIL_DISABLED or tool_name is not self.plain_tool:
            if tool_name in self.exclusions:
                return False
            if not GIL_DISABLED and type(tool_name) is str:
                self.plain_tool = tool_name
        return plain_outcome(result, error, out)

    @cython.final
    cdef inline object verdict_of(self, object key, int64_t key_hash, object tool_name,
                                  object args, uint64_t args_hash, bint append,
                                  object tool_call_id):
        """None for a quiet scan (appended when ``append``), else the policy's verdict.

        ``key_hash`` is what ``warm`` returned (unused without the compiled ring).
        The quiet scan of the compiled ring is answered inline at each caller;
        everything else is out of line, with its larger frame.
        """
        cdef Scan scan
        if self.ring is None:
            return store_verdict(self, key, tool_name, args, args_hash, append, tool_call_id)
        while True:
            if not self.ring.scan_raw(
                key, key_hash, tool_name, args_hash, self._alarm, self._unknown_alarm, append,
                tool_call_id, &scan,
            ):
                return None
            verdict = alarmed_verdict(self, &scan, tool_name, args, args_hash)
            if verdict is not RESCAN:
                return verdict

    @cython.final
    cdef inline int append(self, object key, object tool_name, uint64_t args_hash,
                           object tool_call_id) except -1:
        if self.ring is not None:
            return self.ring.append_c(key, tool_name, args_hash, tool_call_id, 0)
        self._store.append(key, tool_name, args_hash, tool_call_id)
        return 0

    @cython.final
    cdef int64_t warm(self, object key) except? -1:
        """Start fetching the scope's row; its key's hash, for the scan (0 without a ring)."""
        if self.ring is not None:
            # The key whose row the ring found last (what ``warm`` itself
            # answers first): its row is cached, and its hash kept.
            if not GIL_DISABLED and key is self.ring.found_key:
                return self.ring.found_hash
            return self.ring.warm(key)
        return 0


include "_percall_views.pxi"


include "_percall_verdicts.pxi"


cdef class DetectorCalls(_Calls):
    """``LoopDetector``'s per-call methods."""

    def check(self, tool_name, args, *, session=None, run_id=None):
        """The verdict for a call about to run, against its scope's history."""
        key = self.key_of(session, run_id)
        valid_tool(tool_name)
        if not self._enabled:
            return C_NOT_STUCK
        cdef int64_t key_hash = self.warm(key)
        cdef uint64_t args_hash = self.args_hash(tool_name, args)
        verdict = self.verdict_of(key, key_hash, tool_name, args, args_hash, False, None)
        return C_NOT_STUCK if verdict is None else verdict

    def record_call(self, tool_name, args, tool_call_id=None, *, session=None, run_id=None):
        """Append a call (without outcome) to its scope's history."""
        key = self.key_of(session, run_id)
        valid_tool(tool_name)
        cdef uint64_t args_hash = self.args_hash(tool_name, args)
        valid_call_id(tool_call_id)
        self.append(key, tool_name, args_hash, tool_call_id)

    def record_outcome(
        self,
        tool_name,
        args,
        *,
        result=UNSET,
        error=UNSET,
        tool_call_id=None,
        session=None,
        run_id=None,
        validation_failure=False,
    ):
        """Attach an outcome to the newest pending matching call, or append one."""
        return self.attach(
            tool_name, args, result, error, tool_call_id, self.key_of(session, run_id),
            True, validation_failure is True,
        )


cdef class GuardCalls(_Calls):
    """``ToolLoopGuard``'s two calls around a tool execution."""

    cdef readonly dict _armed
    cdef readonly dict _churning
    cdef readonly dict _noted
    cdef readonly object _allowed
    cdef readonly object _scope_var
    # Set once the guard's scope() is first entered: until then the active scope
    # is the unscoped one, and a call that leaves its scope out skips the lookup.
    cdef public bint _scope_used
    # Every call checked (the batch admission adds its own): ``stats().calls``.
    cdef public Py_ssize_t _calls

    def _bind_guard(self, dict armed, dict churning, dict noted, allowed, scope_var):
        self._armed = armed
        self._churning = churning
        self._noted = noted
        self._allowed = allowed
        self._scope_var = scope_var
        self._scope_used = False
        self._calls = 0

    def _active_key(self, session, run_id):
        """SPEC §9.2: a keyword left out is the active ``scope()``'s."""
        return self.active_key(session, run_id)

    @cython.final
    cdef inline object call_key(self, object session, object run_id):
        """The scope key of a call; the last one when the caller passes the same objects.

        The common gateway call leaves ``session`` out and no ``scope()`` was
        ever entered: then the key is the last one made for this ``run_id``.
        """
        cdef tuple last
        if not GIL_DISABLED and not self._scope_used:
            last = <tuple>self.last_key
            if (last[1] is run_id and last[0] is None and session is ACTIVE) or (
                session is last[0] and run_id is last[1]
            ):
                return last
        if session is ACTIVE or run_id is ACTIVE:
            return self.active_key(session, run_id)
        return self.key_of(session, run_id)

    @cython.final
    cdef object active_key(self, object session, object run_id):
        if not self._scope_used:
            return self.key_of(
                None if session is ACTIVE else session, None if run_id is ACTIVE else run_id
            )
        active = <tuple>get_value(self._scope_var)
        if session is ACTIVE:
            session = active[0]
            if type(session) is SESSION_REF:  # as the tables hold a host object
                session = (<object>session).value
        if run_id is ACTIVE:
            run_id = active[1]
        return self.key_of(session, run_id)

    def before_call(
        self, tool_name, args, *, tool_call_id=None, session=UNSCOPED, run_id=UNSCOPED
    ):
        """Check a call about to run; record it (a blocked one as a loop veto)."""
        key = self.call_key(session, run_id)
        valid_tool(tool_name)
        valid_call_id(tool_call_id)
        cdef int64_t key_hash = self.warm(key)
        cdef uint64_t args_hash = self.args_hash(tool_name, args)
        self._calls += 1
        if not self._enabled:
            self.append(key, tool_name, args_hash, tool_call_id)
            return self._allowed
        # Through a view that leaves a failure here: the try statement (which
        # saves and restores the handled exception) runs only when one came.
        cdef PyObject *found = (<verdict_view>scan_verdict)(
            self, key, key_hash, tool_name, args, args_hash, tool_call_id
        )
        if found == NULL:
            try:
                raise_pending()
            except Exception as exc:  # SPEC §8.2: a check that fails blocks
                return self._fail_closed(exc, tool_name, args_hash, key, tool_call_id)
        verdict = <object>found
        ref_drop(found)  # the view's reference: ``verdict`` holds its own
        if verdict is None or not verdict.stuck:
            if verdict is not None:  # quiet scans appended the call already
                self.append(key, tool_name, args_hash, tool_call_id)
            if self._churning and key in self._churning:
                self._settle(key)
            return self._allowed
        return self._decide(verdict, tool_name, args_hash, key, tool_call_id)

    def after_call(
        self,
        tool_name,
        args,
        *,
        result=UNSET,
        error=UNSET,
        tool_call_id=None,
        session=UNSCOPED,
        run_id=UNSCOPED,
    ):
        """Record a call's outcome; the result the model should see (with a warning's note).

        Raises CompactionLoopPersisted when the post-compaction guard trips.
        """
        key = self.call_key(session, run_id)
        cdef bint wanted = bool(self._armed) or bool(self._noted)
        record = self.attach(
            tool_name, args, result, error, tool_call_id, key, False, False, wanted
        )
        if self._armed:
            self._observe(record, tool_name, args, key)
        if self._noted and key in self._noted:
            return self._annotated(record, key, result)
        return None if result is C_UNSET else result

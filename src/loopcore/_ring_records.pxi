# What completes a record, and how does the store build a CallRecord without running
# its __init__, and a row's records for history() and window()? (included by _ring_c.pyx)
#
# The record an outcome returns is most often dropped at once (``record_outcome``
# called for its side effect): the last one built is kept as a spare and, when
# nothing else holds it any more, refilled in place for the next outcome instead
# of freeing one record and allocating another.


cdef struct Outcome:
    # What completes a record: ``flags`` holds HAS_RESULT, the kind bits,
    # NO_PROGRESS and HAS_IDENTITY; the hashes are read only when flagged.
    uint64_t result
    uint64_t identity
    uint8_t flags


# A call without outcome (zero-initialised, as every C static).
cdef Outcome NO_OUTCOME


cdef int valid_kind(int kind) except -1:
    if kind < 0 or kind > 3:
        raise ValueError(f"kind: expected an outcome kind code 0-3, got {kind}")
    return 0


cdef inline Outcome outcome_of(
    uint64_t result_hash, bint has_result, int kind, uint64_t identity, bint has_identity,
    bint no_progress,
) noexcept:
    cdef Outcome outcome
    outcome.result = result_hash if has_result else 0
    outcome.identity = identity if has_identity else 0
    outcome.flags = <uint8_t>(kind << KIND_SHIFT)
    if has_result:
        outcome.flags |= HAS_RESULT
    if has_identity:
        outcome.flags |= HAS_IDENTITY
    if no_progress:
        outcome.flags |= NO_PROGRESS
    return outcome


cdef extern from *:
    """
    /* CallRecord is a frozen slots dataclass: its fields are object slots at
       fixed offsets, which its own __init__ fills through object.__setattr__.
       The record builder fills them directly (new references, empty slots). */
    #include "structmember.h"
    static Py_ssize_t loopcore_member_offset(PyObject *descr) {
        if (Py_TYPE(descr) != &PyMemberDescr_Type) return -1;
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        return member->type == T_OBJECT_EX ? member->flags == 0 ? member->offset : -1 : -1;
    }
    static PyObject *loopcore_new_instance(PyTypeObject *type) {
        return type->tp_alloc(type, 0);
    }
    static void loopcore_fill_slot(PyObject *obj, Py_ssize_t offset, PyObject *value) {
        Py_INCREF(value);
        *(PyObject **)((char *)obj + offset) = value;
    }
    /* Does a filled slot hold an exact int equal to ``value`` (a hash kept)?
       Before 3.12 the digits are read in place (PyLong_AsUnsignedLongLong
       goes through a byte array there, a few hundred instructions). */
    static int loopcore_slot_is_u64(PyObject *obj, Py_ssize_t offset, uint64_t value) {
        PyObject *held = *(PyObject **)((char *)obj + offset);
        if (!PyLong_CheckExact(held))
            return 0;
    #if PY_VERSION_HEX < 0x030C0000
        {
            Py_ssize_t size = Py_SIZE(held), i;
            const digit *d = ((PyLongObject *)held)->ob_digit;
            uint64_t rest = value;
            if (size < 0 || size > 3)
                return 0;
            for (i = 0; i < size; i++) {
                if ((uint64_t)d[i] != (rest & PyLong_MASK))
                    return 0;
                rest >>= PyLong_SHIFT;
            }
            return rest == 0;
        }
    #else
        {
            unsigned long long v = PyLong_AsUnsignedLongLong(held);
            if (v == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear(); /* negative or wider than 64 bits: not this hash */
                return 0;
            }
            return v == (unsigned long long)value;
        }
    #endif
    }
    /* A hash slot rewritten in place (1) when its int is held by the record
       alone and the new value takes as many digits: no one else can see the
       value change, and no int is freed and another allocated per outcome.
       Before 3.12 only (the digits are read in place there, as above). */
    static int loopcore_reset_u64(PyObject *obj, Py_ssize_t offset, uint64_t value) {
    #if PY_VERSION_HEX < 0x030C0000
        PyObject *held = *(PyObject **)((char *)obj + offset);
        Py_ssize_t size, need = 0, i;
        uint64_t rest = value;
        digit *d;
        if (!PyLong_CheckExact(held) || Py_REFCNT(held) != 1)
            return 0;
        size = Py_SIZE(held);
        d = ((PyLongObject *)held)->ob_digit;
        /* A negative or differently sized int: a new one. So is a one-digit
           value, which may be one of the shared small ints. */
    #if PyLong_SHIFT == 30
        /* 30-bit digits (64-bit builds): a hash takes two or three, counted
           and written without a loop. */
        need = (value >> 30) == 0 ? (value != 0) : (value >> 60) == 0 ? 2 : 3;
        if (size != need || size < 2)
            return 0;
        d[0] = (digit)(value & PyLong_MASK);
        d[1] = (digit)((value >> 30) & PyLong_MASK);
        if (size == 3)
            d[2] = (digit)(value >> 60);
        (void)i; (void)rest;
        return 1;
    #else
        while (rest) {
            need++;
            rest >>= PyLong_SHIFT;
        }
        if (size != need || size < 2)
            return 0;
        rest = value;
        for (i = 0; i < size; i++) {
            d[i] = (digit)(rest & PyLong_MASK);
            rest >>= PyLong_SHIFT;
        }
        return 1;
    #endif
    #else
        (void)obj; (void)offset; (void)value;
        return 0;
    #endif
    }
    /* The timestamp slot rewritten in place (1) when its float is held by the
       record alone: no one else can see the value change. */
    static int loopcore_reset_float(PyObject *obj, Py_ssize_t offset, double value) {
        PyObject *held = *(PyObject **)((char *)obj + offset);
        if (!PyFloat_CheckExact(held) || Py_REFCNT(held) != 1)
            return 0;
        ((PyFloatObject *)held)->ob_fval = value;
        return 1;
    }
    static Py_ssize_t loopcore_refcount(PyObject *obj) {
        return Py_REFCNT(obj);
    }
    /* A hash field's value: the slot's int when it could be given the value
       in place or equals it, else a new int (NULL: out of memory). */
    static PyObject *loopcore_hash_field(PyObject *obj, Py_ssize_t offset, uint64_t value,
                                         PyObject **made) {
        if (loopcore_reset_u64(obj, offset, value) || loopcore_slot_is_u64(obj, offset, value))
            return *(PyObject **)((char *)obj + offset);
        return *made = PyLong_FromUnsignedLongLong(value);
    }
    /* The spare record given a record's fields in place (a new reference to
       it), or NULL with an exception set. ``values`` holds the fields in
       CallRecord's order; the two hashes, the timestamp and the identity are
       filled in here. Every new value is made first, then the slots are
       swapped (nothing can fail midway), then the old values are released
       (builtin values: no finaliser runs). */
    static PyObject *loopcore_refill(PyObject *record, const Py_ssize_t *offsets,
                                     PyObject **values, uint64_t args, double ts,
                                     int has_result, uint64_t result, int has_identity,
                                     uint64_t identity) {
        PyObject *made[4] = {NULL, NULL, NULL, NULL};
        PyObject *old[11];
        PyObject **slot;
        int n = 0, i;
        /* The caller's reference first, before anything allocates: a collection
           that runs a finaliser building another outcome's record must find
           this one held, not free to refill under us. */
        Py_INCREF(record);
        if ((values[1] = loopcore_hash_field(record, offsets[1], args, &made[0])) == NULL)
            goto fail;
        if (loopcore_reset_float(record, offsets[5], ts))
            values[5] = *(PyObject **)((char *)record + offsets[5]);
        else if ((values[5] = made[1] = PyFloat_FromDouble(ts)) == NULL)
            goto fail;
        values[6] = Py_None;
        if (has_result &&
            (values[6] = loopcore_hash_field(record, offsets[6], result, &made[2])) == NULL)
            goto fail;
        values[9] = Py_None;
        if (has_identity &&
            (values[9] = loopcore_hash_field(record, offsets[9], identity, &made[3])) == NULL)
            goto fail;
        for (i = 0; i < 11; i++) {
            slot = (PyObject **)((char *)record + offsets[i]);
            if (*slot != values[i]) {
                Py_INCREF(values[i]);
                old[n++] = *slot;
                *slot = values[i];
            }
        }
        for (i = 0; i < 4; i++)
            Py_XDECREF(made[i]);
        for (i = 0; i < n; i++)
            Py_DECREF(old[i]);
        return record;
    fail:
        for (i = 0; i < 4; i++)
            Py_XDECREF(made[i]);
        Py_DECREF(record);
        return NULL;
    }
    """
    Py_ssize_t member_offset "loopcore_member_offset" (object descr)
    void fill_slot "loopcore_fill_slot" (object obj, Py_ssize_t offset, object value)
    object new_instance "loopcore_new_instance" (PyTypeObject *type)
    Py_ssize_t refcount "loopcore_refcount" (PyObject *obj) noexcept
    PyObject *tuple_item "PyTuple_GET_ITEM" (object t, Py_ssize_t i) noexcept
    PyTypeObject *type_of "Py_TYPE" (PyObject *obj) noexcept
    PyObject *PY_TRUE "Py_True"
    PyObject *PY_FALSE "Py_False"
    object refill_c "loopcore_refill" (
        PyObject *record, const Py_ssize_t *offsets, PyObject **values, uint64_t args,
        double ts, bint has_result, uint64_t result, bint has_identity, uint64_t identity,
    )

# In make_record's order; the fast path needs them to be all of CallRecord's fields.
_RECORD_FIELDS = (
    "tool_name",
    "args_hash",
    "tool_call_id",
    "session",
    "run_id",
    "timestamp",
    "result_hash",
    "unknown_tool_name",
    "outcome_kind",
    "failure_identity_hash",
    "no_progress",
)
cdef Py_ssize_t RECORD_OFFSETS[11]
cdef bint FAST_RECORDS = (
    len(_RECORD_FIELDS) == 11
    and {field.name for field in dataclasses.fields(CallRecord)} == set(_RECORD_FIELDS)
    and type(CallRecord).__new__ is type.__new__
    and CallRecord.__new__ is object.__new__
)
for _index, _name in enumerate(_RECORD_FIELDS):
    RECORD_OFFSETS[_index] = member_offset(CallRecord.__dict__[_name])
    FAST_RECORDS = FAST_RECORDS and RECORD_OFFSETS[_index] > 0
cdef PyTypeObject *RECORD_TYPE = <PyTypeObject*>CallRecord
# The outcome kinds' names by code, and the session wrapper's type, read
# without a module lookup.
cdef tuple KIND_NAMES = OUTCOME_KINDS
cdef type SESSION_REF = SessionRef


# The record built last for an outcome (GIL builds only: a refcount of one must
# mean that no other thread can take it meanwhile).
cdef object SPARE = None


cdef object make_record(
    object tool_name,
    uint64_t args_hash,
    object call_id,
    object key,
    double timestamp,
    object unknown,
    Outcome *outcome,
    bint spare=False,
):
    """The ``CallRecord``; with ``spare`` (an outcome's record, built with the lock
    released) the spare one when nothing else holds it."""
    cdef uint8_t flags = outcome.flags
    cdef PyObject *values[11]
    cdef object unwrapped
    # The key's parts, borrowed (the caller holds the key).
    cdef PyObject *session = tuple_item(key, 0)
    cdef PyObject *run_id = tuple_item(key, 1)
    if type_of(session) == <PyTypeObject*>SESSION_REF:
        unwrapped = (<object>session).value  # the host's own session object
        session = <PyObject*>unwrapped
    # Only records of builtin values are kept: a spare must never keep a host's
    # session alive, nor run its finaliser when refilled.
    spare = spare and not GIL_DISABLED and FAST_RECORDS and (
        session == <PyObject*>None
        or type_of(session) == <PyTypeObject*>str
        or type_of(session) == <PyTypeObject*>int
    ) and (run_id == <PyObject*>None or type_of(run_id) == <PyTypeObject*>str)
    if spare and SPARE is not None and refcount(<PyObject*>SPARE) == 1:
        # Refilled in C with borrowed references (``loopcore_refill``).
        values[0] = <PyObject*>tool_name
        values[2] = <PyObject*>call_id
        values[3] = session
        values[4] = run_id
        values[7] = <PyObject*>unknown
        values[8] = tuple_item(KIND_NAMES, (flags & KIND_BITS) >> KIND_SHIFT)
        values[10] = PY_TRUE if flags & NO_PROGRESS else PY_FALSE
        return refill_c(
            <PyObject*>SPARE, RECORD_OFFSETS, values, args_hash, timestamp,
            flags & HAS_RESULT, outcome.result, flags & HAS_IDENTITY, outcome.identity,
        )
    cdef object kind = KIND_NAMES[(flags & KIND_BITS) >> KIND_SHIFT]
    cdef object no_progress = (flags & NO_PROGRESS) != 0
    cdef object result = outcome.result if flags & HAS_RESULT else None
    cdef object identity = outcome.identity if flags & HAS_IDENTITY else None
    if not FAST_RECORDS:
        return CallRecord(
            tool_name, args_hash, call_id, <object>session, <object>run_id, timestamp, result,
            unknown, kind, identity, no_progress,
        )
    record = new_instance(RECORD_TYPE)
    fill_slot(record, RECORD_OFFSETS[0], tool_name)
    fill_slot(record, RECORD_OFFSETS[1], args_hash)
    fill_slot(record, RECORD_OFFSETS[2], call_id)
    fill_slot(record, RECORD_OFFSETS[3], <object>session)
    fill_slot(record, RECORD_OFFSETS[4], <object>run_id)
    fill_slot(record, RECORD_OFFSETS[5], timestamp)
    fill_slot(record, RECORD_OFFSETS[6], result)
    fill_slot(record, RECORD_OFFSETS[7], unknown)
    fill_slot(record, RECORD_OFFSETS[8], kind)
    fill_slot(record, RECORD_OFFSETS[9], identity)
    fill_slot(record, RECORD_OFFSETS[10], no_progress)
    if spare:
        # The previous spare is held elsewhere (else it was refilled): no finaliser runs.
        global SPARE
        SPARE = record
    return record


cdef list row_records(RingStore self, object key, Py_ssize_t row, bint raw):
    """A row's records, oldest first: ``CallRecord``s, or (``raw``) lists in the
    Python twin's field order. The caller holds the lock with the collector off."""
    cdef Py_ssize_t slot, _n, count
    cdef Cols c
    cdef Outcome outcome
    out = []
    if row < 0:
        return out
    cols_of(meta_at(self, row), &c)
    count = meta_at(self, row)[0].fill
    slot = meta_at(self, row)[0].head - count
    if slot < 0:
        slot += self.history_size
    for _n in range(count):
        outcome.flags = c.flag[slot]
        outcome.result = c.result[slot]
        outcome.identity = c.identity[slot] if outcome.flags & HAS_IDENTITY else 0
        unknown = self.names[c.unknown[slot]] if outcome.flags & HAS_UNKNOWN else None
        if raw:
            out.append([
                self.names[c.tool[slot]],
                c.args[slot],
                slot_id(self, row, slot),
                c.ts[slot],
                outcome.result if outcome.flags & HAS_RESULT else None,
                unknown,
                (outcome.flags & KIND_BITS) >> KIND_SHIFT,
                outcome.identity if outcome.flags & HAS_IDENTITY else None,
                (outcome.flags & NO_PROGRESS) != 0,
            ])
        else:
            out.append(
                make_record(
                    self.names[c.tool[slot]], c.args[slot], slot_id(self, row, slot), key,
                    c.ts[slot], unknown, &outcome,
                )
            )
        slot = slot + 1 if slot + 1 < self.history_size else 0
    return out

# What completes a record, and how does the store build a CallRecord without running
# its __init__, and a row's records for history() and window()? (included by _ring_c.pyx)


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
    """
    Py_ssize_t member_offset "loopcore_member_offset" (object descr)
    void fill_slot "loopcore_fill_slot" (object obj, Py_ssize_t offset, object value)
    object new_instance "loopcore_new_instance" (PyTypeObject *type)

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
# The outcome kinds' names by code, read without a module lookup.
cdef tuple KIND_NAMES = OUTCOME_KINDS


cdef object make_record(
    object tool_name,
    uint64_t args_hash,
    object call_id,
    object key,
    double timestamp,
    object unknown,
    Outcome *outcome,
):
    cdef uint8_t flags = outcome.flags
    cdef object result = outcome.result if flags & HAS_RESULT else None
    cdef object identity = outcome.identity if flags & HAS_IDENTITY else None
    cdef object kind = KIND_NAMES[(flags & KIND_BITS) >> KIND_SHIFT]
    cdef object no_progress = (flags & NO_PROGRESS) != 0
    cdef tuple key_tuple = <tuple>key
    session = key_tuple[0]
    if type(session) is SessionRef:
        session = (<object>session).value  # the host's own session object
    if not FAST_RECORDS:
        return CallRecord(
            tool_name, args_hash, call_id, session, key_tuple[1], timestamp, result, unknown,
            kind, identity, no_progress,
        )
    record = new_instance(RECORD_TYPE)
    fill_slot(record, RECORD_OFFSETS[0], tool_name)
    fill_slot(record, RECORD_OFFSETS[1], args_hash)
    fill_slot(record, RECORD_OFFSETS[2], call_id)
    fill_slot(record, RECORD_OFFSETS[3], session)
    fill_slot(record, RECORD_OFFSETS[4], key_tuple[1])
    fill_slot(record, RECORD_OFFSETS[5], timestamp)
    fill_slot(record, RECORD_OFFSETS[6], result)
    fill_slot(record, RECORD_OFFSETS[7], unknown)
    fill_slot(record, RECORD_OFFSETS[8], kind)
    fill_slot(record, RECORD_OFFSETS[9], identity)
    fill_slot(record, RECORD_OFFSETS[10], no_progress)
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

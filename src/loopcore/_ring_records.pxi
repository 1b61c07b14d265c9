# How does the store build a CallRecord without running its __init__? (included by _ring_c.pyx)


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
)
cdef Py_ssize_t RECORD_OFFSETS[8]
cdef bint FAST_RECORDS = (
    {field.name for field in dataclasses.fields(CallRecord)} == set(_RECORD_FIELDS)
    and type(CallRecord).__new__ is type.__new__
    and CallRecord.__new__ is object.__new__
)
for _index, _name in enumerate(_RECORD_FIELDS):
    RECORD_OFFSETS[_index] = member_offset(CallRecord.__dict__[_name])
    FAST_RECORDS = FAST_RECORDS and RECORD_OFFSETS[_index] > 0
cdef PyTypeObject *RECORD_TYPE = <PyTypeObject*>CallRecord


cdef object make_record(
    object tool_name,
    uint64_t args_hash,
    object call_id,
    object key,
    double timestamp,
    uint64_t result_hash,
    bint has_result,
    object unknown,
):
    cdef object result = result_hash if has_result else None
    cdef tuple key_tuple = <tuple>key
    session = key_tuple[0]
    if type(session) is SessionRef:
        session = (<object>session).value  # the host's own session object
    if not FAST_RECORDS:
        return CallRecord(
            tool_name, args_hash, call_id, session, key_tuple[1], timestamp, result, unknown
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
    return record

# cython: language_level=3, freethreading_compatible=True
"""C-level API of the compiled outcome twin, for the other compiled modules (the batch rows)."""

from libc.stdint cimport uint64_t


# hash_call without the tool name check (the caller has made it): the same hash.
cdef uint64_t row_call_hash(object tool_name, object args) except? 0
# outcome_of without the tool name check: the same tuple (the reference's when C is unsure).
cdef object row_outcome(
    object tool_name, object args, object result, object error, object normalizers,
    object send_tools,
)

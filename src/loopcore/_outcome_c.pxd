# cython: language_level=3, freethreading_compatible=True
"""C-level API of the compiled outcome twin, for the per-call twin."""

from libc.stdint cimport uint64_t


# The call fingerprint of ``hash_call`` for a str tool name (not re-checked).
cdef uint64_t call_hash(object tool_name, object args) except? 0
# The generic rule of SPEC §2 hashed in C: True with ``out`` set, or False when
# the outcome needs the Python rules (an error, no result, a loop veto, an
# unusual container). The caller has checked that the tool has no special rule.
cdef bint plain_outcome(object result, object error, uint64_t *out) except -1

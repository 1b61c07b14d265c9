# cython: language_level=3, freethreading_compatible=True
"""Which part of a call and of its outcome is hashed? (SPEC §2 rules, compiled twin)

The common outcomes — a plain return value hashed whole, a tool-result dict of a
tool with no special rule, and the results of exec (terminal failures included),
process polls and logs and write no-ops — are hashed here in C, straight into the
encoder (in its nonce-normalising mode, SPEC §8.5). Every other branch (errors,
loop vetoes, send/update_plan results, Code Mode receipts, host normalisers,
content texts that may hold a wrapper, any value the C reader does not know) is
rare per call: it runs the reference functions of ``_outcome_py``, so those
rules are written once and decide whenever the fast path is unsure.
"""

from libc.stdint cimport uint64_t

from ._outcome_py import (
    CALL_DOMAIN,
    ERROR_DOMAIN,
    RESULT_DOMAIN,
    SPECIAL_OUTCOME_TOOLS,
    UNSET,
    Normalizer,
    check_call_id,
    check_normalizers,
    check_send_tools,
    check_tool_name,
    is_known_poll,
    plan_shape,
    unknown_tool_name,
)
from ._outcome_py import outcome_of as _py_outcome_of

# The reference twin's public names (a test holds the two lists equal).
__all__ = [
    "CALL_DOMAIN",
    "ERROR_DOMAIN",
    "IMPLEMENTATION",
    "RESULT_DOMAIN",
    "SPECIAL_OUTCOME_TOOLS",
    "UNSET",
    "Normalizer",
    "check_call_id",
    "check_normalizers",
    "check_send_tools",
    "check_tool_name",
    "hash_call",
    "hash_outcome",
    "is_known_poll",
    "outcome_of",
    "plan_shape",
    "unknown_tool_name",
]

IMPLEMENTATION = "cython"

include "_outcome_plain.pxi"
include "_outcome_exec.pxi"

cdef frozenset SPECIAL = SPECIAL_OUTCOME_TOOLS


def hash_call(tool_name, args):
    """64-bit fingerprint of a call: tool name and args (update_plan: args' shape)."""
    check_tool_name(tool_name)
    return call_hash(tool_name, args)


cdef inline object fast_outcome(object tool_name, object args, object result, object error,
                                object normalizers, object send_tools):
    """The outcome read in C (the plain rules or a special tool's), or None: ask Python."""
    cdef uint64_t found = 0
    cdef bint special = tool_name in SPECIAL
    if (send_tools and tool_name in send_tools) or (normalizers and tool_name in normalizers):
        return None
    if special:
        return special_outcome(tool_name, args, result, error)
    if plain_outcome(result, error, &found):
        return found, None, 0, None, False
    return None


cdef uint64_t row_call_hash(object tool_name, object args) except? 0:
    return call_hash(tool_name, args)


cdef object row_outcome(
    object tool_name, object args, object result, object error, object normalizers,
    object send_tools,
):
    found = fast_outcome(tool_name, args, result, error, normalizers, send_tools)
    if found is not None:
        return found
    return _py_outcome_of(
        tool_name, args, result=result, error=error, normalizers=normalizers, send_tools=send_tools
    )


def outcome_of(
    tool_name, args, *, result=UNSET, error=UNSET, normalizers=None, send_tools=()
):
    """``(result_hash, unknown_tool_name, kind, failure_identity_hash, no_progress)``.

    SPEC §2 with §8.0-8.6 and §8.13; see ``_outcome_py.outcome_of``.
    """
    check_tool_name(tool_name)
    found = fast_outcome(tool_name, args, result, error, normalizers, send_tools)
    if found is not None:
        return found
    return _py_outcome_of(
        tool_name, args, result=result, error=error, normalizers=normalizers, send_tools=send_tools
    )


def hash_outcome(
    tool_name, args, *, result=UNSET, error=UNSET, normalizers=None, send_tools=()
):
    """``(result_hash, unknown_tool_name)`` of a call's outcome (SPEC §2; a veto has none)."""
    check_tool_name(tool_name)
    found = fast_outcome(tool_name, args, result, error, normalizers, send_tools)
    if found is None:
        found = _py_outcome_of(
            tool_name, args, result=result, error=error, normalizers=normalizers,
            send_tools=send_tools,
        )
    return found[0], found[1]

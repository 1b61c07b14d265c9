"""Which outcome twin is in use: the compiled one unless disabled or unavailable."""

from __future__ import annotations

from typing import TYPE_CHECKING

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

# Under TYPE_CHECKING the Python twin is the typed reference.
if TYPE_CHECKING:
    from ._outcome_py import (
        CALL_DOMAIN,
        ERROR_DOMAIN,
        IMPLEMENTATION,
        RESULT_DOMAIN,
        SPECIAL_OUTCOME_TOOLS,
        UNSET,
        Normalizer,
        check_call_id,
        check_normalizers,
        check_send_tools,
        check_tool_name,
        hash_call,
        hash_outcome,
        is_known_poll,
        outcome_of,
        plan_shape,
        unknown_tool_name,
    )
else:
    from ._twins import choose

    globals().update(choose("outcome", __all__))

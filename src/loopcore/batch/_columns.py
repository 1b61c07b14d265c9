"""Are the columns given to ``CallTable.from_columns`` usable? Checks and conversions.

Hashes may come from a database as signed 64-bit values, or as a Python list
mixing values above and below 2**63; scope keys must be ``(session, run_id)``
pairs naming distinct scopes; outcome kinds must be consistent with the result
flags (SPEC §8.0, §8.4).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .._records import KIND_NONE, KIND_TERMINAL_EXEC, KIND_VALIDATION, KIND_VETO
from .._scopes import ScopeKey, scope_key, session_of

__all__ = ["check_kinds", "checked_column", "scope_keys"]

Flags = npt.NDArray[np.bool_]


_MASK = (1 << 64) - 1


def _from_sequence(values: object, dtype: type[np.generic]) -> Any:
    """A Python sequence of ints or bools as an array of ``dtype``, or None to let numpy try.

    numpy reads a list that mixes hashes of 2**63 and above with smaller ones
    as floats; hashes are taken modulo 2**64 instead (so signed views work too).
    """
    if isinstance(values, np.ndarray) or not isinstance(values, (list, tuple)):
        return None
    if dtype is np.bool_:
        if all(isinstance(v, (bool, np.bool_)) for v in values):
            return np.array(values, np.bool_).reshape(len(values))
        return None
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        return None
    if dtype is np.uint64:
        return np.array([int(v) & _MASK for v in values], np.uint64).reshape(len(values))
    return None


def checked_column(name: str, values: object, dtype: type[np.generic], length: int | None) -> Any:
    array = _from_sequence(values, dtype)
    if array is None:
        array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name}: expected a one-dimensional array, got {array.ndim} dimensions")
    if length is not None and len(array) != length:
        raise ValueError(
            f"{name}: expected {length} values like the other columns, got {len(array)}"
        )
    if dtype is np.bool_:
        if array.size and array.dtype != np.bool_:
            raise ValueError(f"{name}: expected booleans, got dtype {array.dtype}")
        return np.array(array, np.bool_)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name}: expected integers, got dtype {array.dtype}")
    if dtype is np.uint64 and array.dtype.kind == "i" and array.size and array.min() < 0:
        # Signed 64-bit views of hashes are common (databases); keep their bits.
        return array.astype(np.int64).view(np.uint64)
    if dtype is np.int64 and array.dtype == np.uint64 and array.size and array.max() >= 1 << 63:
        raise ValueError(f"{name}: expected values below 2**63, got {array.max()}")
    # Always a copy: the table freezes its arrays, and must not freeze or share the caller's.
    return np.array(array, dtype)


def scope_keys(scopes: Sequence[object]) -> tuple[ScopeKey, ...]:
    keys = []
    for index, key in enumerate(scopes):
        if not isinstance(key, tuple) or len(key) != 2:
            raise ValueError(f"scopes[{index}]: expected a (session, run_id) pair, got {key!r}")
        try:
            keys.append(scope_key(*key))
        except TypeError as exc:
            raise ValueError(f"scopes[{index}].{exc}") from None
    if len(set(keys)) != len(keys):
        raise ValueError("scopes: two scope ids name the same (session, run_id) scope")
    # Sessions as the host gave them (a SessionRef only stands in for one as a key).
    return tuple((session_of(key), key[1]) for key in keys)


def check_kinds(kind: npt.NDArray[np.int64], has_result: Flags, has_unknown: Flags) -> None:
    """A veto record has no result; a terminal exec failure has one (SPEC §8.0, §8.4)."""
    if not kind.size:
        return
    bad = np.flatnonzero((kind < KIND_NONE) | (kind > KIND_VALIDATION))
    if len(bad):
        raise ValueError(f"kind: expected outcome kind codes 0 to 3, got {kind[bad[0]]}")
    veto = kind == KIND_VETO
    for name, column in (("has_result", has_result), ("has_unknown", has_unknown)):
        clash = np.flatnonzero(veto & column)
        if len(clash):
            raise ValueError(f"kind: a veto (1) has no outcome, but {name} is set at {clash[0]}")
    missing = np.flatnonzero((kind >= KIND_TERMINAL_EXEC) & ~has_result)
    if len(missing):
        raise ValueError(f"kind: kind {kind[missing[0]]} needs a result, none at {missing[0]}")

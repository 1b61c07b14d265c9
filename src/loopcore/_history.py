"""Which history twin is in use: the compiled one unless disabled or unavailable."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

__all__ = ["IMPLEMENTATION", "HistoryStore"]

# Under TYPE_CHECKING the Python twin is the typed reference.
if (
    TYPE_CHECKING
    or os.environ.get("LOOPCORE_NO_EXTENSIONS")
    or sys.implementation.name != "cpython"
):
    from ._history_py import IMPLEMENTATION, HistoryStore
else:
    try:
        from ._history_c import IMPLEMENTATION, HistoryStore
    except ImportError:
        from ._history_py import IMPLEMENTATION, HistoryStore

"""Which fingerprint twin is in use: the compiled one unless disabled or unavailable."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

__all__ = ["IMPLEMENTATION", "encode", "fingerprint"]

# Under TYPE_CHECKING the Python twin is the typed reference.
if (
    TYPE_CHECKING
    or os.environ.get("LOOPCORE_NO_EXTENSIONS")
    or sys.implementation.name != "cpython"
):
    from ._fingerprint_py import IMPLEMENTATION, encode, fingerprint
else:
    try:
        from ._fingerprint_c import IMPLEMENTATION, encode, fingerprint
    except ImportError:
        from ._fingerprint_py import IMPLEMENTATION, encode, fingerprint

"""Which ring-store twin is in use: the compiled one unless disabled or unavailable."""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["IMPLEMENTATION", "RingStore", "scan_window"]

# Under TYPE_CHECKING the Python twin is the typed reference.
if TYPE_CHECKING:
    from ._ring_py import IMPLEMENTATION, RingStore, scan_window
else:
    from ._twins import choose

    globals().update(choose("ring", __all__))

"""Which twin does a chooser module load? (compiled unless disabled or unavailable)

``LOOPCORE_NO_EXTENSIONS`` set, or an interpreter other than CPython, picks the
pure-Python twin; otherwise the compiled one, falling back to Python when it was
not built (an sdist install without a compiler).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

__all__ = ["choose", "load"]


def load(component: str) -> ModuleType:
    """``loopcore._<component>_c`` if it should and can be used, else ``_<component>_py``."""
    if not os.environ.get("LOOPCORE_NO_EXTENSIONS") and sys.implementation.name == "cpython":
        try:
            return importlib.import_module(f"loopcore._{component}_c")
        except ImportError:
            pass
    return importlib.import_module(f"loopcore._{component}_py")


def choose(component: str, names: Iterable[str]) -> dict[str, Any]:
    """The chosen twin's values of ``names``, for a chooser's globals."""
    module = load(component)
    return {name: getattr(module, name) for name in names}

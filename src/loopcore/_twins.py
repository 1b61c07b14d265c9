"""Which twin does a chooser module load? (compiled unless disabled or unavailable)

``LOOPCORE_NO_EXTENSIONS`` set, or an interpreter other than CPython, picks the
pure-Python twin; otherwise the compiled one, falling back to Python when it was
not built (an sdist install without a compiler).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

__all__ = ["COMPONENTS", "choose", "compiled", "load", "use_twin"]


def compiled(module: str) -> ModuleType | None:
    """The compiled module ``module`` if it should and can be used, else None."""
    if os.environ.get("LOOPCORE_NO_EXTENSIONS") or sys.implementation.name != "cpython":
        return None
    try:
        return importlib.import_module(module)
    except ImportError:  # not built (an sdist install without a compiler)
        return None


def load(component: str) -> ModuleType:
    """``loopcore._<component>_c`` if it should and can be used, else ``_<component>_py``."""
    found = compiled(f"loopcore._{component}_c")
    return found if found is not None else importlib.import_module(f"loopcore._{component}_py")


def choose(component: str, names: Iterable[str]) -> dict[str, Any]:
    """The chosen twin's values of ``names``, for a chooser's globals."""
    module = load(component)
    return {name: getattr(module, name) for name in names}


#: The twinned components, each with a chooser ``_<name>`` and twins ``_<name>_py`` / ``_c``.
COMPONENTS = ("fingerprint", "outcome", "ring", "percall")
_SUFFIX = {"python": "py", "cython": "c"}


@contextmanager
def use_twin(name: str) -> Iterator[str]:
    """Point every chooser at one twin (``"python"`` or ``"cython"``) inside the block.

    For the test suite and the benchmarks: instances made inside the block keep
    the twin's per-call base and store after it. The twins are imported
    directly, so a compiled twin that was not built raises ImportError.
    """
    suffix = _SUFFIX[name]
    saved: list[tuple[ModuleType, dict[str, Any]]] = []
    try:
        for component in COMPONENTS:
            chooser = importlib.import_module(f"loopcore._{component}")
            twin = importlib.import_module(f"loopcore._{component}_{suffix}")
            # A chooser's own helpers (``_percall.new``) are not the twin's.
            names = [n for n in chooser.__all__ if hasattr(twin, n)]
            saved.append((chooser, {n: getattr(chooser, n) for n in names}))
            for n in names:
                setattr(chooser, n, getattr(twin, n))
        yield name
    finally:
        for chooser, values in reversed(saved):
            for n, value in values.items():
                setattr(chooser, n, value)

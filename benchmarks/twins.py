"""Which implementation does a benchmark leg time? Pointing loopcore's choosers at one twin.

``loopcore._fingerprint``, ``_outcome``, ``_ring`` and ``_percall`` re-export
names from a twin module; ``use_twin`` sets those attributes to the names of
``loopcore._<component>_c`` (the ``compiled`` leg) or ``_<component>_py`` (the
``python`` leg) for the duration of a ``with`` block, and restores them after.
A ``LoopDetector`` or ``ToolLoopGuard`` takes its per-call base and its store
when it is constructed, and the Python twins hash through the chooser at call
time, so build it AND time it inside the block. The compiled twins are imported
directly: a missing build raises ImportError (the leg fails, it never falls back
to the Python twin).
The ``baseline`` leg does not use loopcore, and patches nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from loopcore import _twins as twins

__all__ = ["LEGS", "TWINS", "twin_module", "use_twin"]

#: The three legs of every workload, in table order.
LEGS = ("compiled", "python", "baseline")
#: The legs that are loopcore twins.
TWINS = ("compiled", "python")

_TWIN = {"compiled": "cython", "python": "python"}


def twin_module(component: str, twin: str) -> ModuleType:
    """``loopcore._<component>_c`` or ``_py``, imported directly (no fallback)."""
    suffix = {"compiled": "c", "python": "py"}[twin]
    return importlib.import_module(f"loopcore._{component}_{suffix}")


@contextmanager
def use_twin(leg: str) -> Iterator[None]:
    """Point every chooser module at one twin for the ``with`` block (baseline: no-op)."""
    if leg == "baseline":
        yield
        return
    if leg not in _TWIN:
        raise ValueError(f"unknown leg {leg!r}; expected one of {LEGS}")
    with twins.use_twin(_TWIN[leg]):
        yield

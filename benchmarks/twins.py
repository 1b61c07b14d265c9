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

from loopcore import _fingerprint, _outcome, _percall, _ring

__all__ = ["LEGS", "TWINS", "twin_module", "use_twin"]

#: The three legs of every workload, in table order.
LEGS = ("compiled", "python", "baseline")
#: The legs that are loopcore twins.
TWINS = ("compiled", "python")

_SUFFIX = {"compiled": "c", "python": "py"}
_CHOOSERS = (
    (_fingerprint, "fingerprint"),
    (_outcome, "outcome"),
    (_ring, "ring"),
    (_percall, "percall"),
)


def twin_module(component: str, twin: str) -> ModuleType:
    """``loopcore._<component>_c`` or ``_py``, imported directly (no fallback)."""
    return importlib.import_module(f"loopcore._{component}_{_SUFFIX[twin]}")


@contextmanager
def use_twin(leg: str) -> Iterator[None]:
    """Point both chooser modules at one twin for the ``with`` block (baseline: no-op)."""
    if leg == "baseline":
        yield
        return
    if leg not in _SUFFIX:
        raise ValueError(f"unknown leg {leg!r}; expected one of {LEGS}")
    modules = [(chooser, twin_module(component, leg)) for chooser, component in _CHOOSERS]
    saved = [
        (chooser, {name: getattr(chooser, name) for name in _names(chooser, module)})
        for chooser, module in modules
    ]
    try:
        for chooser, module in modules:
            for name in _names(chooser, module):
                setattr(chooser, name, getattr(module, name))
        yield
    finally:
        for chooser, attrs in saved:
            for name, value in attrs.items():
                setattr(chooser, name, value)


def _names(chooser: ModuleType, module: ModuleType) -> list[str]:
    """The chooser's names that the twin provides (``_percall.new`` is the chooser's own)."""
    return [name for name in chooser.__all__ if hasattr(module, name)]

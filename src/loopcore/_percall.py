"""Which per-call twin is in use, and how does a policy class get it as its base?

``LoopDetector`` and ``ToolLoopGuard`` are plain Python classes whose per-call
methods come from a twin's ``DetectorCalls`` / ``GuardCalls``. The base is
chosen when an instance is made, not when the class is defined, so that the
chooser (and the test suite's twin fixture) decides per instance: ``new``
returns an instance of a subclass made once per (class, twin) pair.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["IMPLEMENTATION", "DetectorCalls", "GuardCalls", "init_signature", "new"]

# Under TYPE_CHECKING the Python twin is the typed reference.
if TYPE_CHECKING:
    from ._percall_py import IMPLEMENTATION, DetectorCalls, GuardCalls
else:
    from ._twins import choose

    globals().update(choose("percall", ["IMPLEMENTATION", "DetectorCalls", "GuardCalls"]))

T = TypeVar("T")
_VARIANTS: dict[tuple[type, type], type] = {}


def new(cls: type[T], root: type, base_name: str) -> T:
    """A new, uninitialised ``cls`` whose per-call methods come from the chosen twin.

    ``root`` is the policy class (``LoopDetector``, ``ToolLoopGuard``), which
    subclasses the Python twin's base. With the Python twin chosen, ``cls`` is
    used as it is. With another, ``cls`` gets a variant whose order of lookup is
    ``cls`` and its own bases up to ``root``, then the chosen base, then ``root``
    and the Python twin: a method a user subclass overrides still comes first,
    and the chosen twin's per-call methods come before the reference ones.
    """
    base: Any = globals()[base_name]
    if issubclass(cls, base):
        return base.__new__(cls)  # type: ignore[no-any-return]
    variant = _VARIANTS.get((cls, base))
    if variant is None:
        # The chosen base's own bases are listed too, so that all of them come
        # before ``root`` and its Python-twin bases in the order of lookup.
        chain = tuple(k for k in base.__mro__ if k is not object)
        bases = (*chain, root) if cls is root else (cls, *chain, root)
        # Named like the class it extends: reprs and tracebacks read as the user's class.
        variant = type(
            cls.__name__,
            bases,
            {"__module__": cls.__module__, "__qualname__": cls.__qualname__},
        )
        variant = _VARIANTS.setdefault((cls, base), variant)
    return base.__new__(variant)  # type: ignore[no-any-return]


def init_signature(cls: type) -> inspect.Signature:
    """``cls(...)``'s signature as ``__init__`` writes it (``__new__`` only forwards)."""
    signature = inspect.signature(cls.__init__)  # type: ignore[misc]
    return signature.replace(parameters=list(signature.parameters.values())[1:])

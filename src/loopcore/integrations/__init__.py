"""Where does loopcore plug into an agent framework? One module per framework.

Each module imports its framework on first use and needs that framework's extra
(``pip install 'loopcore[langchain]'`` and so on); ``import loopcore`` never
loads any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._config import LoopDetectionConfig
from .._hook import ToolLoopGuard

__all__ = ["guard_of"]


def guard_of(
    guard: object,
    config: LoopDetectionConfig | Mapping[str, Any] | None,
    mode: str | None,
    default: Mapping[str, Any] | None = None,
) -> ToolLoopGuard:
    """An adapter's guard: the one given, else one built from ``config`` (or ``default``)."""
    if guard is None:
        return ToolLoopGuard(default if config is None else config, mode=mode)
    if not isinstance(guard, ToolLoopGuard):
        raise TypeError(f"guard: expected a ToolLoopGuard, got {type(guard).__name__}")
    if config is not None or mode is not None:
        raise TypeError("guard: pass either a guard or config/mode, not both")
    return guard

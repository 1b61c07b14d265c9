"""Placeholder while the store is reshaped: the reference scan of one ring."""

from __future__ import annotations

from ._history_py import _scan as scan_window

__all__ = ["scan_window"]

"""Which row builder twin does a ``CallTableBuilder`` use? The compiled one with the compiled
outcome twin.

The choice follows the outcome chooser when the builder is made: its compiled
twin (``LOOPCORE_NO_EXTENSIONS`` unset, the extension built) brings the compiled
rows, which hash through its C entry points; the pure-Python outcome twin (or
``use_twin("python")``) brings the reference rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _outcome
from . import _rows_py

if TYPE_CHECKING:
    from ._table import CallTableBuilder

__all__ = ["new_rows"]


def new_rows(builder: CallTableBuilder) -> _rows_py.Rows:
    """The rows of ``builder``, in the twin that matches the outcome twin in use."""
    if _outcome.IMPLEMENTATION == "cython":
        try:
            from . import _rows_c  # type: ignore[attr-defined]
        except ImportError:  # not built (an sdist install without a compiler)
            pass
        else:
            rows: _rows_py.Rows = _rows_c.Rows(builder)
            return rows
    return _rows_py.Rows(builder)

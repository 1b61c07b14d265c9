"""What would loop detection have said about every call of recorded traces? (SPEC §7)

The batch scans, imported on first use (they need numpy): a trace's calls are
fingerprinted once into a ``CallTable`` (``CallTableBuilder``), ``scan`` gives
the verdict ``LoopDetector.check`` would have returned before each of them, and
``sweep`` does so for every value of one setting, counting once.

- ``_table``: a trace's calls as columns of hashes (``CallTable``, ``CallTableBuilder``);
- ``_rows`` (twins ``_rows_py`` / ``_rows_c``): one call's row, and the msgspec reading loop;
- ``_kernels``: the SPEC §4 counts of every call, in whole-array numpy operations;
- ``_result``: ``ScanResult``, its per-scope ``ScopeSummary`` and ``ScanTotals``;
- ``_scan``: the entry points, ``scan`` and ``sweep``;
- ``_lines``: ``replay_lines``, one trace file's runs as a pure function of its lines;
- ``dask`` (imported only on use, extra ``[dask]``): ``replay`` of many files on ``dask.bag``.

The verdict table itself, ``DETECTORS`` and ``LEVELS`` live in ``loopcore._rules``.
"""

from __future__ import annotations

from .._rules import DETECTORS, LEVELS
from ._lines import replay_lines
from ._result import ScanResult, ScanTotals, ScopeSummary
from ._scan import scan, sweep
from ._table import CallTable, CallTableBuilder, EventError

__all__ = [
    "DETECTORS",
    "LEVELS",
    "CallTable",
    "CallTableBuilder",
    "EventError",
    "ScanResult",
    "ScanTotals",
    "ScopeSummary",
    "replay_lines",
    "scan",
    "sweep",
]

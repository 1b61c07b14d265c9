"""loopcore: notice when a tool-calling LLM agent is stuck, and warn, block or abort it.

The public API is re-exported here; everything else is private.
"""

from __future__ import annotations

from . import _fingerprint, _history
from ._calltable import CallTable, CallTableBuilder, EventError
from ._config import (
    ConfigError,
    DetectorSwitches,
    LoopDetectionConfig,
    PostCompactionGuardConfig,
    load_config,
    resolve_config,
)
from ._detector import CallRecord, LoopDetector, Verdict
from ._guard import CompactionLoopPersisted, GuardVerdict, PostCompactionGuard
from ._hook import Decision, LoopEvent, ToolLoopBlocked, ToolLoopGuard
from ._outcome import UNSET, hash_call, hash_outcome
from ._scan import DETECTORS, ScanResult, ScanTotals, ScopeSummary, scan, sweep

__all__ = [
    "DETECTORS",
    "IMPLEMENTATION",
    "UNSET",
    "CallRecord",
    "CallTable",
    "CallTableBuilder",
    "CompactionLoopPersisted",
    "ConfigError",
    "Decision",
    "DetectorSwitches",
    "EventError",
    "GuardVerdict",
    "LoopDetectionConfig",
    "LoopDetector",
    "LoopEvent",
    "PostCompactionGuard",
    "PostCompactionGuardConfig",
    "ScanResult",
    "ScanTotals",
    "ScopeSummary",
    "ToolLoopBlocked",
    "ToolLoopGuard",
    "Verdict",
    "__version__",
    "hash_call",
    "hash_outcome",
    "load_config",
    "resolve_config",
    "scan",
    "sweep",
]

__version__ = "0.1.0"

#: Which core is in use: "cython" only when every hot component loaded its compiled twin.
IMPLEMENTATION = (
    "cython"
    if _fingerprint.IMPLEMENTATION == "cython" and _history.IMPLEMENTATION == "cython"
    else "python"
)

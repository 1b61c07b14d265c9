"""loopcore: notice when a tool-calling LLM agent is stuck, and warn, block or abort it.

What a host needs is re-exported here; batch scans of recorded calls live in
``loopcore.batch`` (numpy), imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _fingerprint, _outcome, _percall, _ring
from ._config import (
    ConfigError,
    DetectorSwitches,
    LoopDetectionConfig,
    PostCompactionGuardConfig,
    load_config,
    resolve_config,
)
from ._decisions import (
    TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE,
    BatchDecision,
    Decision,
    Liveness,
    LoopEvent,
    Reconciliation,
    ToolLoopBlocked,
    ToolLoopRunTerminated,
)
from ._detector import CallRecord, LoopDetector, Verdict
from ._guard import CompactionLoopPersisted, GuardVerdict, PostCompactionGuard
from ._hook import ToolLoopGuard
from ._outcome import UNSET, hash_call, hash_outcome
from ._runloop import RunStop, TurnCall
from ._stats import GuardStats

if TYPE_CHECKING:
    from ._fleet_async import AsyncToolLoopGuard as AsyncToolLoopGuard
    from .batch import scan as scan

__all__ = [
    "IMPLEMENTATION",
    "TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE",
    "UNSET",
    "AsyncToolLoopGuard",
    "BatchDecision",
    "CallRecord",
    "CompactionLoopPersisted",
    "ConfigError",
    "Decision",
    "DetectorSwitches",
    "GuardStats",
    "GuardVerdict",
    "Liveness",
    "LoopDetectionConfig",
    "LoopDetector",
    "LoopEvent",
    "PostCompactionGuard",
    "PostCompactionGuardConfig",
    "Reconciliation",
    "RunStop",
    "ToolLoopBlocked",
    "ToolLoopGuard",
    "ToolLoopRunTerminated",
    "TurnCall",
    "Verdict",
    "__version__",
    "hash_call",
    "hash_outcome",
    "load_config",
    "resolve_config",
]

from ._version import __version__

#: Which core is in use: "cython" only when every twinned component loaded its compiled twin.
IMPLEMENTATION = (
    "cython"
    if all(m.IMPLEMENTATION == "cython" for m in (_fingerprint, _outcome, _ring, _percall))
    else "python"
)

# The batch-scan names that used to live here: still reachable, loaded on first use.
_BATCH = frozenset(
    {
        "CallTable",
        "CallTableBuilder",
        "DETECTORS",
        "EventError",
        "ScanResult",
        "ScanTotals",
        "ScopeSummary",
        "scan",
        "sweep",
    }
)


def __getattr__(name: str) -> Any:
    if name == "AsyncToolLoopGuard":
        from ._fleet_async import AsyncToolLoopGuard

        return AsyncToolLoopGuard
    if name in _BATCH:
        from . import batch

        return getattr(batch, name)
    raise AttributeError(f"module 'loopcore' has no attribute {name!r}")

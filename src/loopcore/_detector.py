"""What does ``LoopDetector`` do with a call: hash, scan, decide, record? (SPEC §3-4)

The per-call methods (``check``, ``record_call``, ``record_outcome``) come from
the per-call twin (``_percall``), which hashes and asks the store; this module
adds the policy they call up to when a scan is not quiet (the verdict table of
``_rules``) and the per-scope methods.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from typing import Any

from . import _percall, _ring
from ._config import LoopDetectionConfig, coerce_config
from ._decisions import Reconciliation
from ._outcome import (
    Normalizer,
    check_call_id,
    check_normalizers,
    check_send_tools,
    hash_call,
    is_known_poll,
)
from ._records import NOT_STUCK, CallRecord, ScanStats, Verdict
from ._rules import Verdicts, alarm_thresholds, churn_on
from ._scopes import ScopeKey, scope_key
from ._stats import GuardStats

__all__ = ["NOT_STUCK", "CallRecord", "LoopDetector", "Verdict"]

from ._percall_py import DetectorCalls


class LoopDetector(DetectorCalls):
    """Per-scope call history and the SPEC §4 checks over it.

    ``store`` is where the scopes' histories live (default: an in-process ring
    store of ``historySize`` records per scope, at most ``max_scopes`` scopes).
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> LoopDetector:
        return _percall.new(cls, LoopDetector, "DetectorCalls")

    def __init__(
        self,
        config: LoopDetectionConfig | Mapping[str, Any] | None = None,
        *,
        normalizers: Mapping[str, Normalizer] | None = None,
        send_tools: Collection[str] = (),
        max_scopes: int = 100_000,
        store: Any = None,
    ) -> None:
        self._config = config = coerce_config(config)
        normalizers = check_normalizers(normalizers)
        send_tools = check_send_tools(send_tools)
        if store is None:
            store = _ring.RingStore(config.history_size, max_scopes)
        elif hasattr(store, "for_history"):  # a shared store, told the history it keeps
            store = store.for_history(config.history_size)
        self._verdicts = Verdicts(config)
        alarm, unknown_alarm = alarm_thresholds(config)
        self._bind_calls(
            store, config.enabled is True, alarm, unknown_alarm, normalizers, send_tools
        )

    @property
    def config(self) -> LoopDetectionConfig:
        return self._config

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def verdicts(self) -> Verdicts:
        """The verdict table for this config, remembering recent answers (shared by a guard)."""
        return self._verdicts

    @property
    def store(self) -> Any:
        """Where the scopes' histories live (shared with a ``ToolLoopGuard`` built on it)."""
        return self._store

    def __repr__(self) -> str:
        return f"LoopDetector(enabled={self._enabled}, scopes={len(self._store)})"

    def _verdict(self, stats: ScanStats, tool_name: str, args: Any, args_hash: int) -> Verdict:
        """The verdict table for a scan the store did not call quiet."""
        return self._verdicts(stats, tool_name, args_hash, is_known_poll(tool_name, args))

    def history(self, *, session: Hashable = None, run_id: str | None = None) -> list[CallRecord]:
        """The scope's records, oldest first."""
        records: list[CallRecord] = self._store.history(scope_key(session, run_id))
        return records

    def reconcile_call(
        self,
        tool_name: str,
        args: Any,
        *,
        tool_call_id: str | None = None,
        session: Hashable = None,
        run_id: str | None = None,
        warning_threshold: int | None = None,
    ) -> Reconciliation:
        """SPEC §8.7: re-hash the pending call whose args a pre-call hook rewrote."""
        return self._reconcile(
            tool_name, args, tool_call_id, scope_key(session, run_id), warning_threshold
        )

    def _reconcile(
        self,
        tool_name: str,
        args: Any,
        tool_call_id: str | None,
        key: ScopeKey,
        warning_threshold: int | None,
    ) -> Reconciliation:
        args_hash, threshold = self._reconcile_args(
            tool_name, args, tool_call_id, warning_threshold
        )
        found = self._store.reconcile(key, tool_name, args_hash, tool_call_id)
        return self._reconciled(found, threshold)

    def _reconcile_args(
        self, tool_name: str, args: Any, tool_call_id: str | None, warning_threshold: int | None
    ) -> tuple[int, int]:
        """The new args hash and the threshold a reconciliation is judged by (checked)."""
        if warning_threshold is None:
            threshold = self._config.warning_threshold
        elif (
            isinstance(warning_threshold, bool)
            or not isinstance(warning_threshold, int)
            or warning_threshold < 1
        ):
            raise ValueError(
                f"warning_threshold: expected a positive integer, got {warning_threshold!r}"
            )
        else:
            threshold = warning_threshold
        args_hash = hash_call(tool_name, args)
        check_call_id(tool_call_id)
        return args_hash, threshold

    def _reconciled(self, found: tuple[bool, bool, int, int], threshold: int) -> Reconciliation:
        """The store's answer ``(found, changed, churn, variants)`` as a ``Reconciliation``."""
        matched, changed, churn, variants = found
        if not matched:
            return Reconciliation()
        if not churn_on(self._config):
            churn = variants = 0
        return Reconciliation(churn >= threshold, churn, variants, True, changed)

    def stats(self) -> GuardStats:
        """The scope fields of ``ToolLoopGuard.stats()``: live and evicted scopes."""
        return GuardStats(
            live_scopes=len(self._store), evicted_scopes=getattr(self._store, "evicted", 0)
        )

    def end_run(self, *, session: Hashable = None, run_id: str | None = None) -> None:
        """Forget one scope's history."""
        self._store.drop(scope_key(session, run_id))

    def end_session(self, session: Hashable) -> None:
        """Forget the history of every run of ``session``."""
        # The session as the store holds it (a host object: its SessionRef).
        self._store.drop_session(scope_key(session, None)[0])


LoopDetector.__signature__ = _percall.init_signature(LoopDetector)  # type: ignore[attr-defined]

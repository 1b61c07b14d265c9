"""What would the detector have said about every call of a recorded trace? (SPEC §7)

``scan`` answers, for each call of a trace, the verdict ``LoopDetector.check``
would have returned just before it, with every earlier call of its scope
recorded (``record_call`` then ``record_outcome``); ``sweep`` answers it once
per value of one setting. The trace is fingerprinted into a ``CallTable``
(``_table``), counted with whole-array numpy operations (``_kernels``) and
judged by the verdict table (``loopcore._rules``) in a ``ScanResult`` (``_result``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._config import LoopDetectionConfig, coerce_config, with_setting
from .._outcome import Normalizer
from ._kernels import Stats, scope_index, stats
from ._result import ScanResult
from ._table import CallTable, CallTableBuilder

__all__ = ["scan", "sweep"]


def _as_table(
    events: Iterable[Mapping[str, Any]] | CallTable,
    normalizers: Mapping[str, Normalizer] | None,
    send_tools: Iterable[str],
) -> CallTable:
    if isinstance(events, CallTable):
        return events
    if isinstance(events, (str, bytes)) or not isinstance(events, Iterable):
        raise TypeError(
            f"events: expected an iterable of event mappings or a CallTable, "
            f"got {type(events).__name__}"
        )
    builder = CallTableBuilder(normalizers=normalizers, send_tools=send_tools)
    for number, event in enumerate(events):
        try:
            builder.add_event(event)
        except ValueError as exc:
            raise type(exc)(f"events[{number}].{exc}") from None
    return builder.build()


def scan(
    events: Iterable[Mapping[str, Any]] | CallTable,
    config: LoopDetectionConfig | Mapping[str, Any] | None = None,
    *,
    normalizers: Mapping[str, Normalizer] | None = None,
    send_tools: Iterable[str] = (),
) -> ScanResult:
    """The verdict ``LoopDetector.check`` would have returned before every call of a trace.

    ``events`` is a ``CallTable`` or an iterable of mappings with ``tool``,
    ``args``, ``result`` or ``error``, and optionally ``tool_call_id``,
    ``session``, ``run_id`` and ``ts``; a mapping with ``"type": "compaction"``
    (and the scope fields) marks a context compaction in that scope. A
    malformed event raises ``EventError`` naming its index and field.
    """
    config = coerce_config(config)
    table = _as_table(events, normalizers, send_tools)
    window = config.post_compaction_guard.window_size
    index = scope_index(table)
    return ScanResult(table, config, stats(table, config.history_size, window, index), index)


def sweep(
    events: Iterable[Mapping[str, Any]] | CallTable,
    config: LoopDetectionConfig | Mapping[str, Any] | None,
    setting: str,
    values: Sequence[object],
    *,
    normalizers: Mapping[str, Normalizer] | None = None,
    send_tools: Iterable[str] = (),
) -> list[tuple[object, ScanResult]]:
    """``scan`` once per value of one setting (dotted camelCase, e.g. ``warningThreshold``).

    With ``config`` a mapping, each value is laid over it as written, so the
    result for a value is ``scan(events, {**config, setting: value})``.

    The trace is fingerprinted once, and the counts are computed once per
    distinct ``historySize`` and guard window; only the verdict table runs per value.
    """
    coerce_config(config)  # a bad base fails here, before any fingerprinting
    # A mapping is laid under each value as written, before ordering repairs; a
    # LoopDetectionConfig has been repaired already (see ``with_settings``).
    base = config if isinstance(config, LoopDetectionConfig) else dict(config or {})
    table = _as_table(events, normalizers, send_tools)
    cache: dict[tuple[int, int], Stats] = {}
    index = scope_index(table)  # one scope index for every result's summaries
    out = []
    for value in values:
        swept = with_setting(base, setting, value)
        shape = (swept.history_size, swept.post_compaction_guard.window_size)
        if shape not in cache:
            cache[shape] = stats(table, *shape, index)
        out.append((value, ScanResult(table, swept, cache[shape], index)))
    return out

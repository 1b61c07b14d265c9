"""What would loop detection have said about the runs of one trace file? ``replay_lines``.

The work of ``loopcore replay`` on one file, as a pure function of the file's
lines: read them (any format ``loopcore.formats`` reads), scan every call
(``scan``), and return one summary per run, as plain JSON-ready values. Any
engine that can map a function over files (``loopcore.batch.dask``, Spark, a
job queue) can then replay a fleet's traces; the summaries of many files are
concatenated, in file order.

A run is a scope of this file: a run whose calls are spread over several
files is, here, one run per file (``loopcore replay`` given the files together
would join them).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from .._config import LoopDetectionConfig

__all__ = ["replay_lines"]


def _config(config: LoopDetectionConfig | Mapping[str, Any] | None) -> LoopDetectionConfig:
    if isinstance(config, LoopDetectionConfig):
        return config
    if config is None:
        return LoopDetectionConfig.from_mapping({})
    if isinstance(config, Mapping):
        return LoopDetectionConfig.from_mapping(config)
    raise TypeError(
        f"config: expected a LoopDetectionConfig or a mapping, got {type(config).__name__}"
    )


def replay_lines(
    lines: Iterable[bytes | str],
    config: LoopDetectionConfig | Mapping[str, Any] | None = None,
    *,
    path: str = "<lines>",
    input_format: str | None = None,
    max_line_bytes: int | None = None,
    strict: bool = False,
    err: TextIO | None = None,
) -> list[dict[str, Any]]:
    """One summary per run of the file whose lines these are, in order of each run's first call.

    Each summary is the run as ``loopcore replay --format json`` writes it in
    ``runs`` (``file``, ``session``, ``run_id``, ``calls``, ``first_warning``,
    ``first_block``, ``aborted``, ``detectors``, ``saved``); a hit's ``index``
    counts the file's calls, its ``file`` is ``path``. ``lines`` are bytes or
    UTF-8 text, with or without line ends (a gzip file may be given whole, as
    one item). ``config`` is a ``LoopDetectionConfig`` or its mapping (the
    OpenClaw ``tools.loopDetection`` block; empty: detection off, as OpenClaw
    ships it). Malformed lines are skipped, reported on ``err`` when it is given
    (with ``strict``, the first raises ``loopcore.formats.InputError``).
    """
    from ..cli.render import run_json
    from ..cli.report import Report
    from ..formats import MAX_LINE_BYTES
    from ..formats._load import read_lines
    from ._scan import scan

    settings = _config(config)
    traces = read_lines(
        lines,
        path,
        strict=strict,
        err=err if err is not None else io.StringIO(),
        max_line_bytes=MAX_LINE_BYTES if max_line_bytes is None else max_line_bytes,
        input_format=input_format,
    )
    if not len(traces.table):
        return []
    report = Report(traces, scan(traces.table, settings))
    return [run_json(run) for run in report.runs()]

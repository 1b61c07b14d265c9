"""How is a replay shown? The operator's table, and JSON / CSV for a pipeline.

Tool arguments and results are never printed: they can hold secrets. Verdict
messages name only tools and counts.

Text taken from a trace (tool names, session and run ids, file names) goes
into the table through ``printable``: a control character in it is written as
an escape, so it can neither forge a report line nor drive the terminal. JSON
is written with non-finite numbers as strings (``"inf"``), never as the
``Infinity`` / ``NaN`` tokens JSON does not have; CSV cells are raw text that
the csv module quotes, except lone surrogates, which no UTF-8 output can hold
(written as backslash escapes).
"""

from __future__ import annotations

import csv
import json
import math
import re
import textwrap
from collections.abc import Hashable, Sequence
from typing import Any, TextIO

import numpy as np

from .. import IMPLEMENTATION
from .._config import LoopDetectionConfig, config_mapping
from .._rules import DETECTORS, LEVELS
from ..formats import Traces
from ..formats._text import printable
from .options import Sweep
from .report import Hit, Report, RunReport, Tally, tally

__all__ = [
    "CSV_COLUMNS",
    "MESSAGE_WIDTH",
    "plural",
    "write_csv",
    "write_json",
    "write_sweep",
    "write_table",
]

#: Verdict messages in the table are cut to their first sentence, or this many characters.
MESSAGE_WIDTH = 160


def _flat_settings(config: LoopDetectionConfig) -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in config_mapping(config).items():
        if isinstance(value, dict):
            flat.update({f"{key}.{inner}": v for inner, v in value.items()})
        else:
            flat[key] = value
    return flat


def _json_text(value: object) -> str:
    return json.dumps(value) if value is None or isinstance(value, bool) else str(value)


def _summary(traces: Traces, config: LoopDetectionConfig) -> dict[str, Any]:
    table = traces.table
    return {
        "files": [
            {
                "path": f.path,
                "format": f.format,
                "lines": f.lines,
                "calls": f.calls,
                "skipped_lines": f.skipped,
                "unanswered_calls": f.unanswered,
                "results_without_call": f.orphan_results,
            }
            for f in traces.files
        ],
        "calls": len(table),
        "runs": int(np.count_nonzero(np.bincount(table.scope, minlength=len(table.scopes)))),
        "skipped_lines": traces.skipped,
        "unanswered_calls": traces.unanswered,
        "results_without_call": traces.orphan_results,
        "core": IMPLEMENTATION,
        "detection_enabled": config.enabled is True,
        "settings": config_mapping(config),
    }


def plural(count: int, word: str) -> str:
    """``1 call``, ``2 calls``: a count with its noun, thousands separated."""
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _header(traces: Traces, config: LoopDetectionConfig, out: TextIO) -> None:
    summary = _summary(traces, config)
    formats = sorted({f.format for f in traces.files})
    print(
        f"loopcore replay: {plural(len(traces.files), 'file')} ({', '.join(formats) or '-'}), "
        f"{plural(summary['calls'], 'call')} in {plural(summary['runs'], 'run')}, "
        f"{plural(traces.skipped, 'malformed line')} skipped; core: {IMPLEMENTATION}",
        file=out,
    )
    if traces.unanswered or traces.orphan_results:
        print(
            f"transcripts: {plural(traces.unanswered, 'tool call')} never answered "
            f"(replayed without an outcome), {plural(traces.orphan_results, 'tool result')} "
            "answering no call",
            file=out,
        )
    settings = " ".join(f"{k}={_json_text(v)}" for k, v in _flat_settings(config).items())
    wrapped = textwrap.fill(settings, 100, initial_indent="settings: ", subsequent_indent=" " * 10)
    print(wrapped, file=out)
    off = None
    if config.enabled is None:
        off = (
            "detection: OFF (enabled is not set): no warnings or blocks are reported, only the "
            "post-compaction guard ran; add --enable to see what the detectors would have done"
        )
    elif config.enabled is False:
        off = (
            "detection: OFF (enabled: false, which also turns off the post-compaction guard); "
            "add --enable to see what the detectors would have done"
        )
    if off:
        print(textwrap.fill(off, 100, subsequent_indent=" " * 11), file=out)


def _cell(hit: Hit | None) -> str:
    if hit is None:
        return "-"
    return f"#{hit.call} {hit.detector} ({hit.count})"


def _short(message: str | None) -> str:
    text = " ".join((message or "").split())
    end = text.find(". ")
    if 0 < end < MESSAGE_WIDTH:
        return text[: end + 1]
    return text if len(text) <= MESSAGE_WIDTH else text[: MESSAGE_WIDTH - 1] + "…"


def _session_text(session: Hashable) -> str:
    return "-" if session is None else printable(str(session))


def _run_text(run_id: str | None) -> str:
    return printable(run_id) if run_id else "-"


def _columns(rows: Sequence[Sequence[str]], right: set[int], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip(), file=out)


def write_table(
    report: Report, config: LoopDetectionConfig, runs: list[RunReport], out: TextIO
) -> None:
    """The operator's report: the header, the flagged runs, why each stopped, the totals."""
    traces = report.traces
    _header(traces, config, out)
    flagged = [r for r in runs if r.flagged]
    print(file=out)
    if not flagged:
        print("no run would have been warned, blocked or aborted", file=out)
    else:
        rows = [
            ("session", "run", "calls", "first warning", "first block", "abort", "saved"),
            *(
                (
                    _session_text(r.session),
                    _run_text(r.run_id),
                    f"{r.calls:,}",
                    _cell(r.first_warning),
                    _cell(r.first_block),
                    f"#{r.aborted.call}" if r.aborted else "-",
                    f"{r.saved:,}",
                )
                for r in flagged
            ),
        ]
        _columns(rows, {2, 6}, out)
        stops = [
            (r, hit)
            for r in flagged
            for hit in (r.first_block, r.aborted)
            if hit is not None and hit.message
        ]
        if stops:
            print("\nwhy each run would have stopped:", file=out)
            for r, hit in stops:
                where = f"{printable(hit.file)}:{hit.line}"
                message = _short(printable(hit.message or ""))  # it names the tool
                print(f"  {_run_text(r.run_id)} #{hit.call} {where}: {message}", file=out)
    totals = tally(report.result)
    calls = len(traces.table)
    share = f" ({totals.calls_saved / calls:.0%})" if calls else ""
    print(
        f"\ntotals: {plural(len(runs), 'run')}: {totals.runs_warned:,} warned, "
        f"{totals.runs_blocked:,} blocked, {totals.runs_aborted:,} aborted by the "
        f"post-compaction guard; {plural(totals.calls_saved, 'call')} of {calls:,} would "
        f"not have been made{share}",
        file=out,
    )


def _hit_json(hit: Hit | None) -> dict[str, Any] | None:
    if hit is None:
        return None
    return {k: v for k, v in hit.__dict__.items() if v is not None or k == "detector"}


def _json_session(session: Hashable) -> object:
    """A session id as JSON has it: a string, a number, a boolean or null (inf is "inf")."""
    if isinstance(session, float):
        return session if math.isfinite(session) else str(session)
    return (
        session if session is None or isinstance(session, (str, int, float, bool)) else str(session)
    )


def _dump(document: object, out: TextIO) -> None:
    # allow_nan=False: a non-finite number that reached the document is a bug, never bad JSON.
    json.dump(document, out, indent=1, allow_nan=False)
    out.write("\n")


def _calls_json(report: Report) -> list[dict[str, Any]]:
    """Every call with a verdict or an abort (the others are the unremarkable majority)."""
    result, traces = report.result, report.traces
    table = traces.table
    picked = np.flatnonzero((result.level > 0) | result.aborted)
    scopes = table.scopes
    names: dict[int, str] = {}
    out = []
    for i in picked.tolist():
        tool_hash = int(table.tool_hash[i])
        tool = names.get(tool_hash) or names.setdefault(tool_hash, table.name(tool_hash))
        session, run_id = scopes[int(table.scope[i])]
        out.append(
            {
                "index": i,
                "file": traces.files[int(traces.file_index[i])].path,
                "line": int(traces.lines[i]),
                "session": _json_session(session),
                "run_id": run_id,
                "call": int(report.pos[i]) + 1,
                "tool": tool,
                "level": LEVELS[int(result.level[i])],
                "detector": DETECTORS[int(result.detector[i])],
                "count": int(result.count[i]),
                "aborted": bool(result.aborted[i]),
            }
        )
    return out


def write_json(
    report: Report, config: LoopDetectionConfig, runs: list[RunReport], out: TextIO
) -> None:
    """The whole report as one JSON document: summary, every run, every call with a verdict."""
    totals = tally(report.result)
    summary = _summary(report.traces, config)
    summary.update(totals.__dict__, would_block=totals.would_block)
    document = {
        "summary": summary,
        "runs": [
            {
                "file": r.file,
                "session": _json_session(r.session),
                "run_id": r.run_id,
                "calls": r.calls,
                "first_warning": _hit_json(r.first_warning),
                "first_block": _hit_json(r.first_block),
                "aborted": _hit_json(r.aborted),
                "detectors": list(r.detectors),
                "saved": r.saved,
            }
            for r in runs
        ],
        "calls": _calls_json(report),
    }
    _dump(document, out)


CSV_COLUMNS = (
    "file",
    "session",
    "run_id",
    "calls",
    "first_warning_call",
    "first_warning_line",
    "first_warning_detector",
    "first_warning_count",
    "first_block_call",
    "first_block_line",
    "first_block_detector",
    "first_block_count",
    "first_block_message",
    "aborted_at_call",
    "aborted_at_line",
    "detectors",
    "saved",
)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _csv_cell(value: object) -> object:
    """A CSV cell as it is, but for lone surrogates in text, which UTF-8 cannot encode."""
    if isinstance(value, str) and _SURROGATE.search(value) is not None:
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def write_csv(runs: list[RunReport], out: TextIO) -> None:
    """One CSV row per run (text cells as read, quoted by the csv module)."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in runs:
        warning, block, abort = r.first_warning, r.first_block, r.aborted
        row = [
            r.file,
            "" if r.session is None else r.session,
            r.run_id or "",
            r.calls,
            *(
                (warning.call, warning.line, warning.detector, warning.count)
                if warning
                else [""] * 4
            ),
            *(
                (block.call, block.line, block.detector, block.count, block.message)
                if block
                else [""] * 5
            ),
            *((abort.call, abort.line) if abort else ("", "")),
            ";".join(r.detectors),
            r.saved,
        ]
        writer.writerow([_csv_cell(value) for value in row])


def write_sweep(
    traces: Traces,
    config: LoopDetectionConfig,
    spec: Sweep,
    rows: list[tuple[int, Tally]],
    fmt: str,
    out: TextIO,
) -> None:
    """One row per swept value: runs warned, blocked and aborted, and calls saved."""
    if fmt == "json":
        document = {
            "summary": _summary(traces, config),
            "setting": spec.setting,
            "sweep": [{"value": value, **t.__dict__} for value, t in rows],
        }
        _dump(document, out)
        return
    if fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(("setting", "value", *Tally.__dataclass_fields__))
        for value, t in rows:
            writer.writerow((spec.setting, value, *t.__dict__.values()))
        return
    _header(traces, config, out)
    first, last = spec.values[0], spec.values[-1]
    step = spec.values[1] - first if len(spec.values) > 1 else 1
    print(
        f"\nsweep of {spec.setting} from {first} to {last}"
        f"{f' step {step}' if step != 1 else ''} ({plural(len(rows), 'value')}), "
        f"over {plural(len(traces.table), 'call')}:",
        file=out,
    )
    table = [
        (spec.setting, "runs warned", "runs blocked", "runs aborted", "calls saved"),
        *(
            (
                str(value),
                f"{t.runs_warned:,}",
                f"{t.runs_blocked:,}",
                f"{t.runs_aborted:,}",
                f"{t.calls_saved:,}",
            )
            for value, t in rows
        ),
    ]
    _columns(table, {0, 1, 2, 3, 4}, out)

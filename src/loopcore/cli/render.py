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
from .report import Hit, Report, RunReport, tally

__all__ = [
    "CSV_COLUMNS",
    "MESSAGE_WIDTH",
    "columns",
    "dump",
    "header",
    "plural",
    "run_json",
    "summary",
    "write_csv",
    "write_json",
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


def summary(traces: Traces, config: LoopDetectionConfig) -> dict[str, Any]:
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


def header(traces: Traces, config: LoopDetectionConfig, out: TextIO) -> None:
    found = summary(traces, config)
    formats = sorted({f.format for f in traces.files})
    print(
        f"loopcore replay: {plural(len(traces.files), 'file')} ({', '.join(formats) or '-'}), "
        f"{plural(found['calls'], 'call')} in {plural(found['runs'], 'run')}, "
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


def _fired(run: RunReport) -> str:
    """Every detector that fired in the run, each with the call where it first did."""
    return ", ".join(f"{name} #{call}" for name, call in run.fired) or "-"


def _session_text(session: Hashable) -> str:
    return "-" if session is None else printable(str(session))


def _run_text(run_id: str | None) -> str:
    return printable(run_id) if run_id else "-"


def columns(rows: Sequence[Sequence[str]], right: set[int], out: TextIO) -> None:
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
    header(traces, config, out)
    flagged = [r for r in runs if r.flagged]
    print(file=out)
    if not flagged:
        print("no run would have been warned, blocked or aborted", file=out)
    else:
        rows = [
            ("session", "run", "calls", "first warning", "first block", "abort", "saved", "fired"),
            *(
                (
                    _session_text(r.session),
                    _run_text(r.run_id),
                    f"{r.calls:,}",
                    _cell(r.first_warning),
                    _cell(r.first_block),
                    f"#{r.aborted.call}" if r.aborted else "-",
                    f"{r.saved:,}",
                    _fired(r),
                )
                for r in flagged
            ),
        ]
        columns(rows, {2, 6}, out)
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
                scope = f"{_session_text(r.session)} {_run_text(r.run_id)}"
                print(f"  {scope} #{hit.call} {where}: {message}", file=out)
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


def dump(document: object, out: TextIO) -> None:
    """Write ``document`` as one compact JSON text, encoded in one pass and written at once."""
    # json.dump would write token by token (and indenting takes the slow encoder);
    # allow_nan=False: a non-finite number that reached the document is a bug, never bad JSON.
    out.write(json.dumps(document, separators=(",", ":"), allow_nan=False) + "\n")


#: One call of the JSON report's ``calls``, as compact JSON (the keys in this order).
_CALL = (
    '{"index":%d,"file":%s,"line":%d,"session":%s,"run_id":%s,"call":%d,"tool":%s,'
    '"level":%s,"detector":%s,"count":%d,"aborted":%s}'
)


def _encoded(value: object) -> str:
    return json.dumps(value, allow_nan=False)


def _calls_text(report: Report) -> str:
    """Every call with a verdict or an abort (the others are the unremarkable majority), as
    the JSON array ``json.dumps`` would write compactly.

    A stuck trace can have a verdict on nearly every call: the text is made row by row from
    the few distinct strings, each encoded once, instead of one dict per call encoded.
    """
    result, traces = report.result, report.traces
    table = traces.table
    picked = np.flatnonzero((result.level > 0) | result.aborted)
    hashes = table.tool_hash[picked].tolist()
    tools = {h: _encoded(table.name(h)) for h in set(hashes)}
    sessions = [_encoded(_json_session(session)) for session, _ in table.scopes]
    run_ids = [_encoded(run_id) for _, run_id in table.scopes]
    paths = [_encoded(f.path) for f in traces.files]
    levels = [_encoded(level) for level in LEVELS]
    detectors = [_encoded(detector) for detector in DETECTORS]
    columns = zip(
        picked.tolist(),
        traces.file_index[picked].tolist(),
        traces.lines[picked].tolist(),
        table.scope[picked].tolist(),
        (report.pos[picked] + 1).tolist(),
        hashes,
        result.level[picked].tolist(),
        result.detector[picked].tolist(),
        result.count[picked].tolist(),
        result.aborted[picked].tolist(),
        strict=True,
    )
    rows = [
        _CALL
        % (
            i,
            paths[file],
            line,
            sessions[scope],
            run_ids[scope],
            call,
            tools[tool],
            levels[level],
            detectors[detector],
            count,
            "true" if aborted else "false",
        )
        for i, file, line, scope, call, tool, level, detector, count, aborted in columns
    ]
    return f"[{','.join(rows)}]"


def run_json(r: RunReport) -> dict[str, Any]:
    """One run as the JSON report's ``runs`` list holds it."""
    return {
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


def write_json(
    report: Report, config: LoopDetectionConfig, runs: list[RunReport], out: TextIO
) -> None:
    """The whole report as one JSON document: summary, every run, every call with a verdict."""
    totals = tally(report.result)
    head = summary(report.traces, config)
    head.update(totals.__dict__, would_block=totals.would_block)
    document = {
        "summary": head,
        "runs": [run_json(r) for r in runs],
    }
    text = json.dumps(document, separators=(",", ":"), allow_nan=False)
    # The calls go last, spliced in as text: still one document, written at once.
    out.write(f'{text[:-1]},"calls":{_calls_text(report)}}}\n')


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

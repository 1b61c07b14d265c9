"""What would loop detection have done on recorded agent traces? ``loopcore replay``.

Reads the traces (``traces.load``), scans every call with the batch scan
(``loopcore.scan``, or ``loopcore.sweep`` over one setting) and reports per
run, in a table for an operator or as JSON / CSV for a pipeline. The exit
status gates a pipeline: 0 when nothing would have been blocked or aborted,
1 when something would, 2 for usage and input errors.

Tool arguments and results are never printed: they can hold secrets. Verdict
messages name only tools and counts.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import logging
import re
import textwrap
import traceback
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np

from .. import IMPLEMENTATION
from .._config import (
    ConfigError,
    LoopDetectionConfig,
    config_mapping,
    load_block,
    overlay,
    with_setting,
)
from .._scan import DETECTORS, LEVELS, ScanResult, ScopeSummary, scan, sweep
from .traces import InputError, Traces, load

__all__ = ["add_parser", "run"]

#: More values than this in one ``--sweep`` is almost certainly a typo in START:STOP.
MAX_SWEEP_VALUES = 1000
#: Verdict messages in the table are cut to their first sentence, or this many characters.
MESSAGE_WIDTH = 160


class UsageError(Exception):
    """A bad option value; the message names the option."""


def add_parser(commands: Any) -> None:
    """Add ``replay`` to the ``loopcore`` sub-commands."""
    replay = commands.add_parser(
        "replay",
        help="what would loop detection have done on recorded traces?",
        description=(
            "Replay recorded tool calls (loopcore JSONL events or pi / OpenClaw session "
            "transcripts, .gz or plain, files or directories) through loop detection and "
            "report, per run, what would have been warned, blocked or aborted. Exit status: "
            "0 nothing would block, 1 something would block or abort, 2 usage or input error."
        ),
    )
    replay.add_argument("traces", nargs="+", metavar="TRACE", help="trace file or directory")
    replay.add_argument("--config", metavar="FILE", help="an OpenClaw config file (JSON5)")
    replay.add_argument("--agent", metavar="ID", help="use this agent's override from --config")
    replay.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one setting, e.g. warningThreshold=8 or detectors.pingPong=false",
    )
    replay.add_argument(
        "--enable",
        action="store_true",
        help="treat detection as enabled, to ask what it would have done",
    )
    replay.add_argument(
        "--format", choices=("table", "json", "csv"), default="table", help="output format"
    )
    replay.add_argument(
        "--sweep",
        metavar="KEY=START:STOP[:STEP]",
        help="evaluate every value of one integer setting from START to STOP inclusive",
    )
    replay.add_argument(
        "--plot", metavar="FILE.png", help="draw a timeline of every run's verdicts (matplotlib)"
    )
    replay.add_argument(
        "--strict", action="store_true", help="stop at the first malformed line (exit status 2)"
    )


# -- options ------------------------------------------------------------------------------------


def _setting_value(text: str) -> object:
    """``8`` → 8, ``true`` → True; anything that is not JSON stays a string (and is rejected)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _config(args: argparse.Namespace) -> dict[str, Any]:
    """The settings block: ``--config`` (and ``--agent``), every ``--set``, then ``--enable``.

    Kept as a block, before ordering repairs: the overrides (and a swept value)
    are laid over the settings as written, so their order does not matter and
    only the final config logs a repair.
    """
    if args.agent is not None and args.config is None:
        raise UsageError("--agent: needs --config FILE")
    block = load_block(args.config, agent_id=args.agent) if args.config is not None else {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set: expected KEY=VALUE, got {item!r}")
        try:
            block = overlay(block, {key.strip(): _setting_value(value.strip())})
        except ConfigError as exc:
            raise UsageError(f"--set {item}: {exc}") from None
    if args.enable:
        block = overlay(block, {"enabled": True})
    return block


_SWEEP = re.compile(r"^\s*([^=\s]+)\s*=\s*(-?\d+):(-?\d+)(?::(-?\d+))?\s*$")


@dataclass(frozen=True)
class Sweep:
    setting: str
    values: list[int]


def _sweep(text: str, block: dict[str, Any]) -> Sweep:
    match = _SWEEP.match(text)
    if match is None:
        raise UsageError(f"--sweep: expected KEY=START:STOP[:STEP], got {text!r}")
    key = match.group(1)
    start, stop = int(match.group(2)), int(match.group(3))
    step = int(match.group(4)) if match.group(4) is not None else 1
    if step < 1:
        raise UsageError(f"--sweep: STEP must be a positive integer, got {step}")
    if start > stop:
        raise UsageError(f"--sweep: START ({start}) is greater than STOP ({stop})")
    values = list(range(start, stop + 1, step))
    if len(values) > MAX_SWEEP_VALUES:
        raise UsageError(
            f"--sweep: {len(values)} values is more than {MAX_SWEEP_VALUES}; use a larger STEP"
        )
    for value in values:  # every value checked (and its repairs logged) before reading input
        try:
            with_setting(block, key, value)
        except ConfigError as exc:
            raise UsageError(f"--sweep {key}={value}: {exc}") from None
    return Sweep(key, values)


# -- per-run report -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    """One notable call of a run: where it is and what was decided."""

    call: int  # 1-based position within its run
    index: int  # position in the whole trace
    file: str
    line: int
    tool: str
    detector: str | None
    count: int
    message: str | None = None


@dataclass(frozen=True)
class RunReport:
    """What the replay found in one run (one scope)."""

    file: str  # where the run's first call was read
    session: Hashable
    run_id: str | None
    calls: int
    first_warning: Hit | None
    first_block: Hit | None
    aborted: Hit | None
    detectors: tuple[str, ...]
    saved: int

    @property
    def flagged(self) -> bool:
        return bool(self.first_warning or self.first_block or self.aborted)


class _Report:
    """Turns trace indices into hits (call number, file, line, tool)."""

    def __init__(self, traces: Traces, result: ScanResult) -> None:
        self.traces = traces
        self.result = result
        self.pos = result.positions()

    def hit(self, index: int | None, message: bool = False) -> Hit | None:
        if index is None:
            return None
        traces, result = self.traces, self.result
        table = traces.table
        return Hit(
            call=int(self.pos[index]) + 1,
            index=index,
            file=traces.files[int(traces.file_index[index])].path,
            line=int(traces.lines[index]),
            tool=table.name(int(table.tool_hash[index])),
            detector=DETECTORS[int(result.detector[index])],
            count=int(result.count[index]),
            message=result.verdict(index).message if message else None,
        )

    def abort(self, index: int | None) -> Hit | None:
        hit = self.hit(index)
        if hit is None:
            return None
        window = self.result.config.post_compaction_guard.window_size
        return dataclasses.replace(
            hit,
            detector="compaction_loop_persisted",
            count=window,
            message=(
                f"ABORT: compaction_loop_persisted: {hit.tool} repeated the same call with "
                f"the same result {window} times after the context compaction"
            ),
        )

    def runs(self) -> list[RunReport]:
        table = self.traces.table
        summaries: list[ScopeSummary] = self.result.scopes()
        # scopes() lists the scopes with calls in order of their first call.
        firsts = np.sort(np.unique(table.scope, return_index=True)[1])
        out = []
        for summary, first in zip(summaries, firsts.tolist(), strict=True):
            out.append(
                RunReport(
                    file=self.traces.files[int(self.traces.file_index[first])].path,
                    session=summary.session,
                    run_id=summary.run_id,
                    calls=summary.calls,
                    first_warning=self.hit(summary.first_warning),
                    first_block=self.hit(summary.first_block, message=True),
                    aborted=self.abort(summary.aborted_at),
                    detectors=summary.detectors,
                    saved=summary.saved,
                )
            )
        return out


@dataclass(frozen=True)
class Tally:
    """How many runs a configuration warns, blocks and aborts, and the calls it saves."""

    runs_warned: int
    runs_blocked: int
    runs_aborted: int
    calls_saved: int

    @property
    def would_block(self) -> bool:
        return bool(self.runs_blocked or self.runs_aborted)


def tally(result: ScanResult) -> Tally:
    """The ``Tally`` of a scan (whole-array totals: cheap for every value of a sweep)."""
    totals = result.totals()
    return Tally(totals.runs_warned, totals.runs_blocked, totals.runs_aborted, totals.calls_saved)


# -- output -------------------------------------------------------------------------------------


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


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _header(traces: Traces, config: LoopDetectionConfig, out: TextIO) -> None:
    summary = _summary(traces, config)
    formats = sorted({f.format for f in traces.files})
    print(
        f"loopcore replay: {_plural(len(traces.files), 'file')} ({', '.join(formats) or '-'}), "
        f"{_plural(summary['calls'], 'call')} in {_plural(summary['runs'], 'run')}, "
        f"{_plural(traces.skipped, 'malformed line')} skipped; core: {IMPLEMENTATION}",
        file=out,
    )
    if traces.unanswered or traces.orphan_results:
        print(
            f"transcripts: {_plural(traces.unanswered, 'tool call')} never answered "
            f"(replayed without an outcome), {_plural(traces.orphan_results, 'tool result')} "
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
    return "-" if session is None else str(session)


def _columns(rows: Sequence[Sequence[str]], right: set[int], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip(), file=out)


def _table(
    report: _Report, config: LoopDetectionConfig, runs: list[RunReport], out: TextIO
) -> None:
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
                    r.run_id or "-",
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
                where = f"{hit.file}:{hit.line}"
                print(f"  {r.run_id or '-'} #{hit.call} {where}: {_short(hit.message)}", file=out)
    totals = tally(report.result)
    calls = len(traces.table)
    share = f" ({totals.calls_saved / calls:.0%})" if calls else ""
    print(
        f"\ntotals: {_plural(len(runs), 'run')}: {totals.runs_warned:,} warned, "
        f"{totals.runs_blocked:,} blocked, {totals.runs_aborted:,} aborted by the "
        f"post-compaction guard; {_plural(totals.calls_saved, 'call')} of {calls:,} would "
        f"not have been made{share}",
        file=out,
    )


def _hit_json(hit: Hit | None) -> dict[str, Any] | None:
    if hit is None:
        return None
    return {k: v for k, v in hit.__dict__.items() if v is not None or k == "detector"}


def _json_session(session: Hashable) -> object:
    return (
        session if session is None or isinstance(session, (str, int, float, bool)) else str(session)
    )


def _calls_json(report: _Report) -> list[dict[str, Any]]:
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


def _json(report: _Report, config: LoopDetectionConfig, runs: list[RunReport], out: TextIO) -> None:
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
    json.dump(document, out, indent=1)
    out.write("\n")


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


def _csv(runs: list[RunReport], out: TextIO) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in runs:
        warning, block, abort = r.first_warning, r.first_block, r.aborted
        writer.writerow(
            [
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
        )


def _sweep_output(
    traces: Traces,
    config: LoopDetectionConfig,
    spec: Sweep,
    rows: list[tuple[int, Tally]],
    fmt: str,
    out: TextIO,
) -> None:
    if fmt == "json":
        document = {
            "summary": _summary(traces, config),
            "setting": spec.setting,
            "sweep": [{"value": value, **t.__dict__} for value, t in rows],
        }
        json.dump(document, out, indent=1)
        out.write("\n")
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
        f"{f' step {step}' if step != 1 else ''} ({_plural(len(rows), 'value')}), "
        f"over {_plural(len(traces.table), 'call')}:",
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


# -- the command --------------------------------------------------------------------------------


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``loopcore replay``: the exit status (0 nothing would block, 1 something would, 2 error)."""
    try:
        return _run(args, out, err)
    except (BrokenPipeError, KeyboardInterrupt):
        raise
    except Exception:
        # A bug, not a verdict: exit 1 would read as "something would block".
        traceback.print_exc(file=err)
        print("loopcore replay: internal error (please report it)", file=err)
        return 2


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        if args.plot is not None:
            if args.sweep is not None:
                raise UsageError(
                    "--plot: draws one configuration; it cannot be combined with --sweep"
                )
            from .plot import check_target, require_matplotlib

            require_matplotlib()
            check_target(args.plot)  # before the replay, not after its whole report
        block = _config(args)
        config = LoopDetectionConfig.from_mapping(block)
        spec = _sweep(args.sweep, block) if args.sweep is not None else None
        traces = load(args.traces, strict=args.strict, err=err)
    except (UsageError, ConfigError, InputError) as exc:
        print(f"loopcore replay: {exc}", file=err)
        return 2
    if args.format != "table" and traces.skipped:
        print(f"loopcore replay: {_plural(traces.skipped, 'malformed line')} skipped", file=err)

    if spec is not None:
        library = logging.getLogger("loopcore")
        level = library.level
        library.setLevel(logging.ERROR)  # each value's repairs were logged once, when checked
        try:
            results = sweep(traces.table, block, spec.setting, spec.values)
        finally:
            library.setLevel(level)
        rows = [
            (value, tally(result)) for value, (_, result) in zip(spec.values, results, strict=True)
        ]
        _sweep_output(traces, config, spec, rows, args.format, out)
        return 1 if any(t.would_block for _, t in rows) else 0

    result = scan(traces.table, config)
    report = _Report(traces, result)
    runs = report.runs()
    if args.format == "json":
        _json(report, config, runs, out)
    elif args.format == "csv":
        _csv(runs, out)
    else:
        _table(report, config, runs, out)
    if args.plot is not None:
        from .plot import draw

        try:
            draw(args.plot, report, runs)
        except OSError as exc:
            print(
                f"loopcore replay: --plot: cannot write {args.plot}: {exc.strerror or exc}",
                file=err,
            )
            return 2
    return 1 if tally(result).would_block else 0

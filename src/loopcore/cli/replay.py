"""What would loop detection have done on recorded agent traces? ``loopcore replay``.

Reads the traces (``loopcore.formats.load``), scans every call with the batch
scan (``loopcore.batch.scan``, or ``sweep`` over one setting) and reports per
run (``report``), in a table for an operator or as JSON / CSV for a pipeline
(``render``); the options are read in ``options``. The exit status gates a
pipeline: 0 when nothing would have been blocked or aborted, 1 when something
would, 2 for usage and input errors.

Tool arguments and results are never printed: they can hold secrets. Verdict
messages name only tools and counts.
"""

from __future__ import annotations

import argparse
import logging
import traceback
from typing import TextIO

from .._config import ConfigError, LoopDetectionConfig
from ..batch import scan, sweep
from ..formats import InputError, Traces, load
from ..formats._text import printable
from .options import INPUT_FORMATS, UsageError, config_block, jobs, max_line_bytes, parse_sweep
from .render import plural, write_csv, write_json, write_table
from .report import Report, tally
from .sweep import sweep_rows, write_sweep

__all__ = ["run"]


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


def _not_a_trace(traces: Traces, forced: str | None) -> str:
    """Why an input that held lines, none of which gave a tool call, is not replayed."""
    lines = sum(f.lines - f.blank for f in traces.files)
    what = f"{plural(lines, 'line')}, {traces.skipped:,} malformed"
    if len(traces.files) == 1:
        where = f"{printable(traces.files[0].path)} ({what})"
    else:
        where = f"{plural(len(traces.files), 'file')} ({what})"
    formats = f"read as {forced}" if forced else f"formats read: {', '.join(INPUT_FORMATS)}"
    return f"no tool call could be read from {where}: not a trace ({formats})"


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
        block = config_block(args)
        config = LoopDetectionConfig.from_mapping(block)
        spec = parse_sweep(args.sweep, block) if args.sweep is not None else None
        limit = max_line_bytes(args)
        workers = jobs(args)
        traces = load(
            args.traces,
            strict=args.strict,
            err=err,
            max_line_bytes=limit,
            input_format=args.input_format,
            jobs=workers,
        )
    except (UsageError, ConfigError, InputError) as exc:
        # One line: a value or a file name with a newline in it is escaped.
        print(f"loopcore replay: {printable(str(exc))}", file=err)
        return 2
    if not len(traces.table) and traces.held:
        print(f"loopcore replay: {_not_a_trace(traces, args.input_format)}", file=err)
        return 2
    if args.format != "table" and traces.skipped:
        print(f"loopcore replay: {plural(traces.skipped, 'malformed line')} skipped", file=err)

    if spec is not None:
        library = logging.getLogger("loopcore")
        level = library.level
        library.setLevel(logging.ERROR)  # each value's repairs were logged once, when checked
        try:
            results = sweep(traces.table, block, spec.setting, spec.values)
        finally:
            library.setLevel(level)
        rows = sweep_rows(spec, block, results)
        write_sweep(traces, config, spec, rows, args.format, out, err)
        return 1 if any(row.tally.would_block for row in rows) else 0

    result = scan(traces.table, config, jobs=workers)
    report = Report(traces, result)
    runs = report.runs()
    if args.format == "json":
        write_json(report, config, runs, out)
    elif args.format == "csv":
        write_csv(runs, out)
    else:
        write_table(report, config, runs, out)
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

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
from ..formats import InputError, load
from ..formats._text import printable
from .options import UsageError, config_block, max_line_bytes, parse_sweep
from .render import plural, write_csv, write_json, write_sweep, write_table
from .report import Report, tally

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
        traces = load(args.traces, strict=args.strict, err=err, max_line_bytes=limit)
    except (UsageError, ConfigError, InputError) as exc:
        # One line: a value or a file name with a newline in it is escaped.
        print(f"loopcore replay: {printable(str(exc))}", file=err)
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
        rows = [
            (value, tally(result)) for value, (_, result) in zip(spec.values, results, strict=True)
        ]
        write_sweep(traces, config, spec, rows, args.format, out)
        return 1 if any(t.would_block for _, t in rows) else 0

    result = scan(traces.table, config)
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

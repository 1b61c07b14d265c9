"""Which replay was asked for? ``loopcore replay``'s options, ``--set`` and ``--sweep``.

The settings are kept as a block, as written: ``--config`` (and ``--agent``),
every ``--set``, then ``--enable``; a swept value is laid over it the same way.
A bad option value is a ``UsageError`` naming the option (exit status 2),
one line whatever the value: a number of thousands of digits, JSON nested
thousands deep, a ``--sweep`` of 10**15 values (counted, never listed).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from dataclasses import dataclass
from typing import Any

from .._config import ConfigError, load_block, overlay, with_setting

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "INPUT_FORMATS",
    "MAX_DIGITS",
    "MAX_SWEEP_VALUES",
    "Sweep",
    "UsageError",
    "add_parser",
    "config_block",
    "default_jobs",
    "jobs",
    "max_line_bytes",
    "parse_sweep",
]

#: More values than this in one ``--sweep`` is almost certainly a typo in START:STOP
#: (and each value is checked, and scanned, one by one).
MAX_SWEEP_VALUES = 1000
#: Digits an integer option value (``--sweep`` bounds and step, ``--max-line-bytes``, an
#: integer ``--set``) may have: far past any setting's bound, still a machine-sized integer.
MAX_DIGITS = 18
#: How much of a bad option value an error message quotes.
SHOWN = 60
#: ``--max-line-bytes`` when it is not given: ``loopcore.formats.MAX_LINE_BYTES`` (64 MiB),
#: spelled out so that reading the command line imports neither the readers nor numpy.
DEFAULT_MAX_LINE_BYTES = 64 << 20
#: ``--input-format`` choices: ``loopcore.formats.FORMATS``, spelled out for the same reason.
INPUT_FORMATS = ("loopcore", "pi", "openai-chat", "openai-responses", "anthropic")


class UsageError(Exception):
    """A bad option value; the message names the option."""


def add_parser(commands: Any, version: str) -> None:
    """Add ``replay`` to the ``loopcore`` sub-commands (``version``: what ``--version`` prints)."""
    replay = commands.add_parser(
        "replay",
        help="what would loop detection have done on recorded traces?",
        description=(
            "Replay recorded tool calls (loopcore JSONL events, pi / OpenClaw session "
            "transcripts, OpenAI Chat Completions, OpenAI Responses or Anthropic Messages "
            "conversations; .gz or plain, files or directories) through loop detection and "
            "report, per run, what would have been warned, blocked or aborted. Exit status: "
            "0 nothing would block, 1 something would block or abort, 2 usage or input error "
            "(also when no tool call could be read from the input)."
        ),
    )
    replay.add_argument("--version", action="version", version=version)
    replay.add_argument("traces", nargs="+", metavar="TRACE", help="trace file or directory")
    replay.add_argument(
        "--input-format",
        choices=INPUT_FORMATS,
        help="read every trace in this format (default: detected per file)",
    )
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
    replay.add_argument(
        "--max-line-bytes",
        metavar="N",
        help=(
            "a line longer than N bytes is malformed: reported and skipped without being "
            f"held in memory (default {DEFAULT_MAX_LINE_BYTES}, 64 MiB)"
        ),
    )
    replay.add_argument(
        "--jobs",
        metavar="N",
        help=(
            "read the traces in N worker processes, by file and by pieces of a large "
            "loopcore file; the output is the same (default: the number of cores; 1 reads "
            "in this process)"
        ),
    )


def _shown(text: str) -> str:
    """An option value as an error message quotes it: cut past ``SHOWN`` characters."""
    return text if len(text) <= SHOWN else f"{text[: SHOWN - 1]}…"


def _integer(text: str, what: str) -> int:
    """A string of digits (with an optional minus) as an int, refusing a huge one unparsed."""
    digits = text.lstrip("-")
    if len(digits) > MAX_DIGITS:
        raise UsageError(f"{what} has {len(digits)} digits; at most {MAX_DIGITS} are accepted")
    return int(text)


def max_line_bytes(args: argparse.Namespace) -> int:
    """``--max-line-bytes``: a positive number of bytes (default ``DEFAULT_MAX_LINE_BYTES``)."""
    text = args.max_line_bytes
    if text is None:
        return DEFAULT_MAX_LINE_BYTES
    if re.fullmatch(r"\s*[0-9]+\s*", text) is None or not text.strip().strip("0"):
        raise UsageError(
            f"--max-line-bytes: expected a positive integer (bytes), got {_shown(text)!r}"
        )
    return _integer(text.strip(), "--max-line-bytes: N")


def default_jobs() -> int:
    """The cores this process may run on (``--jobs`` when it is not given)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def jobs(args: argparse.Namespace) -> int:
    """``--jobs``: a positive number of worker processes (default ``default_jobs()``)."""
    text = getattr(args, "jobs", None)
    if text is None:
        return default_jobs()
    if re.fullmatch(r"\s*[0-9]+\s*", text) is None or not text.strip().strip("0"):
        raise UsageError(f"--jobs: expected a positive integer, got {_shown(text)!r}")
    return _integer(text.strip(), "--jobs: N")


def _setting_value(text: str) -> object:
    """``8`` → 8, ``true`` → True; anything that is not JSON stays a string (and is rejected)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def config_block(args: argparse.Namespace) -> dict[str, Any]:
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
            raise UsageError(f"--set: expected KEY=VALUE, got {_shown(item)!r}")
        text = value.strip()
        if re.fullmatch(r"-?[0-9]+", text):
            _integer(text, f"--set {_shown(item)}: the number")  # no setting takes a huge one
        try:
            block = overlay(block, {key.strip(): _setting_value(text)})
        except ConfigError as exc:
            raise UsageError(f"--set {_shown(item)}: {exc}") from None
        except RecursionError:  # JSON nested thousands deep
            raise UsageError(f"--set {_shown(item)}: the value is nested too deeply") from None
    if args.enable:
        block = overlay(block, {"enabled": True})
    return block


_SWEEP = re.compile(r"^\s*([^=\s]+)\s*=\s*(-?\d+):(-?\d+)(?::(-?\d+))?\s*$")


@dataclass(frozen=True)
class Sweep:
    setting: str
    values: list[int]


def parse_sweep(text: str, block: dict[str, Any]) -> Sweep:
    match = _SWEEP.match(text)
    if match is None:
        raise UsageError(f"--sweep: expected KEY=START:STOP[:STEP], got {_shown(text)!r}")
    key = match.group(1)
    start = _integer(match.group(2), "--sweep: START")
    stop = _integer(match.group(3), "--sweep: STOP")
    step = _integer(match.group(4), "--sweep: STEP") if match.group(4) is not None else 1
    if step < 1:
        raise UsageError(f"--sweep: STEP must be a positive integer, got {step}")
    if start > stop:
        raise UsageError(f"--sweep: START ({start}) is greater than STOP ({stop})")
    count = (stop - start) // step + 1  # counted before any value is made
    if count > MAX_SWEEP_VALUES:
        raise UsageError(
            f"--sweep: {count} values is more than {MAX_SWEEP_VALUES}; use a larger STEP"
        )
    values = list(range(start, stop + 1, step))
    for value in values:  # every value checked (and its repairs logged) before reading input
        try:
            with_setting(block, key, value)
        except ConfigError as exc:
            raise UsageError(f"--sweep {_shown(key)}={value}: {exc}") from None
    return Sweep(key, values)

"""The ``loopcore`` command line: ``loopcore demo``, ``replay`` and ``mcp-proxy``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import __version__
from .mcp_proxy import add_parser as add_mcp_proxy
from .options import add_parser as add_replay

__all__ = ["NEEDS_MCP", "NEEDS_NUMPY", "main"]

#: What ``loopcore replay`` says when the ``cli`` extra is missing (the scan needs numpy).
NEEDS_NUMPY = "needs numpy, which comes with the cli extra: pip install 'loopcore[cli]'"
#: What ``loopcore mcp-proxy`` says when the ``mcp`` extra is missing.
NEEDS_MCP = "needs mcp, which comes with the mcp extra: pip install 'loopcore[mcp]'"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopcore", description="Tool-loop detection for LLM agent gateways."
    )
    version = f"loopcore {__version__}"
    parser.add_argument("--version", action="version", version=version)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser(
        "demo", help="simulate a looping agent and show warnings, blocks and a compaction abort"
    )
    demo.add_argument(
        "--no-color", action="store_true", help="plain output (also when stdout is not a terminal)"
    )
    add_replay(commands, version)
    add_mcp_proxy(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "demo":
            from .demo import run

            return run(color=not args.no_color)
        if args.command == "replay":
            try:
                from .replay import run as replay
            except ImportError as exc:
                if (exc.name or "").partition(".")[0] != "numpy":
                    raise
                print(f"loopcore replay: {NEEDS_NUMPY}", file=sys.stderr)
                return 2
            return replay(args, sys.stdout, sys.stderr)
        if args.command == "mcp-proxy":
            try:
                import mcp  # noqa: F401  (the proxy is built on the SDK)
            except ImportError:
                print(f"loopcore mcp-proxy: {NEEDS_MCP}", file=sys.stderr)
                return 2
            from .mcp_proxy import run as mcp_proxy

            return mcp_proxy(args, sys.stderr)
    except BrokenPipeError:
        # The reader went away (``loopcore demo | head``): stop quietly, and keep
        # the interpreter's final flush from failing on the closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
        return 1
    return 2  # pragma: no cover - argparse rejects unknown commands first

"""How is ``loopcore mcp-proxy`` called? Its arguments, and the run from them to an exit status.

Imported only when the subcommand runs: it needs the ``mcp`` extra.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any, TextIO

__all__ = ["add_parser", "run"]

_USAGE = "loopcore mcp-proxy [--config FILE] [--agent ID] [--mode observe] -- COMMAND [ARGS...]"


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Register ``mcp-proxy`` on the ``loopcore`` subcommands (argparse only, no mcp import)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "mcp-proxy",
        help="guard an MCP server: relay its stdio session and refuse looping tool calls",
        usage=_USAGE + "\n       loopcore mcp-proxy --transport http --url URL [--config FILE] ...",
        description=(
            "Start an MCP server (COMMAND) and serve the same session on this process's "
            "stdin/stdout, with every tools/call checked by loopcore. With --transport http, "
            "relay to the streamable-HTTP MCP server at --url instead of starting one."
        ),
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="gateway config (JSON5) with tools.loopDetection (default: every default, enabled)",
    )
    parser.add_argument(
        "--agent", metavar="ID", help="the agent whose override applies (with --config)"
    )
    parser.add_argument(
        "--mode",
        choices=("enforce", "observe"),
        help="observe: shadow mode, decide and log but change nothing (default: the config's mode)",
    )
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="the upstream server's transport (default: stdio, a child process)",
    )
    parser.add_argument(
        "--url", metavar="URL", help="the upstream streamable-HTTP endpoint (--transport http)"
    )
    parser.add_argument(
        "server",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND [ARGS...]",
        help="the MCP server to start",
    )
    return parser


def _check(args: argparse.Namespace) -> tuple[list[str], str | None]:
    """The server's command line and the error to report, if any."""
    command = list(args.server)
    if command[:1] == ["--"]:
        command = command[1:]
    if args.agent is not None and args.config is None:
        return command, "--agent: needs --config FILE"
    if args.transport == "http":
        if not args.url:
            return command, "--transport http: needs --url URL"
        if command:
            return command, "--transport http: takes no COMMAND (the server runs at --url)"
        return command, None
    if args.url is not None:
        return command, "--url: only with --transport http"
    if not command:
        return command, "COMMAND: expected the MCP server's command line after --"
    return command, None


def run(args: argparse.Namespace, stderr: TextIO) -> int:
    """Serve until the server or the client ends; the exit status of the proxy."""
    import anyio

    from .. import ConfigError, load_config
    from ..integrations.mcp_proxy import MCPProxy

    command, error = _check(args)
    if error is not None:
        print(f"loopcore mcp-proxy: {error}", file=stderr)
        return 2
    config: Any = None
    if args.config is not None:
        try:
            config = load_config(args.config, agent_id=args.agent)
        except (ConfigError, OSError) as exc:
            print(f"loopcore mcp-proxy: {exc}", file=stderr)
            return 2
    _log_to(stderr)
    proxy = MCPProxy(config=config, mode=args.mode)
    try:
        if args.transport == "http":
            status = anyio.run(proxy.serve_http, args.url)
        else:
            status = anyio.run(proxy.serve_stdio, command)
    except OSError as exc:  # the server could not be started
        print(f"loopcore mcp-proxy: {command[0] if command else args.url}: {exc}", file=stderr)
        return 127
    except KeyboardInterrupt:
        return 130
    stats = proxy.guard.stats()
    print(
        f"loopcore mcp-proxy: {stats.calls} tool calls, {stats.warnings} warnings, "
        f"{stats.blocks} blocks, {stats.terminations} runs ended, "
        f"{stats.shadow_blocks} shadow blocks",
        file=stderr,
    )
    return status


def _log_to(stderr: TextIO) -> None:
    # stdout carries the MCP session: the guard's warnings and blocks go to stderr.
    handler = logging.StreamHandler(stderr)
    handler.setFormatter(logging.Formatter("loopcore: %(levelname)s %(message)s"))
    root = logging.getLogger("loopcore")
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)

"""A small agent gateway guarded by loopcore: 100 concurrent sessions, shadow mode first.

Each session is an asyncio task that runs a scripted "agent": most make progress,
some poll a job that never finishes, one keeps retrying an unknown tool. The
same traffic runs twice: first with the guard in ``observe`` mode (it only logs
and counts what it would do), then in ``enforce`` mode. Logs are one JSON
object per line (the ``loopcore_*`` fields are indexable); the Prometheus text
exposition of both guards is printed at the end.

Run: ``python examples/gateway.py`` (needs ``pip install 'loopcore[prometheus]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from loopcore import ToolLoopBlocked, ToolLoopGuard, ToolLoopRunTerminated
from loopcore.metrics import PrometheusCollector

SESSIONS = 100
TURNS = 30


class JsonFormatter(logging.Formatter):
    """One JSON object per record, with loopcore's structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        fields = {k: v for k, v in vars(record).items() if k.startswith("loopcore_")}
        return json.dumps({"level": record.levelname, "message": record.getMessage(), **fields})


def configure_logging() -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("loopcore")
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logger.propagate = False


def build_tools(guard: ToolLoopGuard) -> dict[str, Any]:
    """Tools as a gateway registers them: sync and async, each wrapped by the guard."""

    @guard.wrap(name="read_file")
    def read_file(path: str) -> str:  # a sync tool
        return f"contents of {path}"

    @guard.wrap(name="process")
    async def process(action: str, session_id: str) -> dict[str, Any]:  # an async tool
        await asyncio.sleep(0)
        return {"content": [{"type": "text", "text": "running"}], "details": {"status": "running"}}

    @guard.wrap(name="invoke")
    def invoke(name: str) -> str:
        raise LookupError(f"unknown tool: {name}")

    return {"read_file": read_file, "process": process, "invoke": invoke}


async def agent(guard: ToolLoopGuard, tools: dict[str, Any], index: int) -> str:
    """One session's scripted run; returns how it ended."""
    with guard.scope(session=f"session-{index}", run_id="run-1"):
        for turn in range(TURNS):
            try:
                if index % 10 == 0:  # stuck: polls a job that never changes
                    await tools["process"]("poll", "job-7")
                elif index == 1:  # retries a tool that does not exist
                    with contextlib.suppress(LookupError):
                        tools["invoke"]("web_search")
                else:  # making progress: a new file every turn
                    tools["read_file"](f"/src/module_{turn}.py")
            except ToolLoopRunTerminated:
                return "terminated"
            except ToolLoopBlocked:
                continue  # the model reads the block text and tries again
    return "finished"


async def serve(mode: str) -> ToolLoopGuard:
    guard = ToolLoopGuard({"enabled": True}, mode=mode)
    tools = build_tools(guard)
    endings = await asyncio.gather(*(agent(guard, tools, i) for i in range(SESSIONS)))
    summary = {ending: endings.count(ending) for ending in sorted(set(endings))}
    print(json.dumps({"mode": mode, "runs": summary}))
    return guard


async def main() -> None:
    configure_logging()
    observed = await serve("observe")  # roll out: watch what it would do
    enforced = await serve("enforce")  # then let it act
    registry = CollectorRegistry()
    collector = PrometheusCollector(observed, guard_label="observe")
    collector.add(enforced, guard_label="enforce")
    registry.register(collector)
    print(generate_latest(registry).decode(), end="")


if __name__ == "__main__":
    asyncio.run(main())

"""One gateway worker of the fleet tests: a ToolLoopGuard on a RedisStore, driven over stdin.

``python -m tests.fleet_worker URL PREFIX`` reads one JSON request a line
(``before`` or ``after`` a tool call, or ``history``) and writes one JSON
answer a line: what the host would act on (the decision's fields, the result
the model sees) and the events the call sent. Also run in-process, on the
in-process store, as the single-worker reference (``Worker``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .conftest import require

redis = require("redis", "redis")

from loopcore import LoopEvent, ToolLoopGuard  # noqa: E402
from loopcore.redis import RedisStore  # noqa: E402

CONFIG = {"enabled": True, "warningThreshold": 4, "criticalThreshold": 8,
          "globalCircuitBreakerThreshold": 12}  # fmt: skip


class Worker:
    """Answers requests with one guard (on ``store``, or in-process)."""

    def __init__(self, store: Any = None) -> None:
        self.events: list[LoopEvent] = []
        self.guard = ToolLoopGuard(CONFIG, store=store, on_event=self.events.append)

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        self.events.clear()
        scope = {"session": request["session"], "run_id": request["run"]}
        op = request["op"]
        if op == "before":
            d = self.guard.before_call(
                request["tool"], request["args"], tool_call_id=request["id"], **scope
            )
            out: dict[str, Any] = {
                "blocked": d.blocked, "terminal": d.terminal, "text": d.result_text,
                "warning": None if d.warning is None else d.warning.message,
                "detector": d.verdict.detector, "count": d.verdict.count,
                "note": d.model_note, "liveness": d.liveness_signal,
            }  # fmt: skip
        elif op == "after":
            seen = self.guard.after_call(
                request["tool"], request["args"], result=request["result"],
                tool_call_id=request["id"], **scope,
            )  # fmt: skip
            out = {"seen": seen}
        else:
            records = self.guard.detector.history(**scope)
            out = {
                "history": [
                    [
                        r.tool_name,
                        r.args_hash,
                        r.tool_call_id,
                        r.result_hash,
                        r.outcome_kind,
                        r.no_progress,
                    ]
                    for r in records
                ]
            }
        out["events"] = [
            [e.kind, e.tool_name, e.detector, e.count, e.terminal] for e in self.events
        ]
        return out


def main() -> None:
    url, prefix = sys.argv[1:3]
    worker = Worker(RedisStore(redis.Redis.from_url(url), prefix=prefix, timeout_seconds=5))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(worker.answer(json.loads(line))), flush=True)


if __name__ == "__main__":
    main()

"""What does a large, realistic loopcore JSONL trace look like? A generator for replay benchmarks.

``python benchmarks/make_trace.py OUT.jsonl [--calls N] [--seed S]`` writes N
call events (one JSON object per line, the format ``loopcore replay`` reads;
``.gz`` compresses) in runs of about 1,000 calls across a few sessions. Each run
is made of segments:

- ordinary work: reads of different files, commands with changing output, edits;

and, in four runs of ten, one or two of:

- a polling loop: ``process`` polls of a stuck job, then one that completes;
- a ping-pong: alternating ``read`` and ``exec`` with unchanging results;
- an unknown tool retried: ``browse`` failing with ``Unknown tool: browse``;
- a plain repeat: the same ``read`` with the same result;
- a context compaction followed by a few repeats of one ``read``.

Results carry realistic text (100-300 characters) and ``details`` with volatile fields.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["events", "write_trace"]

RUN_CALLS = 1_000
SESSIONS = 8

_WORDS = [
    *("build", "test", "lint", "cache", "module", "import", "export", "config", "handler"),
    *("request", "response", "session", "token", "retry", "timeout", "worker", "queue"),
    *("schema", "migration", "index", "render", "layout", "route"),
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _result(text: str, **details: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "details": details}


class _Run:
    """Builds the events of one run, segment by segment."""

    def __init__(self, rng: random.Random, session: str, run_id: str) -> None:
        self.rng = rng
        self.scope = {"session": session, "run_id": run_id}
        self.out: list[dict[str, Any]] = []
        self.serial = 0

    def call(self, tool: str, args: dict[str, Any], **outcome: Any) -> None:
        self.serial += 1
        event = {"tool": tool, "args": args, **outcome, "tool_call_id": f"call_{self.serial}"}
        event.update(self.scope)
        self.out.append(event)

    def work(self, n: int) -> None:
        rng = self.rng
        for _ in range(n):
            kind = rng.random()
            if kind < 0.45:
                path = f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}_{rng.randrange(200)}.py"
                self.call(
                    "read", {"path": path, "limit": 200}, result=_text(rng, rng.randint(15, 45))
                )
            elif kind < 0.8:
                command = f"pytest -q tests/test_{rng.choice(_WORDS)}.py -k {rng.choice(_WORDS)}"
                output = _text(rng, rng.randint(15, 40))
                self.call(
                    "exec",
                    {"command": command},
                    result=_result(
                        output,
                        status="completed",
                        exitCode=rng.choice((0, 0, 0, 1)),
                        aggregated=output,
                        durationMs=rng.randint(50, 9000),
                        pid=rng.randint(1000, 60000),
                    ),
                )
            else:
                path = f"src/{rng.choice(_WORDS)}.py"
                old, new = _text(rng, 4), _text(rng, 5)
                self.call(
                    "edit",
                    {"path": path, "oldText": old, "newText": new},
                    result=f"Successfully replaced text in {path}.",
                )

    def poll(self, n: int) -> None:
        job = f"job-{self.rng.randrange(10_000)}"
        tail = _text(self.rng, 30)
        for i in range(n):
            self.call(
                "process",
                {"action": "poll", "sessionId": job},
                result=_result(
                    tail + "\n\nProcess still running.",
                    status="running",
                    aggregated=tail,
                    exitCode=None,
                    durationMs=4000 * (i + 1),
                ),
            )
        self.call(
            "process",
            {"action": "poll", "sessionId": job},
            result=_result(tail + "\ndone", status="completed", aggregated=tail, exitCode=0),
        )

    def ping_pong(self, n: int) -> None:
        path = f"config/{self.rng.choice(_WORDS)}.yaml"
        content = _text(self.rng, 40)
        failure = _text(self.rng, 30)
        for i in range(n):
            if i % 2:
                self.call(
                    "exec",
                    {"command": "make check"},
                    result=_result(
                        failure,
                        status="failed",
                        exitCode=2,
                        aggregated=failure,
                        durationMs=self.rng.randint(500, 3000),
                    ),
                )
            else:
                self.call("read", {"path": path}, result=content)

    def unknown_tool(self, n: int) -> None:
        url = f"https://docs.example.test/{self.rng.choice(_WORDS)}"
        for _ in range(n):
            self.call("browse", {"url": url}, error="Unknown tool: browse")

    def repeat(self, n: int) -> None:
        path = f"logs/{self.rng.choice(_WORDS)}.log"
        text = _text(self.rng, 35)
        for _ in range(n):
            self.call("read", {"path": path, "limit": 50}, result=text)

    def compaction_then_repeat(self) -> None:
        compaction = {"type": "compaction"}
        compaction.update(self.scope)
        self.out.append(compaction)
        self.repeat(self.rng.choice((2, 3, 3, 4)))


def events(calls: int, seed: int = 0) -> Iterator[dict[str, Any]]:
    """``calls`` call events (plus compaction events), in runs of about ``RUN_CALLS`` calls."""
    rng = random.Random(seed)
    made = 0
    run_number = 0
    while made < calls:
        run_number += 1
        run = _Run(rng, f"session-{run_number % SESSIONS}", f"run-{run_number}")
        target = min(calls - made, RUN_CALLS)
        # Most runs are healthy; a stuck one has a loop or two somewhere in its work.
        loops = rng.choices((0, 1, 2), weights=(6, 3, 1))[0]
        loop_at = sorted(rng.randrange(target) for _ in range(loops))
        while run.serial < target:
            if loop_at and run.serial >= loop_at[0]:
                loop_at.pop(0)
                kind = rng.random()
                if kind < 0.3:
                    run.poll(rng.randint(8, 35))
                elif kind < 0.55:
                    run.ping_pong(rng.randint(6, 26))
                elif kind < 0.7:
                    run.unknown_tool(rng.randint(3, 14))
                elif kind < 0.85:
                    run.repeat(rng.randint(5, 25))
                else:
                    run.compaction_then_repeat()
            else:
                run.work(rng.randint(5, 30))
        kept = 0
        for event in run.out:
            if "tool" in event:
                if kept == target:
                    break
                kept += 1
            yield event
        made += kept


def write_trace(path: str, calls: int, seed: int = 0) -> int:
    """Write the trace to ``path`` (gzip when it ends in ``.gz``); returns the calls written."""
    handle: IO[str]
    if path.endswith(".gz"):
        handle = gzip.open(path, "wt", encoding="utf-8", compresslevel=3)  # noqa: SIM115
    else:
        handle = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    written = 0
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    with handle:
        batch = []
        for event in events(calls, seed):
            batch.append(dumps(event))
            written += "tool" in event
            if len(batch) >= 10_000:
                handle.write("\n".join(batch) + "\n")
                batch.clear()
        if batch:
            handle.write("\n".join(batch) + "\n")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description="Write a realistic loopcore JSONL trace.")
    parser.add_argument("out", help="output file (.jsonl, or .jsonl.gz to compress)")
    parser.add_argument("--calls", type=int, default=1_000_000, help="calls to write")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args()
    written = write_trace(args.out, args.calls, args.seed)
    print(f"{args.out}: {written:,} calls")


if __name__ == "__main__":
    main()

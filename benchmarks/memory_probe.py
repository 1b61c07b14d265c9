"""How much resident memory do live scopes take? Measured in a fresh process (workload 4).

``python benchmarks/memory_probe.py LEG SCOPES HISTORY [ids] [calls=N]`` builds
the leg's detector (twin selected as in the benchmarks), records HISTORY calls
(or N) in each of SCOPES scopes (``record_call`` of the typical ``read`` call,
so by default every ring is full; with ``ids``, each call with its own
29-character ``tool_call_id``, as gateways send them), and prints one JSON
object: the resident-set growth and bytes per scope.
RSS is VmRSS from /proc/self/status; elsewhere the growth of
``resource.getrusage(...).ru_maxrss``. Run ids and args are built before the
first reading: they belong to the host, not to the detector (so do the call ids).
"""

from __future__ import annotations

import gc
import json
import sys
import time


def rss_bytes() -> tuple[int, str]:
    """Current resident set size and how it was read."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024, "VmRSS"
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return (peak if sys.platform == "darwin" else peak * 1024), "ru_maxrss"


def main(argv: list[str]) -> int:
    leg, scopes, history = argv[1], int(argv[2]), int(argv[3])
    options = argv[4:]
    with_ids = "ids" in options
    calls = next((int(o[6:]) for o in options if o.startswith("calls=")), history)
    from twins import use_twin
    from workloads import TOOL, make_detector, read_args

    args = read_args(50)
    run_ids = [f"run-{k}" for k in range(scopes)]
    # OpenAI-style ids ("call_" and 24 characters), unique per call.
    call_ids = (
        [[f"call_{k:012x}{j:012x}" for j in range(calls)] for k in range(scopes)]
        if with_ids
        else [[None] * calls] * scopes
    )
    with use_twin(leg):
        detector = make_detector(
            leg, {"enabled": True, "historySize": history}, max_scopes=scopes + 1
        )
        # One scope made and recorded into first, so lazily built state is not counted.
        detector.record_call(TOOL, args[0], run_id="warm-up")
        gc.collect()
        before, method = rss_bytes()
        started = time.perf_counter()
        for run_id, ids in zip(run_ids, call_ids, strict=True):
            for j in range(calls):
                detector.record_call(TOOL, args[j % 50], ids[j], run_id=run_id)
        elapsed = time.perf_counter() - started
        gc.collect()
        after, _ = rss_bytes()
        assert len(detector.history(run_id=run_ids[0])) == min(calls, history)
        assert len(detector.history(run_id=run_ids[-1])) == min(calls, history)
    delta = after - before
    print(
        json.dumps(
            {
                "leg": leg,
                "scopes": scopes,
                "history": history,
                "call_ids": with_ids,
                "calls": calls,
                "method": method,
                "rss_before": before,
                "rss_after": after,
                "bytes_per_scope": delta / scopes,
                "bytes_per_record": delta / scopes / min(calls, history),
                "fill_seconds": elapsed,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

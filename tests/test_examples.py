"""The gateway example in ``examples/`` runs as written and shows what the README says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "gateway.py"


def test_the_gateway_example_observes_then_enforces() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=300, check=True
    )
    lines = done.stdout.splitlines()
    documents = [json.loads(line) for line in lines if line.startswith("{")]
    runs = {d["mode"]: d["runs"] for d in documents if "mode" in d}
    # Observe mode never ends a run; enforce mode ends the stuck ones (10 pollers, 1 retrier).
    assert runs == {"observe": {"finished": 100}, "enforce": {"finished": 89, "terminated": 11}}
    logs = [d for d in documents if "message" in d]
    assert logs
    assert all(d["loopcore_session"].startswith("session-") for d in logs)
    assert {d["loopcore_shadow"] for d in logs} == {True, False}
    assert any(d["message"].startswith("would have blocked") for d in logs)
    assert any(d["message"].startswith("Blocking process") for d in logs)
    assert 'loopcore_tool_calls_total{guard="observe"} 3000.0' in lines
    assert any(line.startswith('loopcore_detections_total{action="terminated"') for line in lines)

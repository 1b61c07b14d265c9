"""``loopcore replay``'s reports: every detector per run, sessions in the "why" lines, sweeps
labelled by the value in force, one compact JSON document, and no tqdm needed."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from loopcore.cli import main
from loopcore.formats import _load as load_module
from tests.conftest import Replay

EXAMPLE = Path(__file__).resolve().parent / "data" / "stuck-session.jsonl"


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def _two_detectors(tmp_path: Path) -> Path:
    """Run r1: a read repeated (generic warnings), then an unknown tool retried (blocked)."""
    events = [
        {"tool": "read", "args": {"path": "a"}, "result": "same", "session": "s-1", "run_id": "r1"}
        for _ in range(11)
    ]
    events += [
        {
            "tool": "browse",
            "args": {},
            "error": "Unknown tool: browse",
            "session": "s-1",
            "run_id": "r1",
        }
        for _ in range(12)
    ]
    events += [{"tool": "read", "args": {"path": "b"}, "result": "x", "run_id": "r2"}]
    return _write(tmp_path / "two.jsonl", events)


def test_the_table_lists_every_detector_that_fired(tmp_path: Path, replay: Replay) -> None:
    path = _two_detectors(tmp_path)
    code, out, _ = replay("--enable", path)
    assert code == 1
    _, text, _ = replay("--enable", "--format", "json", path)
    document = json.loads(text)
    # Each detector's first call in run r1, from the JSON report's calls.
    first: dict[str, int] = {}
    for call in document["calls"]:
        if call["run_id"] == "r1":
            first.setdefault(call["detector"], call["call"])
    assert len(first) >= 2  # the run fired more than one detector
    [row] = [line for line in out.splitlines() if line.startswith("s-1 ")]
    fired = ", ".join(f"{name} #{call}" for name, call in first.items())
    assert row.endswith(f"  {fired}")
    assert document["runs"][0]["detectors"] == list(first)


def test_why_lines_name_the_session_and_the_run(tmp_path: Path, replay: Replay) -> None:
    path = _two_detectors(tmp_path)
    _, out, _ = replay("--enable", path)
    _, text, _ = replay("--enable", "--format", "json", path)
    block = json.loads(text)["runs"][0]["first_block"]
    why = out[out.index("why each run would have stopped:") :].splitlines()[1]
    assert why.startswith(f"  s-1 r1 #{block['call']} {path}:{block['line']}: CRITICAL:")


def test_a_sweep_row_is_labelled_with_the_value_in_force(tmp_path: Path, replay: Replay) -> None:
    events = [{"tool": "read", "args": {}, "result": "same", "run_id": "r1"} for _ in range(25)]
    path = _write(tmp_path / "t.jsonl", events)
    # criticalThreshold must exceed warningThreshold (10): 5 to 10 are all run as 11.
    code, out, _ = replay("--enable", "--sweep", "criticalThreshold=5:13", path)
    assert code == 1
    lines = out.splitlines()
    at = lines.index("sweep of criticalThreshold from 5 to 13 (9 values), over 25 calls:")
    labels = [line.split()[0] for line in lines[at + 2 : at + 5]]
    assert labels == ["11", "12", "13"]
    assert lines[at + 5] == ""
    assert lines[at + 6] == (
        "note: criticalThreshold 5 to 10 are repaired to 11 (it must exceed warningThreshold, "
        "10), so their rows are merged into the row 11"
    )
    code, out, err = replay(
        "--enable", "--sweep", "criticalThreshold=5:13", "--format", "json", path
    )
    sweep = json.loads(out)["sweep"]
    assert [row["value"] for row in sweep] == [11, 12, 13]
    assert sweep[0]["requested"] == list(range(5, 12))
    assert "requested" not in sweep[1]
    assert "loopcore replay: --sweep: criticalThreshold 5 to 10 are repaired to 11" in err
    # The merged row is the configuration every value it stands for runs as.
    _, single, _ = replay("--enable", "--set", "criticalThreshold=11", "--format", "json", path)
    summary = json.loads(single)["summary"]
    assert sweep[0]["calls_saved"] == summary["calls_saved"]
    code, out, _ = replay("--enable", "--sweep", "criticalThreshold=5:13", "--format", "csv", path)
    assert [line.split(",")[1] for line in out.splitlines()[1:]] == ["11", "12", "13"]


def test_a_sweep_says_when_the_repair_raised_another_setting(
    tmp_path: Path, replay: Replay
) -> None:
    events = [{"tool": "read", "args": {}, "result": "same", "run_id": "r1"} for _ in range(25)]
    path = _write(tmp_path / "t.jsonl", events)
    code, out, _ = replay("--enable", "--sweep", "warningThreshold=18:22:2", path)
    assert code == 1  # 25 identical reads: every value blocks
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("warningThreshold  "))
    assert [line.split()[0] for line in lines[at + 1 : at + 4]] == ["18", "20", "22"]
    assert lines[at + 5] == (
        "note: at warningThreshold 20 to 22 step 2 the ordering repair also raised "
        "criticalThreshold (to 21 to 23 step 2: it must exceed warningThreshold)"
    )
    _, text, _ = replay("--enable", "--sweep", "warningThreshold=18:22:2", "--format", "json", path)
    rows = json.loads(text)["sweep"]
    assert [row.get("repaired") for row in rows] == [
        None,
        {"criticalThreshold": 21},
        {"criticalThreshold": 23},
    ]


class _Writes(io.StringIO):
    """A stdout that counts its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


@pytest.mark.parametrize("extra", [[], ["--sweep", "warningThreshold=5:9"]])
def test_json_is_one_compact_document_written_at_once(
    extra: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stdout = _Writes()
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert main(["replay", "--enable", "--format", "json", *extra, str(EXAMPLE)]) == 1
    text = stdout.getvalue()
    assert stdout.writes == 1
    document = json.loads(text)
    # Compact: no white space between tokens, one line.
    assert text == json.dumps(document, separators=(",", ":")) + "\n"
    assert document["summary"]["calls"] == 66


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import loopcore

    for argv in (["--version"], ["replay", "--version"]):
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 0
        assert capsys.readouterr().out == f"loopcore {loopcore.__version__}\n"


def test_replay_runs_without_tqdm(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setitem(sys.modules, "tqdm", None)  # ``import tqdm`` raises ImportError
    monkeypatch.setattr(load_module, "PROGRESS_DELAY", 0.0)
    stderr, stdout = Terminal(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(sys, "stdout", stdout)
    assert main(["replay", "--enable", str(EXAMPLE)]) == 1
    assert stderr.getvalue() == ""  # no bar, and no complaint
    assert "totals: 4 runs" in stdout.getvalue()

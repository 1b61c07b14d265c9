"""``loopcore replay``: every input format, bad input, outputs, sweeps, plots and exit codes."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from loopcore import LoopDetector, PostCompactionGuard, hash_call, hash_outcome
from loopcore.cli import main
from loopcore.formats import MAX_REPORTS
from loopcore.formats import _load as load_module
from tests.conftest import Replay

# The README's example, copied here so the suite also runs from a copy of tests/ alone
# (against an installed wheel); a test below keeps the copy equal to the original.
EXAMPLE = Path(__file__).resolve().parent / "data" / "stuck-session.jsonl"
SHIPPED_EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "stuck-session.jsonl"
EXAMPLE_SESSION = "5f0c2a9e-8d41-4b7a-9c3e-2e6f1d7b4a90"
SECRET = "hunter2-do-not-print"


def _write(path: Path, lines: Iterable[object]) -> Path:
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return path


def _event(tool: str, args: Any, result: Any = "ok", run_id: str = "r1", **extra: Any) -> Any:
    return {"tool": tool, "args": args, "result": result, "run_id": run_id, **extra}


def _stuck_events(calls: int = 25) -> list[Any]:
    """Run r1 repeats one read ``calls`` times; run r2 does three different things."""
    stuck = [_event("read", {"path": "a.txt"}, "same") for _ in range(calls)]
    healthy = [_event("read", {"path": f"{i}.txt"}, str(i), run_id="r2") for i in range(3)]
    return stuck + healthy


# -- pi transcripts -------------------------------------------------------------------------


class Pi:
    """Builds a pi / OpenClaw session transcript line by line."""

    def __init__(self, session: str | None = "sess-1") -> None:
        self.lines: list[Any] = []
        if session is not None:
            self.lines.append({"type": "session", "version": 3, "id": session, "cwd": "/w"})
        self.serial = 0

    def user(self, text: str = "please fix it") -> Pi:
        self.lines.append({"type": "message", "message": {"role": "user", "content": text}})
        return self

    def calls(self, *calls: tuple[str, Any]) -> list[str]:
        ids = []
        blocks: list[Any] = [{"type": "text", "text": "working on it"}]
        for name, args in calls:
            self.serial += 1
            ids.append(f"call_{self.serial}")
            blocks.append({"type": "toolCall", "id": ids[-1], "name": name, "arguments": args})
        self.lines.append({"type": "message", "message": {"role": "assistant", "content": blocks}})
        return ids

    def result(self, call_id: str, name: str, text: str, error: bool = False) -> Pi:
        message = {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": [{"type": "text", "text": text}],
            "details": {},
            "isError": error,
        }
        self.lines.append({"type": "message", "message": message})
        return self

    def call(self, name: str, args: Any, text: str, error: bool = False) -> Pi:
        (call_id,) = self.calls((name, args))
        return self.result(call_id, name, text, error)

    def compaction(self) -> Pi:
        self.lines.append(
            {"type": "compaction", "id": "c1", "summary": "...", "tokensBefore": 190_000}
        )
        return self

    def write(self, path: Path) -> Path:
        return _write(path, self.lines)


VETO = {"details": {"status": "blocked", "deniedReason": "tool-loop"}}


def _sequential(path: Path, config: dict[str, Any]) -> dict[tuple[str, int], tuple[Any, ...]]:
    """Per call of a pi transcript, what a gateway guarding the calls in order would see.

    Pairs calls and results by id independently of the replay's reader:
    ``check``, ``record_call``, ``record_outcome`` per call, and a post-compaction
    guard per run. Returns the calls with a verdict or an abort.
    """
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    results = {
        e["message"]["toolCallId"]: e["message"]
        for e in entries
        if e["type"] == "message" and e["message"]["role"] == "toolResult"
    }
    detector = LoopDetector(config)
    session, run, number = str(path), 0, 0
    guards: dict[int, PostCompactionGuard] = {}
    seen: dict[tuple[str, int], tuple[Any, ...]] = {}
    window = config.get("postCompactionGuard", {}).get("windowSize", 3)
    for entry in entries:
        if entry["type"] == "session":
            session = entry["id"]
        elif entry["type"] == "compaction":
            guards.setdefault(run, PostCompactionGuard(window)).arm()
        elif entry["type"] == "message" and entry["message"]["role"] == "user":
            run, number = run + 1, 0
        elif entry["type"] == "message" and entry["message"]["role"] == "assistant":
            for block in entry["message"]["content"]:
                if block.get("type") != "toolCall":
                    continue
                number += 1
                name, args, call_id = block["name"], block["arguments"], block["id"]
                scope = {"session": session, "run_id": f"run-{run}"}
                verdict = detector.check(name, args, **scope)
                detector.record_call(name, args, call_id, **scope)
                blocked = verdict.level == "critical"
                outcome: dict[str, Any] = {}
                answer = results.get(call_id)
                if answer is not None and answer["isError"]:
                    outcome["error"] = "\n".join(c["text"] for c in answer["content"])
                elif answer is not None:
                    outcome["result"] = {
                        "content": answer["content"],
                        "details": answer.get("details"),
                    }
                # A gateway records a blocked call as a loop veto, not as the call that ran.
                record = detector.record_outcome(
                    name, args, tool_call_id=call_id, **({"result": VETO} if blocked else outcome),
                    **scope,
                )  # fmt: skip
                guard = guards.get(run)
                aborted = False
                if guard is not None:
                    # The post-compaction guard sees every call of its window, as recorded.
                    if blocked:
                        result_hash = hash_outcome(name, args, **outcome)[0]
                    else:
                        result_hash = record.result_hash if record is not None else None
                    aborted = guard.observe(name, hash_call(name, args), result_hash).should_abort
                if verdict.stuck or aborted:
                    level = verdict.level if verdict.stuck else None
                    detector_name = verdict.detector if verdict.stuck else None
                    count = verdict.count if verdict.stuck else 0
                    seen[(f"run-{run}", number)] = (level, detector_name, count, aborted)
    return seen


def _replayed(document: dict[str, Any]) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {
        (c["run_id"], c["call"]): (c["level"], c["detector"], c["count"], c["aborted"])
        for c in document["calls"]
    }


# -- the example ----------------------------------------------------------------------------


def test_example_copy_is_the_shipped_example() -> None:
    if not SHIPPED_EXAMPLE.exists():
        pytest.skip("examples/ is not next to this copy of the tests")
    assert EXAMPLE.read_bytes() == SHIPPED_EXAMPLE.read_bytes()


def test_example_with_enable_warns_blocks_and_aborts(replay: Replay) -> None:
    code, out, err = replay("--enable", EXAMPLE)
    assert code == 1
    assert err == ""
    lines = out.splitlines()
    assert lines[0].startswith("loopcore replay: 1 file (pi), 66 calls in 4 runs, 0 malformed")
    assert "detection: OFF" not in out
    rows = {
        line.split()[1]: " ".join(line.split()[2:])
        for line in lines
        if line.startswith(EXAMPLE_SESSION)
    }
    # The last column: every detector that fired, with the call where it first did.
    assert rows == {
        "run-1": "27 #14 known_poll_no_progress (10) #24 known_poll_no_progress (20) - 4 "
        "known_poll_no_progress #14",
        "run-2": "25 #11 ping_pong (10) #21 ping_pong (20) - 5 ping_pong #11",
        "run-3": "10 - - #8 2 -",
    }
    assert (
        f"{EXAMPLE_SESSION} run-1 #24 {EXAMPLE}:51: CRITICAL: process has been polled 20 times"
        in out
    )
    assert f"run-2 #21 {EXAMPLE}:101: CRITICAL: 20 times alternating between read and exec" in out
    assert f"run-3 #8 {EXAMPLE}:129: ABORT: compaction_loop_persisted: grep repeated" in out
    assert lines[-1] == (
        "totals: 4 runs: 2 warned, 2 blocked, 1 aborted by the post-compaction guard; "
        "11 calls of 66 would not have been made (17%)"
    )


def test_example_without_enable_reports_only_the_compaction_abort(replay: Replay) -> None:
    code, out, _ = replay(EXAMPLE)
    assert code == 1  # the post-compaction guard is on unless enabled is explicitly false
    assert "detection: OFF (enabled is not set)" in out
    assert "add --enable" in out
    assert "run-1" not in out
    assert "totals: 4 runs: 0 warned, 0 blocked, 1 aborted" in out
    code, out, _ = replay("--set", "enabled=false", EXAMPLE)
    assert code == 0
    assert "also turns off the post-compaction guard" in out
    assert "no run would have been warned, blocked or aborted" in out


def test_example_verdicts_match_a_sequential_detector(replay: Replay) -> None:
    code, out, _ = replay("--enable", "--format", "json", EXAMPLE)
    assert code == 1
    expected = _sequential(EXAMPLE, {"enabled": True})
    assert _replayed(json.loads(out)) == expected
    assert len(expected) == 14 + 15 + 1  # polls 11-24, alternations 10-24, the abort


def test_pairing_matches_a_sequential_detector(tmp_path: Path, replay: Replay) -> None:
    pi = Pi().user()
    for i in range(12):
        # Two calls in one message, answered in reverse order; one always fails.
        first, second = pi.calls(("read", {"path": "a"}), ("exec", {"command": "make"}))
        pi.result(second, "exec", "make: *** [all] Error 2", error=True)
        pi.result(first, "read", "contents of a" if i < 11 else "changed")
    pi.user("again").call("ls", {"path": "."}, "a b")
    pi.compaction()
    for _ in range(3):
        pi.call("grep", {"pattern": "TODO"}, "a:1: TODO")
    path = pi.write(tmp_path / "pairs.jsonl")
    config = {"enabled": True, "warningThreshold": 4, "criticalThreshold": 8}
    code, out, _ = replay(
        "--enable", "--set", "warningThreshold=4", "--set", "criticalThreshold=8",
        "--format", "json", path,
    )  # fmt: skip
    assert code == 1
    expected = _sequential(path, config)
    assert _replayed(json.loads(out)) == expected
    assert expected[("run-2", 4)] == (None, None, 0, True)  # the abort


# -- formats ----------------------------------------------------------------------------------


def test_json_output(replay: Replay) -> None:
    code, out, _ = replay("--enable", "--format", "json", EXAMPLE)
    assert code == 1
    document = json.loads(out)
    summary = document["summary"]
    assert summary["calls"] == 66
    assert summary["runs"] == 4
    assert summary["files"] == [
        {
            "path": str(EXAMPLE),
            "format": "pi",
            "lines": 145,
            "calls": 66,
            "skipped_lines": 0,
            "unanswered_calls": 0,
            "results_without_call": 0,
        }
    ]
    assert summary["detection_enabled"] is True
    assert summary["settings"]["warningThreshold"] == 10
    assert (summary["runs_warned"], summary["runs_blocked"], summary["runs_aborted"]) == (2, 2, 1)
    assert summary["calls_saved"] == 11
    assert summary["would_block"] is True
    runs = document["runs"]
    assert [r["run_id"] for r in runs] == ["run-1", "run-2", "run-3", "run-4"]
    assert [r["calls"] for r in runs] == [27, 25, 10, 4]
    assert [r["saved"] for r in runs] == [4, 5, 2, 0]
    block = runs[0]["first_block"]
    assert (block["call"], block["line"], block["tool"], block["count"]) == (24, 51, "process", 20)
    assert block["message"].startswith("CRITICAL: process has been polled 20 times")
    assert runs[2]["aborted"]["line"] == 129
    assert runs[2]["aborted"]["tool"] == "grep"
    assert runs[3] == {
        "file": str(EXAMPLE),
        "session": EXAMPLE_SESSION,
        "run_id": "run-4",
        "calls": 4,
        "first_warning": None,
        "first_block": None,
        "aborted": None,
        "detectors": [],
        "saved": 0,
    }
    assert len(document["calls"]) == 30
    assert document["calls"][0] == {
        "index": 13,
        "file": str(EXAMPLE),
        "line": 31,
        "session": EXAMPLE_SESSION,
        "run_id": "run-1",
        "call": 14,
        "tool": "process",
        "level": "warning",
        "detector": "known_poll_no_progress",
        "count": 10,
        "aborted": False,
    }


def test_csv_output_has_one_row_per_run(replay: Replay) -> None:
    code, out, _ = replay("--enable", "--format", "csv", EXAMPLE)
    assert code == 1
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["run_id"] for r in rows] == ["run-1", "run-2", "run-3", "run-4"]
    assert rows[1]["first_block_detector"] == "ping_pong"
    assert (rows[1]["first_block_call"], rows[1]["first_block_line"]) == ("21", "101")
    assert rows[1]["first_warning_call"] == "11"
    assert rows[2]["aborted_at_call"] == "8"
    assert rows[2]["first_block_call"] == ""
    assert [r["saved"] for r in rows] == ["4", "5", "2", "0"]
    assert rows[0]["first_block_message"].startswith("CRITICAL:")


def test_loopcore_format_and_exit_codes(tmp_path: Path, replay: Replay) -> None:
    path = _write(tmp_path / "events.jsonl", _stuck_events())
    code, out, _ = replay("--enable", "--format", "json", path)
    assert code == 1
    document = json.loads(out)
    assert document["summary"]["files"][0]["format"] == "loopcore"
    r1, r2 = document["runs"]
    assert (r1["session"], r1["run_id"], r1["calls"]) == (None, "r1", 25)
    assert r1["first_warning"]["call"] == 11
    assert (r1["first_block"]["call"], r1["first_block"]["line"]) == (21, 21)
    assert r1["first_block"]["detector"] == "generic_repeat"
    assert r1["saved"] == 5
    assert (r2["first_warning"], r2["saved"]) == (None, 0)
    assert replay(path)[0] == 0  # detection off, no compaction: nothing would block
    healthy = _write(tmp_path / "healthy.jsonl", _stuck_events(calls=5))
    code, out, _ = replay("--enable", healthy)
    assert code == 0
    assert "no run would have been warned, blocked or aborted" in out
    warned = _write(tmp_path / "warned.jsonl", _stuck_events(calls=15))
    assert replay("--enable", warned)[0] == 0  # warnings alone never fail a pipeline


def test_loopcore_compaction_event_and_undecided_first_line(tmp_path: Path, replay: Replay) -> None:
    lines = [{"type": "compaction", "run_id": "r1"}]
    lines += [_event("grep", {"q": "x"}, "same") for _ in range(3)]
    path = _write(tmp_path / "c.jsonl", lines)
    code, out, _ = replay("--format", "json", path)
    assert code == 1
    document = json.loads(out)
    assert document["summary"]["files"][0]["format"] == "loopcore"
    assert document["runs"][0]["aborted"]["call"] == 3
    assert document["runs"][0]["aborted"]["line"] == 4


def test_pi_transcript_without_header_is_scoped_by_file(tmp_path: Path, replay: Replay) -> None:
    paths = []
    for name in ("one.jsonl", "two.jsonl"):
        pi = Pi(session=None).user()
        for _ in range(6):
            pi.call("read", {"path": "x"}, "same")
        paths.append(pi.write(tmp_path / name))
    code, out, _ = replay("--enable", "--set", "warningThreshold=10", "--format", "json", *paths)
    assert code == 0
    runs = json.loads(out)["runs"]
    assert [(r["session"], r["run_id"], r["calls"]) for r in runs] == [
        (str(paths[0]), "run-1", 6),
        (str(paths[1]), "run-1", 6),
    ]  # two files, two scopes: six repeats each stay below the warning


def test_gzip_is_read_transparently(tmp_path: Path, replay: Replay) -> None:
    packed = tmp_path / "stuck-session.jsonl.gz"
    packed.write_bytes(gzip.compress(EXAMPLE.read_bytes()))
    code, out, _ = replay("--enable", "--format", "json", packed)
    assert code == 1
    _, plain, _ = replay("--enable", "--format", "json", EXAMPLE)
    assert json.loads(out)["runs"] == json.loads(plain.replace(str(EXAMPLE), str(packed)))["runs"]
    disguised = tmp_path / "no-suffix.jsonl"  # gzip is recognised by content, not by name
    disguised.write_bytes(packed.read_bytes())
    assert json.loads(replay("--format", "json", disguised)[1])["summary"]["calls"] == 66


def test_directory_means_every_trace_in_it(tmp_path: Path, replay: Replay) -> None:
    traces = tmp_path / "traces"
    (traces / "nested").mkdir(parents=True)
    (traces / ".hidden").mkdir()
    _write(traces / "a.jsonl", _stuck_events(calls=25))
    (traces / "nested" / "b.jsonl.gz").write_bytes(gzip.compress(EXAMPLE.read_bytes()))
    _write(traces / ".hidden" / "c.jsonl", _stuck_events())
    (traces / "notes.txt").write_text("not a trace\n")
    code, out, _ = replay("--enable", "--format", "json", traces, traces / "a.jsonl")
    assert code == 1
    summary = json.loads(out)["summary"]
    assert [f["path"] for f in summary["files"]] == [
        str(traces / "a.jsonl"),
        str(traces / "nested" / "b.jsonl.gz"),
    ]  # sorted, recursive, hidden entries and other files skipped, each file once
    assert summary["calls"] == 28 + 66
    assert summary["runs"] == 6
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = replay(empty)
    assert (code, out) == (2, "")
    assert f"{empty}: directory holds no trace files" in err


# -- bad input ----------------------------------------------------------------------------------


def _bad_lines(tmp_path: Path) -> Path:
    lines: list[object] = [
        _event("read", {"path": "a"}),
        "",
        "{not json",
        "[1, 2]",
        {"tool": "read"},
        _event("read", {"path": "b"}, colour="red"),
        "   ",
        {"tool": 7, "args": {}},
        _event("read", {"path": "c"}),
    ]
    return _write(tmp_path / "bad.jsonl", lines)


def test_malformed_lines_are_reported_counted_and_skipped(tmp_path: Path, replay: Replay) -> None:
    path = _bad_lines(tmp_path)
    code, out, err = replay("--enable", path)
    assert code == 0
    assert err.splitlines() == [
        f"{path}:3: invalid JSON: Expecting property name enclosed in double quotes (column 2)",
        f"{path}:4: expected a JSON object, got an array",
        f"{path}:5: args: missing",
        f"{path}:6: colour: unknown event field (known: args, error, result, run_id, session, "
        "tool, tool_call_id, ts, type)",
        f"{path}:8: tool: expected a str, got int",
    ]
    assert out.startswith("loopcore replay: 1 file (loopcore), 2 calls in 1 run, 5 malformed")
    code, out, err = replay("--format", "json", path)
    assert json.loads(out)["summary"]["skipped_lines"] == 5
    assert json.loads(out)["summary"]["files"][0]["lines"] == 9
    assert err.endswith("loopcore replay: 5 malformed lines skipped\n")


def test_strict_stops_at_the_first_malformed_line(tmp_path: Path, replay: Replay) -> None:
    path = _bad_lines(tmp_path)
    code, out, err = replay("--strict", path)
    assert (code, out) == (2, "")
    assert err == (
        f"loopcore replay: {path}:3: invalid JSON: Expecting property name enclosed in double "
        "quotes (column 2) (--strict: stopping at the first malformed line)\n"
    )


def test_many_malformed_lines_are_capped_but_counted(tmp_path: Path, replay: Replay) -> None:
    path = _write(tmp_path / "noise.jsonl", ["oops"] * 50 + [_event("read", {})])
    code, out, err = replay("--format", "json", path)
    assert code == 0
    reports = err.splitlines()
    assert len(reports) == MAX_REPORTS + 2
    assert reports[MAX_REPORTS - 1].startswith(f"{path}:{MAX_REPORTS}: invalid JSON")
    assert reports[MAX_REPORTS] == f"{path}: ... {50 - MAX_REPORTS} more malformed lines"
    assert json.loads(out)["summary"]["skipped_lines"] == 50


def test_not_utf8_and_bom(tmp_path: Path, replay: Replay) -> None:
    path = tmp_path / "bytes.jsonl"
    good = json.dumps(_event("read", {"path": "a"})).encode()
    path.write_bytes(b"\xef\xbb\xbf" + good + b"\n" + b'{"tool": "\xff"}\n' + good + b"\n")
    _, out, err = replay("--format", "json", path)
    assert err.splitlines()[0] == f"{path}:2: not UTF-8 text (invalid start byte at byte 11)"
    assert json.loads(out)["summary"]["calls"] == 2  # the byte-order mark is not an error


def test_pi_malformed_entries_unanswered_calls_and_orphan_results(
    tmp_path: Path, replay: Replay
) -> None:
    pi = Pi().user()
    pi.lines.append({"type": "model_change", "provider": "x", "modelId": "y"})  # ignored
    pi.lines.append({"type": "message", "message": "hello"})
    nameless = {"type": "toolCall", "id": "c9", "arguments": {}}
    pi.lines.append({"type": "message", "message": {"role": "assistant", "content": [nameless]}})
    pi.lines.append({"type": "message", "message": {"role": "toolResult", "content": []}})
    pi.lines.append({"id": "x"})
    pi.call("read", {"path": "a"}, "text")
    pi.calls(("exec", {"command": "sleep 100"}))  # never answered
    pi.result("call_404", "read", "late")  # answers nothing
    path = pi.write(tmp_path / "pi.jsonl")
    code, out, err = replay(path)
    assert code == 0
    assert err.splitlines() == [
        f"{path}:4: message: expected an object, got a string",
        f"{path}:5: message.content[0].name: expected a string",
        f"{path}:6: message.toolCallId: expected a string",
        f"{path}:7: type: missing",
    ]
    assert "2 calls in 1 run, 4 malformed lines skipped" in out
    assert "transcripts: 1 tool call never answered" in out
    assert "1 tool result answering no call" in out


def test_unreadable_inputs_are_errors_naming_the_file(tmp_path: Path, replay: Replay) -> None:
    missing = tmp_path / "missing.jsonl"
    code, out, err = replay(EXAMPLE, missing)
    assert (code, out) == (2, "")
    assert err == f"loopcore replay: {missing}: cannot read: No such file or directory\n"
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(gzip.compress(EXAMPLE.read_bytes())[:300])
    code, out, err = replay(broken)
    assert (code, out) == (2, "")
    assert err.startswith(f"loopcore replay: {broken}: cannot read: ")


def test_outputs_never_show_arguments_or_results(tmp_path: Path, replay: Replay) -> None:
    lines = [_event("login", {"password": SECRET}, {"token": SECRET}) for _ in range(25)]
    lines.append({"tool": "login", "args": {"password": SECRET}, "error": SECRET})
    path = _write(tmp_path / "secret.jsonl", lines)
    for fmt in ("table", "json", "csv"):
        code, out, err = replay("--enable", "--format", fmt, path)
        assert code == 1
        assert SECRET not in out + err


def test_progress_bar_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(load_module, "PROGRESS_DELAY", 0.0)  # as if the input took a while
    for stderr, shown in ((io.StringIO(), False), (Terminal(), True)):
        monkeypatch.setattr(sys, "stderr", stderr)
        monkeypatch.setattr(sys, "stdout", io.StringIO())
        assert main(["replay", "--enable", str(EXAMPLE)]) == 1
        assert ("reading:" in stderr.getvalue()) is shown


# -- options ----------------------------------------------------------------------------------


def test_config_file_agent_override_and_set(tmp_path: Path, replay: Replay) -> None:
    config = tmp_path / "openclaw.json5"
    config.write_text(
        "{tools: {loopDetection: {enabled: true}},  // detection on for everyone\n"
        " agents: {list: [{id: 'ops', tools: {loopDetection: {criticalThreshold: 15}}}]}}\n"
    )
    path = _write(tmp_path / "events.jsonl", _stuck_events())
    code, out, _ = replay("--config", config, "--format", "json", path)
    assert json.loads(out)["runs"][0]["first_block"]["call"] == 21
    code, out, _ = replay("--config", config, "--agent", "ops", "--format", "json", path)
    document = json.loads(out)
    assert document["summary"]["settings"]["criticalThreshold"] == 15
    assert document["runs"][0]["first_block"]["call"] == 16
    code, out, _ = replay(
        "--config",
        config,
        "--agent",
        "ops",
        "--set",
        "criticalThreshold=22",
        "--format",
        "json",
        path,
    )
    assert json.loads(out)["runs"][0]["first_block"]["call"] == 23
    code, out, _ = replay("--config", config, "--set", "enabled=false", "--enable", path)
    assert code == 1  # --enable wins over the file and over --set
    assert "settings: enabled=true" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "warningThreshold"], "--set: expected KEY=VALUE, got 'warningThreshold'"),
        (
            ["--set", "warningThreshold=x"],
            "--set warningThreshold=x: tools.loopDetection.warningThreshold: "
            "expected a positive integer up to 1000000, got 'x'",
        ),
        (["--set", "warningTreshold=3"], "did you mean 'warningThreshold'?"),
        (["--agent", "ops"], "--agent: needs --config FILE"),
        (["--sweep", "x"], "--sweep: expected KEY=START:STOP[:STEP], got 'x'"),
        (["--sweep", "warningThreshold=9:3"], "--sweep: START (9) is greater than STOP (3)"),
        (["--sweep", "warningThreshold=1:9:0"], "--sweep: STEP must be a positive integer, got 0"),
        (["--sweep", "warningThreshold=1:5000"], "--sweep: 5000 values is more than 1000"),
        (
            ["--sweep", "historySize=0:3"],
            "--sweep historySize=0: tools.loopDetection.historySize: expected a positive integer",
        ),
        (["--config", "/nonexistent/openclaw.json5"], "cannot read config file"),
        (["--plot", "x.png", "--sweep", "warningThreshold=1:2"], "cannot be combined with --sweep"),
    ],
)
def test_usage_errors_exit_2_naming_the_option(
    args: list[str], message: str, replay: Replay
) -> None:
    code, out, err = replay(*args, EXAMPLE)
    assert (code, out) == (2, "")
    assert err.startswith("loopcore replay: ")
    assert message in err


def test_argparse_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", "--format", "xml", str(EXAMPLE)])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit) as exit_info:
        main(["replay"])
    assert exit_info.value.code == 2
    assert "TRACE" in capsys.readouterr().err


# -- sweeps -------------------------------------------------------------------------------------


def test_sweep_table_json_and_csv(tmp_path: Path, replay: Replay) -> None:
    path = _write(tmp_path / "events.jsonl", _stuck_events())
    code, out, _ = replay("--enable", "--sweep", "criticalThreshold=18:26:4", path)
    assert code == 1  # some values block
    lines = out.splitlines()
    at = lines.index("sweep of criticalThreshold from 18 to 26 step 4 (3 values), over 28 calls:")
    assert [" ".join(line.split()) for line in lines[at + 1 :]] == [
        "criticalThreshold runs warned runs blocked runs aborted calls saved",
        "18 1 1 0 7",
        "22 1 1 0 3",
        "26 1 0 0 0",
    ]
    code, out, _ = replay(
        "--enable", "--sweep", "criticalThreshold=18:26:4", "--format", "json", path
    )
    document = json.loads(out)
    assert document["setting"] == "criticalThreshold"
    assert document["sweep"][1] == {
        "value": 22,
        "runs_warned": 1,
        "runs_blocked": 1,
        "runs_aborted": 0,
        "calls_saved": 3,
    }
    code, out, _ = replay(
        "--enable", "--sweep", "criticalThreshold=18:26:4", "--format", "csv", path
    )
    assert out.splitlines() == [
        "setting,value,runs_warned,runs_blocked,runs_aborted,calls_saved",
        "criticalThreshold,18,1,1,0,7",
        "criticalThreshold,22,1,1,0,3",
        "criticalThreshold,26,1,0,0,0",
    ]
    assert replay("--enable", "--sweep", "criticalThreshold=26:28", path)[0] == 0


def test_sweep_agrees_with_one_replay_per_value(replay: Replay) -> None:
    _, out, _ = replay(
        "--enable", "--sweep", "warningThreshold=5:12", "--set", "criticalThreshold=12",
        "--format", "json", EXAMPLE,
    )  # fmt: skip
    swept = json.loads(out)["sweep"]
    assert [row["value"] for row in swept] == list(range(5, 13))
    for row in swept:
        _, single, _ = replay(
            "--enable", "--set", "criticalThreshold=12",
            "--set", f"warningThreshold={row['value']}", "--format", "json", EXAMPLE,
        )  # fmt: skip
        summary = json.loads(single)["summary"]
        keys = ("runs_warned", "runs_blocked", "runs_aborted", "calls_saved")
        assert {k: row[k] for k in keys} == {k: summary[k] for k in keys}


# -- plots --------------------------------------------------------------------------------------


def test_plot_writes_a_png(tmp_path: Path, replay: Replay) -> None:
    image = pytest.importorskip("matplotlib.image")
    target = tmp_path / "timeline.png"
    code, _, err = replay("--enable", "--plot", target, EXAMPLE)
    assert (code, err) == (1, "")
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = image.imread(os.fspath(target))
    height, width, _ = pixels.shape
    assert (height > 100, width > 500) == (True, True)


def test_plot_without_matplotlib_is_a_clear_error(
    tmp_path: Path, replay: Replay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    target = tmp_path / "timeline.png"
    code, out, err = replay("--enable", "--plot", target, EXAMPLE)
    assert (code, out) == (2, "")
    assert err == "loopcore replay: --plot needs matplotlib: pip install 'loopcore[plot]'\n"
    assert not target.exists()


def test_plot_to_an_unwritable_path_is_an_error(tmp_path: Path, replay: Replay) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "missing-dir" / "timeline.png"
    code, _, err = replay("--enable", "--plot", target, EXAMPLE)
    assert code == 2
    assert err == f"loopcore replay: --plot: cannot write {target}: No such file or directory\n"


# -- review findings ----------------------------------------------------------------------------


def test_lines_python_cannot_parse_are_malformed_not_crashes(
    tmp_path: Path, replay: Replay
) -> None:
    huge = '{"tool": "a", "args": {"x": ' + "1" * 5000 + "}}"
    nan = '{"tool": "a", "args": {}, "session": NaN}'
    path = _write(tmp_path / "odd.jsonl", [huge, nan, *_stuck_events(3)])
    code, _, err = replay("--enable", path)
    assert code == 0
    lines = err.splitlines()
    assert lines[0].startswith(f"{path}:1: invalid JSON: ")
    assert lines[1] == f"{path}:2: session: NaN is not a usable session id"


def test_set_overrides_apply_together_in_any_order(
    tmp_path: Path, replay: Replay, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path / "t.jsonl", _stuck_events())
    outs = []
    for order in (
        ("criticalThreshold=5", "warningThreshold=3"),
        ("warningThreshold=3", "criticalThreshold=5"),
    ):
        caplog.clear()
        code, out, _ = replay(
            "--enable", "--set", order[0], "--set", order[1], "--format", "json", path
        )
        assert code == 1
        settings = json.loads(out)["summary"]["settings"]
        assert (settings["warningThreshold"], settings["criticalThreshold"]) == (3, 5)
        assert not [r for r in caplog.records if r.name == "loopcore"]  # nothing was repaired
        outs.append(out)
    assert outs[0] == outs[1]


def test_a_bad_plot_target_is_refused_before_the_replay(tmp_path: Path, replay: Replay) -> None:
    pytest.importorskip("matplotlib")
    code, out, err = replay("--enable", "--plot", tmp_path, EXAMPLE)
    assert (code, out) == (2, "")
    assert err == f"loopcore replay: --plot: cannot write {tmp_path}: Is a directory\n"


def test_an_unreadable_directory_is_an_error_naming_it(
    tmp_path: Path, replay: Replay, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()

    def refuse(path: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "scandir", refuse)  # root may read anything; pretend otherwise
    code, out, err = replay(locked)
    assert (code, out) == (2, "")
    assert err == f"loopcore replay: {locked}: cannot read: Permission denied\n"


def test_an_internal_error_exits_2_not_1(replay: Replay, monkeypatch: pytest.MonkeyPatch) -> None:
    from loopcore.cli import replay as replay_module

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(replay_module, "scan", broken)
    code, out, err = replay("--enable", EXAMPLE)
    assert (code, out) == (2, "")
    assert "RuntimeError: boom" in err
    assert err.endswith("loopcore replay: internal error (please report it)\n")

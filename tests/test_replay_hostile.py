"""``loopcore replay`` with hostile options and trace values: one-line errors, valid output.

Every option error is one usage line (exit status 2) naming the option, however
large or deep the value; JSON never carries ``Infinity`` / ``NaN``; the table
escapes control characters taken from traces; CSV keeps them, quoted.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from loopcore.cli.options import MAX_SWEEP_VALUES, UsageError, parse_sweep
from loopcore.formats._text import printable
from tests.conftest import Replay

EXAMPLE = Path(__file__).resolve().parent / "data" / "stuck-session.jsonl"
HUGE = "1" * 5000
SETTINGS = [
    "enabled",
    "historySize",
    "warningThreshold",
    "criticalThreshold",
    "unknownToolThreshold",
    "globalCircuitBreakerThreshold",
    "detectors.genericRepeat",
    "detectors.knownPollNoProgress",
    "detectors.pingPong",
    "postCompactionGuard.windowSize",
]


def _usage_error(replay: Replay, *args: object) -> str:
    """The one line of a usage error (exit status 2, nothing on stdout)."""
    code, out, err = replay(*args, EXAMPLE)
    assert (code, out) == (2, "")
    assert "internal error" not in err
    assert "Traceback" not in err
    assert err.endswith("\n")
    assert err.count("\n") == 1, err[:500]
    assert len(err) < 400, err[:500]
    assert err.startswith("loopcore replay: ")
    return err[len("loopcore replay: ") : -1]


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _stuck(
    tool: str = '"read"', session: str = "1", run_id: str = '"r1"', calls: int = 21
) -> list[str]:
    """``calls`` identical calls (JSON text, so that any value can be spelled): a block at 21."""
    line = f'{{"tool": {tool}, "args": {{}}, "result": "same", "session": {session}, '
    return [line + f'"run_id": {run_id}}}'] * calls


# -- option errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweep", f"warningThreshold=1:{HUGE}"], "--sweep: STOP has 5000 digits"),
        (["--sweep", f"warningThreshold=-{HUGE}:3"], "--sweep: START has 5000 digits"),
        (["--sweep", f"warningThreshold=1:3:{HUGE}"], "--sweep: STEP has 5000 digits"),
        (["--sweep", f"historySize=1:{'9' * 4000}"], "--sweep: STOP has 4000 digits"),
        (["--set", f"warningThreshold={HUGE}"], "--set warningThreshold=111"),
        (["--set", f"warningThreshold=-{HUGE}"], "--set warningThreshold=-111"),
        (["--set", f"historySize={'9' * 4000}"], "the number has 4000 digits"),
        (["--set", f"detectors.pingPong={HUGE}"], "--set detectors.pingPong=111"),
        (["--set", f"postCompactionGuard.windowSize={HUGE}.5"], "--set postCompactionGuard"),
        (["--set", f"warningThreshold={HUGE}e{HUGE}"], "--set warningThreshold=111"),
        (["--max-line-bytes", HUGE], "--max-line-bytes: N has 5000 digits"),
        (["--max-line-bytes", "0"], "--max-line-bytes: expected a positive integer (bytes)"),
        (["--max-line-bytes", "-5"], "--max-line-bytes: expected a positive integer"),
        (["--max-line-bytes", "1e6"], "--max-line-bytes: expected a positive integer"),
        (["--max-line-bytes", "64MiB"], "--max-line-bytes: expected a positive integer"),
        (["--sweep", "x" * 5000], "--sweep: expected KEY=START:STOP[:STEP], got 'xxx"),
        (["--set", "x" * 5000], "--set: expected KEY=VALUE, got 'xxx"),
    ],
)
def test_huge_option_values_are_one_line_usage_errors(
    args: list[str], message: str, replay: Replay
) -> None:
    assert message in _usage_error(replay, *args)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("depth", [5000, 990, 100])
@pytest.mark.parametrize("kind", ["array", "object"])
def test_deeply_nested_set_values_are_one_line_usage_errors(
    setting: str, depth: int, kind: str, replay: Replay
) -> None:
    nested = {"array": ("[", "", "]"), "object": ('{"a": ', "1", "}")}
    opening, inner, closing = nested[kind]
    value = opening * depth + inner + closing * depth
    assert _usage_error(replay, "--set", f"{setting}={value}").startswith(f"--set {setting}=")


def test_sweep_values_are_counted_not_listed() -> None:
    assert MAX_SWEEP_VALUES == 1000
    assert len(parse_sweep("historySize=1:1000", {}).values) == 1000
    assert parse_sweep("historySize=1:1999:2", {}).values[-1] == 1999
    with pytest.raises(UsageError, match=r"^--sweep: 1001 values is more than 1000; "):
        parse_sweep("historySize=1:1001", {})
    with pytest.raises(UsageError, match=r"^--sweep: 1000000000000000000 values is more"):
        parse_sweep("historySize=0:999999999999999999:1", {})
    with pytest.raises(UsageError, match=r"^--sweep: STOP has 19 digits; at most 18"):
        parse_sweep("historySize=0:1000000000000000000", {})


def test_control_characters_in_options_stay_on_one_line(tmp_path: Path, replay: Replay) -> None:
    message = _usage_error(replay, "--set", "warning\nThreshold\x1b[2J=3")
    assert "warning\\nThreshold\\x1b[2J" in message
    missing = tmp_path / "a\nforged: line.jsonl"
    code, out, err = replay(missing)
    assert (code, out) == (2, "")
    assert (
        err
        == f"loopcore replay: {printable(str(missing))}: cannot read: No such file or directory\n"
    )
    assert "a\\nforged: line.jsonl" in err


# -- JSON ---------------------------------------------------------------------------------------


def _strict_json(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise AssertionError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_json_output_writes_non_finite_session_ids_as_strings(
    tmp_path: Path, replay: Replay
) -> None:
    path = _write(tmp_path / "inf.jsonl", _stuck(session="1e400") + _stuck(session="-1e999"))
    code, out, err = replay("--enable", "--format", "json", path)
    assert (code, err) == (1, "")
    assert "Infinity" not in out
    document = _strict_json(out)
    assert [r["session"] for r in document["runs"]] == ["inf", "-inf"]
    assert {c["session"] for c in document["calls"]} == {"inf", "-inf"}
    code, out, _ = replay("--enable", "--sweep", "warningThreshold=3:4", "--format", "json", path)
    assert _strict_json(out)["sweep"][0]["value"] == 3
    # Finite floats stay numbers; NaN is still no session id (a malformed line).
    path = _write(tmp_path / "floats.jsonl", _stuck(session="2.5") + _stuck(session="NaN", calls=1))
    code, out, err = replay("--enable", "--format", "json", path)
    assert [r["session"] for r in _strict_json(out)["runs"]] == [2.5]
    assert "session: NaN is not a usable session id" in err


# -- the table ------------------------------------------------------------------------------------


HOSTILE_TOOL = json.dumps("re\x1b[31mad\nloopcore replay: forged")
HOSTILE_RUN = json.dumps("r\r\n\x07\u2028\u202e\x9b1")


def test_the_table_escapes_control_characters_from_traces(tmp_path: Path, replay: Replay) -> None:
    lines = _stuck(tool=HOSTILE_TOOL, session=json.dumps("s\ttab\nnext"), run_id=HOSTILE_RUN)
    lines += _stuck(tool='"a\\ud800"', session='"lone\\udc80"', run_id='"q\\u007f"')
    path = _write(tmp_path / "ctl.jsonl", lines)
    code, out, err = replay("--enable", path)
    assert (code, err) == (1, "")
    out.encode("utf-8")  # no lone surrogate left: it could not be written to a UTF-8 terminal
    for raw in ("\x1b", "\r", "\x07", "\t", "\u2028", "\u202e", "\x9b", "\x7f", "\ud800"):
        assert raw not in out
    assert not [line for line in out.splitlines() if line.startswith("loopcore replay: forged")]
    assert len(out.splitlines()) == len(_clean_table(replay, tmp_path).splitlines())
    assert "s\\ttab\\nnext  r\\r\\n\\x07\\u2028\\u202e\\x9b1" in out
    assert re.search(r"^lone\\udc80 +q\\x7f ", out, re.MULTILINE)
    # The "why" lines name the tool escaped (whatever the message's wording around it).
    why = [line for line in out.splitlines() if "CRITICAL:" in line]
    assert len(why) == 2
    assert "re\\x1b[31mad\\nloopcore replay: forged" in why[0]
    assert "20 times" in why[0]
    assert "a\\ud800" in why[1]


def _clean_table(replay: Replay, tmp_path: Path) -> str:
    """The same report with plain names: as many lines as the hostile one."""
    path = _write(tmp_path / "plain.jsonl", _stuck(session='"s"') + _stuck(session='"t"'))
    return replay("--enable", path)[1]


def test_malformed_line_reports_escape_trace_text(tmp_path: Path, replay: Replay) -> None:
    path = _write(
        tmp_path / "bad.jsonl",
        ['{"tool": "a", "args": {}, "\\u001b[2J\\nforged": 1}', *_stuck()],
    )
    code, _, err = replay("--format", "json", path)
    assert code == 0
    assert err.splitlines() == [
        f"{path}:1: \\x1b[2J\\nforged: unknown event field (known: args, error, result, run_id, "
        "session, tool, tool_call_id, ts, type)",
        "loopcore replay: 1 malformed line skipped",
    ]


def test_printable_escapes_only_what_moves_the_cursor() -> None:
    assert printable("plain ascii, ünïcödé, 中文, emoji 🙂, back\\slash") == (
        "plain ascii, ünïcödé, 中文, emoji 🙂, back\\slash"
    )
    assert printable("\x00\x08\t\n\r\x1b\x7f\x80\x9f") == "\\x00\\x08\\t\\n\\r\\x1b\\x7f\\x80\\x9f"
    assert printable("\u2028\u2029\u202a\u202e\u2066\u2069") == (
        "\\u2028\\u2029\\u202a\\u202e\\u2066\\u2069"
    )
    assert printable("\ud800\udfff") == "\\ud800\\udfff"
    assert printable("") == ""


# -- CSV ------------------------------------------------------------------------------------------


def test_csv_keeps_trace_text_as_read_and_quoted(tmp_path: Path, replay: Replay) -> None:
    lines = _stuck(tool=HOSTILE_TOOL, session=json.dumps('s,"quoted"\nnext'), run_id=HOSTILE_RUN)
    lines += _stuck(tool='"a\\ud800"', session='"lone\\udc80"', run_id='"q"')
    lines += _stuck(session="1e400", run_id='"inf"')
    path = _write(tmp_path / "ctl.jsonl", lines)
    code, out, err = replay("--enable", "--format", "csv", path)
    assert (code, err) == (1, "")
    rows = list(csv.DictReader(io.StringIO(out, newline="")))
    assert len(rows) == 3
    assert (rows[0]["session"], rows[0]["run_id"]) == (
        's,"quoted"\nnext',
        "r\r\n\x07\u2028\u202e\x9b1",
    )
    message = rows[0]["first_block_message"]
    assert message.startswith("CRITICAL:")
    assert "re\x1b[31mad\nloopcore replay: forged" in message  # as read, CSV-quoted
    assert "20 times" in message
    # A lone surrogate cannot be written as UTF-8: it is the one thing escaped.
    assert (rows[1]["session"], rows[1]["run_id"]) == ("lone\\udc80", "q")
    assert rows[1]["first_block_message"].startswith("CRITICAL:")
    assert "a\\ud800" in rows[1]["first_block_message"]
    assert (rows[2]["session"], rows[2]["run_id"]) == ("inf", "inf")

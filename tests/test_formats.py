"""Trace readers (``loopcore.formats``) called directly, as a library, not through the CLI."""

from __future__ import annotations

import gzip
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

from loopcore.batch import CallTable, scan
from loopcore.formats import (
    MAX_LINE_BYTES,
    MAX_REPORTS,
    TRACE_SUFFIXES,
    FileSummary,
    InputError,
    Traces,
    load,
)
from loopcore.formats._files import expand

EXAMPLE = Path(__file__).resolve().parent / "data" / "stuck-session.jsonl"


def _events(path: Path, lines: list[object]) -> Path:
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    path.write_text(text, encoding="utf-8")
    return path


def test_load_reads_a_pi_transcript_into_one_table() -> None:
    err = io.StringIO()
    traces = load([str(EXAMPLE)], progress=False, err=err)
    assert isinstance(traces, Traces)
    assert isinstance(traces.table, CallTable)
    assert err.getvalue() == ""
    assert len(traces.table) == 66
    [summary] = traces.files
    assert isinstance(summary, FileSummary)
    assert (summary.path, summary.format, summary.calls, summary.first_row) == (
        str(EXAMPLE),
        "pi",
        66,
        0,
    )
    assert (traces.skipped, traces.unanswered, traces.orphan_results) == (0, 0, 0)
    assert len(traces.lines) == len(traces.file_index) == 66
    assert not traces.file_index.any()
    assert traces.lines.dtype == traces.file_index.dtype == np.int64
    # The table scans like any other: the example's verdicts are there.
    result = scan(traces.table, {"enabled": True})
    assert int(np.count_nonzero(result.level == 2)) > 0


def test_load_joins_files_and_remembers_where_each_call_came_from(tmp_path: Path) -> None:
    call = {"tool": "read", "args": {"path": "a"}, "result": "same"}
    first = _events(tmp_path / "a.jsonl", [call, "", call])
    second = tmp_path / "b.jsonl.gz"
    second.write_bytes(gzip.compress(json.dumps(call).encode() + b"\n"))
    traces = load([str(first), str(second)], progress=False, err=io.StringIO())
    assert [f.format for f in traces.files] == ["loopcore", "loopcore"]
    assert [f.calls for f in traces.files] == [2, 1]
    assert traces.file_index.tolist() == [0, 0, 1]
    assert traces.lines.tolist() == [1, 3, 1]
    assert ".jsonl.gz" in TRACE_SUFFIXES


def test_malformed_lines_are_reported_on_err_and_counted(tmp_path: Path) -> None:
    path = _events(tmp_path / "noise.jsonl", ["oops"] * (MAX_REPORTS + 3))
    err = io.StringIO()
    traces = load([str(path)], progress=False, err=err)
    assert traces.skipped == MAX_REPORTS + 3
    assert len(traces.table) == 0
    assert err.getvalue().splitlines()[-1] == f"{path}: ... 3 more malformed lines"
    with pytest.raises(InputError, match=r"noise.jsonl:1: invalid JSON.*--strict"):
        load([str(path)], strict=True, progress=False, err=io.StringIO())


def test_an_unreadable_input_is_an_input_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(InputError) as info:
        load([str(missing)], progress=False, err=io.StringIO())
    assert str(info.value) == f"{missing}: cannot read: No such file or directory"
    with pytest.raises(InputError, match="directory holds no trace files"):
        load([str(tmp_path)], progress=False, err=io.StringIO())


def test_load_skips_lines_longer_than_max_line_bytes(tmp_path: Path) -> None:
    call = {"tool": "read", "args": {"path": "a"}, "result": "same"}
    long_call = {"tool": "read", "args": {"path": "b" * 600}, "result": "same"}
    path = _events(tmp_path / "long.jsonl", [call, long_call, call])
    err = io.StringIO()
    traces = load([str(path)], progress=False, err=err, max_line_bytes=512)
    assert err.getvalue() == f"{path}:2: line longer than 512 bytes (--max-line-bytes)\n"
    assert (traces.skipped, len(traces.table), traces.files[0].lines) == (1, 2, 3)
    assert traces.lines.tolist() == [1, 3]
    assert len(load([str(path)], progress=False, err=io.StringIO()).table) == 3
    assert MAX_LINE_BYTES == 64 << 20  # the default
    for bad in (0, -1, True, 1.5, "512", 1 << 70):
        with pytest.raises(ValueError, match="max_line_bytes: expected a positive integer"):
            load([str(path)], progress=False, err=io.StringIO(), max_line_bytes=bad)  # type: ignore[arg-type]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_directory_walk_lists_only_regular_files(tmp_path: Path) -> None:
    _events(tmp_path / "a.jsonl", [])
    os.mkfifo(tmp_path / "b.jsonl")  # listed, a replay would wait on it for ever
    missing = tmp_path / "c.jsonl"
    os.symlink(tmp_path / "gone", missing)  # kept: opening it says what is wrong
    assert expand([str(tmp_path)]) == [str(tmp_path / "a.jsonl"), str(missing)]
    # A FIFO named as such is a stream to read, not skipped.
    assert expand([str(tmp_path / "b.jsonl")]) == [str(tmp_path / "b.jsonl")]

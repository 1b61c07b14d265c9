"""Trace readers (``loopcore.formats``) called directly, as a library, not through the CLI."""

from __future__ import annotations

import gzip
import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore import hash_call, hash_outcome
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
from loopcore.formats._json import decode_located

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


# -- chat conversations -------------------------------------------------------------------------


def _chat_files(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """One small file per way of writing each format, with the format it must be read as."""
    from tests.chats import AnthropicChat, OpenAIChat, ResponsesChat, write_json, write_jsonl

    def two(chat: Any) -> Any:
        chat.call("read", {"path": "a"}, "text")
        first, second = chat.calls(("ls", {"path": "."}), ("grep", {"q": "x"}))
        chat.answer(second, "no match")
        chat.answer(first, "a b")
        return chat

    call = {"tool": "read", "args": {"path": "a"}, "result": "same"}
    pi = [
        {"type": "session", "version": 3, "id": "s", "cwd": "/w"},
        {"type": "message", "message": {"role": "user", "content": "go"}},
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {}}],
            },
        },
    ]
    files = {
        "loopcore": (_events(tmp_path / "events.jsonl", [call] * 3), "loopcore"),
        "pi": (_events(tmp_path / "pi.jsonl", pi), "pi"),
    }
    for name, builder, fmt in (
        ("openai", OpenAIChat, "openai-chat"),
        ("responses", ResponsesChat, "openai-responses"),
        ("anthropic", AnthropicChat, "anthropic"),
    ):
        chat = two(builder())
        files[f"{name} messages jsonl"] = (
            write_jsonl(tmp_path / f"{name}-messages.jsonl", chat.messages),
            fmt,
        )
        files[f"{name} records jsonl"] = (
            write_jsonl(tmp_path / f"{name}-records.jsonl", [chat.record(id="r")] * 2),
            fmt,
        )
        files[f"{name} json record"] = (write_json(tmp_path / f"{name}.json", chat.record()), fmt)
        files[f"{name} json list"] = (
            write_json(tmp_path / f"{name}-list.json", [chat.messages, chat.record()]),
            fmt,
        )
    return files


def test_every_format_is_detected_and_read(tmp_path: Path) -> None:
    for label, (path, fmt) in _chat_files(tmp_path).items():
        err = io.StringIO()
        traces = load([str(path)], progress=False, err=err)
        assert err.getvalue() == "", label
        assert traces.files[0].format == fmt, label
        assert len(traces.table) > 0, label
        names = {traces.table.name(int(h)) for h in traces.table.tool_hash}
        if fmt not in ("loopcore", "pi"):
            assert names == {"read", "ls", "grep"}, label
            assert len(traces.table) % 3 == 0, label
        # Forcing the detected format reads the same calls.
        forced = load([str(path)], progress=False, err=io.StringIO(), input_format=fmt)
        assert forced.table.args_hash.tolist() == traces.table.args_hash.tolist(), label


def test_an_unknown_input_format_is_refused(tmp_path: Path) -> None:
    path = _events(tmp_path / "a.jsonl", [])
    with pytest.raises(ValueError, match="input_format: expected one of loopcore, pi, openai-chat"):
        load([str(path)], progress=False, err=io.StringIO(), input_format="csv")


def test_arguments_that_are_not_json_are_the_raw_string(tmp_path: Path) -> None:
    from tests.chats import OpenAIChat, write_json

    chat = OpenAIChat()
    chat.call("exec", "ls -la {", "total 0")  # a model that wrote the command, not JSON
    chat.call("exec", '{"command": "ls"}', "total 0")
    path = write_json(tmp_path / "raw.json", chat.record())
    traces = load([str(path)], progress=False, err=io.StringIO())
    assert traces.table.args_hash.tolist() == [
        hash_call("exec", "ls -la {"),
        hash_call("exec", {"command": "ls"}),
    ]


@pytest.mark.parametrize(
    ("content", "is_error", "error"),
    [
        ("permission denied", True, "permission denied"),
        ([{"type": "text", "text": "no such file"}], True, "no such file"),
        (None, True, ""),
        ('{"error": "Unknown tool: browse"}', None, "Unknown tool: browse"),
        ('{"error": {"type": "quota", "message": "rate limited"}}', None, "rate limited"),
        ({"error": "timed out", "ok": False}, None, "timed out"),
        ("Error: connection refused", None, "Error: connection refused"),
    ],
)
def test_flagged_and_error_shaped_answers_are_errors(
    content: Any, is_error: Any, error: str, tmp_path: Path
) -> None:
    answer: dict[str, Any] = {"type": "tool_result", "tool_use_id": "t1", "content": content}
    if is_error is not None:
        answer["is_error"] = is_error
    messages = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}],
        },
        {"role": "user", "content": [answer]},
    ]
    path = _events(tmp_path / "a.jsonl", [{"messages": messages}])
    table = load([str(path)], progress=False, err=io.StringIO()).table
    assert table.result_hash.tolist() == [hash_outcome("x", {}, error=error)[0]]


@pytest.mark.parametrize(
    "content",
    ["all good", '{"error": null, "rows": 3}', '{"errors": 0}', "no error: fine", [], {"ok": 1}],
)
def test_other_answers_are_results(content: Any, tmp_path: Path) -> None:
    messages = [
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "function": {"name": "x", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": content},
    ]
    path = _events(tmp_path / "a.jsonl", messages)
    table = load([str(path)], progress=False, err=io.StringIO()).table
    assert table.has_result.tolist() == [True]
    errors = {hash_outcome("x", {}, error=str(content))[0], hash_outcome("x", {}, error="")[0]}
    assert int(table.result_hash[0]) not in errors


def test_a_broken_first_jsonl_line_is_not_taken_for_a_document(tmp_path: Path) -> None:
    call = {"tool": "read", "args": {"path": "a"}, "result": "same"}
    path = _events(tmp_path / "cut.jsonl", ['{"tool": "read", "args": {', call, call])
    err = io.StringIO()
    traces = load([str(path)], progress=False, err=err)
    assert (traces.files[0].format, len(traces.table), traces.skipped) == ("loopcore", 2, 1)
    assert err.getvalue().startswith(f"{path}:1: invalid JSON: ")


def test_a_bad_or_too_long_document_is_one_malformed_entry(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{\n  "messages": [\n    {"role": "user",, "content": "x"}\n  ]\n}\n')
    err = io.StringIO()
    traces = load([str(bad)], progress=False, err=err)
    assert err.getvalue() == (
        f"{bad}:3: invalid JSON document: Expecting property name enclosed in double quotes "
        "(column 21)\n"
    )
    assert (traces.skipped, traces.files[0].lines, len(traces.table)) == (1, 5, 0)
    from tests.chats import OpenAIChat, write_json

    chat = OpenAIChat()
    for _ in range(20):
        chat.call("read", {"path": "a" * 50}, "same")
    big = write_json(tmp_path / "big.json", chat.record())
    err = io.StringIO()
    traces = load([str(big)], progress=False, err=err, max_line_bytes=1000)
    assert err.getvalue() == f"{big}:1: JSON document longer than 1000 bytes (--max-line-bytes)\n"
    assert traces.files[0].lines == len(big.read_text().splitlines())  # read to its end
    assert (traces.skipped, len(traces.table)) == (1, 0)
    assert len(load([str(big)], progress=False, err=io.StringIO()).table) == 20


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(value=_JSON, indent=st.sampled_from([None, 0, 1, 2, 4]))
def test_decode_located_reads_what_json_reads(value: Any, indent: int | None) -> None:
    text = json.dumps(value, indent=indent)
    decoded, lines = decode_located(text)
    assert decoded == json.loads(text)
    # Every located container starts on a line where a bracket is.
    starts = [i for i, ch in enumerate(text) if ch in "[{"]
    assert set(lines.values()) <= {text.count("\n", 0, i) + 1 for i in starts}
    if isinstance(decoded, (list, dict)):
        assert lines[id(decoded)] == 1


def test_decode_located_gives_each_record_and_message_its_line() -> None:
    records = [{"id": "a", "messages": [{"role": "user"}, {"role": "tool"}]}, [{"role": "x"}]]
    text = json.dumps(records, indent=1)
    value, lines = decode_located(text)
    rows = text.splitlines()
    for container in (value[0], value[0]["messages"][0], value[0]["messages"][1], value[1][0]):
        line = rows[lines[id(container)] - 1]
        assert line.strip() in ("{", "["), line
        following = rows[lines[id(container)]]
        first_key = next(iter(container)) if isinstance(container, dict) else None
        assert first_key is None or f'"{first_key}"' in following
    for bad in ('{"a": 1', "[1 2]", '{"a" 1}', "{1: 2}", "[1] x"):
        with pytest.raises(json.JSONDecodeError):
            decode_located(bad)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{\n "messages": ' + "[" * 5000 + "]" * 5000 + "\n}\n", "nested too deeply"),
        ('{\n "messages": [' + "1" * 5000 + "]\n}\n", "Exceeds the limit"),
        ('[\n {"id": "\x1b"}\n]\n', "Invalid control character"),
        ('[\n {"id": "a"}\n]\n\xff\n', "not UTF-8 text"),
    ],
)
def test_a_hostile_document_is_one_report_never_a_crash(
    text: str, reason: str, tmp_path: Path
) -> None:
    path = tmp_path / "hostile.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff"))
    err = io.StringIO()
    traces = load([str(path)], progress=False, err=err)
    [report] = err.getvalue().splitlines()
    assert report.startswith(f"{path}:")
    assert reason in report
    assert (traces.skipped, len(traces.table)) == (1, 0)

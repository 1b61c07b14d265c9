"""``loopcore replay`` on chat conversations: the examples, sessions and runs, outcomes, forcing.

OpenAI Chat Completions, OpenAI Responses and Anthropic Messages conversations,
as JSONL (a message a line, or a record a line) or as one JSON document.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from loopcore import LoopDetector
from loopcore.cli import main
from tests.chats import AnthropicChat, OpenAIChat, ResponsesChat, write_json, write_jsonl
from tests.conftest import Replay

DATA = Path(__file__).resolve().parent / "data"
SHIPPED = Path(__file__).resolve().parent.parent / "examples"
EXAMPLES = {
    "openai-chat-conversation.json": ("openai-chat", "get_deployment_status"),
    "anthropic-conversation.json": ("anthropic", "check_job_status"),
    "openai-responses-items.jsonl": ("openai-responses", "get_task"),
}


def _document(replay: Replay, *args: object) -> dict[str, Any]:
    code, out, err = replay("--enable", "--format", "json", *args)
    assert code in (0, 1), err
    document: dict[str, Any] = json.loads(out)
    return document


# -- the shipped examples ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_copies_are_the_shipped_examples(name: str) -> None:
    if not (SHIPPED / name).exists():
        pytest.skip("examples/ is not next to this copy of the tests")
    assert (DATA / name).read_bytes() == (SHIPPED / name).read_bytes()


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_report_the_stuck_poll(name: str, replay: Replay) -> None:
    path = DATA / name
    fmt, poller = EXAMPLES[name]
    code, out, err = replay("--enable", path)
    assert (code, err) == (1, "")
    assert f"1 file ({fmt})" in out.splitlines()[0]
    [why] = [line for line in out.splitlines() if "CRITICAL:" in line]
    assert poller in why
    assert "20 times" in why
    document = _document(replay, path)
    assert document["summary"]["files"][0]["format"] == fmt
    polls = [c for c in document["calls"] if c["tool"] == poller]
    warning = next(c for c in polls if c["level"] == "warning")
    block = next(c for c in polls if c["level"] == "critical")
    # The seed's rules on identical polls: a warning at 10 repeats, a block at 20.
    assert (warning["count"], block["count"]) == (10, 20)
    assert block["call"] - warning["call"] == 10
    assert warning["detector"] == block["detector"] == "generic_repeat"
    [run] = document["runs"]
    assert run["first_block"]["tool"] == poller
    assert run["saved"] == run["calls"] - block["call"] + 1
    # The hit points at the assistant turn that made the call.
    lines = path.read_text().splitlines()
    if name.endswith(".json"):
        assert lines[block["line"] - 1].strip() == "{"
        assert '"role": "assistant"' in lines[block["line"]]
    else:
        assert json.loads(lines[block["line"] - 1])["name"] == poller


def _openai_calls(path: Path) -> list[tuple[str, Any, Any, Any]]:
    """The example's calls in order, each with its answer, read here without the reader."""
    messages = json.loads(path.read_text())["messages"]
    answers = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    out = []
    for message in messages:
        for entry in message.get("tool_calls") or []:
            function = entry["function"]
            text = answers[entry["id"]]
            error = json.loads(text)["error"] if text.startswith('{"error"') else None
            result = None if error else {"content": [{"type": "text", "text": text}]}
            out.append((function["name"], json.loads(function["arguments"]), result, error))
    return out


def test_openai_example_matches_a_sequential_detector(replay: Replay) -> None:
    path = DATA / "openai-chat-conversation.json"
    detector = LoopDetector({"enabled": True})
    expected = {}
    for number, (name, args, result, error) in enumerate(_openai_calls(path), 1):
        verdict = detector.check(name, args)
        detector.record_call(name, args)
        if error is not None:
            detector.record_outcome(name, args, error=error)
        else:
            detector.record_outcome(name, args, result=result)
        if verdict.stuck:
            expected[number] = (verdict.level, verdict.detector, verdict.count)
    document = _document(replay, path)
    replayed = {c["call"]: (c["level"], c["detector"], c["count"]) for c in document["calls"]}
    assert replayed == expected
    assert len(expected) > 10


def test_the_examples_directory_reads_every_format(replay: Replay) -> None:
    if not SHIPPED.exists():
        pytest.skip("examples/ is not next to this copy of the tests")
    document = _document(replay, SHIPPED)
    formats = {f["format"] for f in document["summary"]["files"]}
    assert formats == {"pi", "openai-chat", "openai-responses", "anthropic"}


# -- sessions, runs and records ---------------------------------------------------------------


def _stuck(chat: Any, calls: int = 3) -> Any:
    for _ in range(calls):
        chat.call("status", {"job": 1}, "running")
    return chat


def test_each_record_is_one_run_named_by_its_id_or_its_place(
    tmp_path: Path, replay: Replay
) -> None:
    records = [
        _stuck(OpenAIChat()).record(id="conv-a"),
        _stuck(OpenAIChat()).record(session_id="sess-b"),
        _stuck(OpenAIChat()).record(conversation_id=7),
        _stuck(OpenAIChat()).record(),
        _stuck(OpenAIChat()).messages,  # a bare list of messages is a conversation too
    ]
    path = write_jsonl(tmp_path / "records.jsonl", records)
    runs = _document(replay, path)["runs"]
    assert [(r["session"], r["run_id"], r["calls"]) for r in runs] == [
        ("conv-a", "run-0", 3),
        ("sess-b", "run-1", 3),
        (7, "run-2", 3),
        (f"{path}#3", "run-3", 3),
        (f"{path}#4", "run-4", 3),
    ]
    # The same records as one JSON document (a list of records), pretty-printed.
    document = write_json(tmp_path / "records.json", records)
    runs = _document(replay, document)["runs"]
    assert [r["session"] for r in runs][3:] == [f"{document}#3", f"{document}#4"]
    assert [r["calls"] for r in runs] == [3] * 5


def test_a_file_of_messages_is_one_conversation(tmp_path: Path, replay: Replay) -> None:
    chat = _stuck(OpenAIChat(), calls=4)
    path = write_jsonl(tmp_path / "messages.jsonl", chat.messages)
    [run] = _document(replay, path)["runs"]
    assert (run["session"], run["run_id"], run["calls"]) == (str(path), "run-0", 4)


def test_one_record_object_with_its_messages_under_another_key(
    tmp_path: Path, replay: Replay
) -> None:
    chat = _stuck(ResponsesChat(), calls=2)
    record = {"id": "resp_1", "object": "response", "output": chat.messages, "tools": []}
    path = write_json(tmp_path / "response.json", record)
    document = _document(replay, path)
    assert document["summary"]["files"][0]["format"] == "openai-responses"
    [run] = document["runs"]
    assert (run["session"], run["calls"]) == ("resp_1", 2)
    # Two keys that both hold messages: which is the conversation is not guessed.
    both = write_jsonl(tmp_path / "both.jsonl", [{"input": chat.messages, "output": chat.messages}])
    code, out, err = replay(both)
    assert (code, out) == (2, "")
    assert f"{both}:1: 2 keys hold lists of messages ('input', 'output'); expected one" in err


def test_parallel_calls_answered_in_any_order_pair_by_id(tmp_path: Path, replay: Replay) -> None:
    settings = {"enabled": True, "warningThreshold": 5, "criticalThreshold": 8}
    for chat in (OpenAIChat(), AnthropicChat(), ResponsesChat()):
        detector = LoopDetector(settings)
        expected = {}
        for turn in range(10):
            ids = chat.calls(*((f"read_{x}", {"path": x}) for x in "abc"))
            # Answered out of order; only b's answer changes from turn to turn.
            answers = {"a": "same a", "b": f"b at turn {turn}", "c": "same c"}
            for x in "bca":
                chat.answer(ids["abc".index(x)], answers[x])
            for number, x in enumerate("abc", 3 * turn + 1):
                name, args = f"read_{x}", {"path": x}
                verdict = detector.check(name, args)
                detector.record_call(name, args)
                result = {"content": [{"type": "text", "text": answers[x]}]}
                detector.record_outcome(name, args, result=result)
                if verdict.stuck:
                    expected[number] = (name, verdict.level)
        path = write_json(tmp_path / f"{type(chat).__name__}.json", chat.record())
        calls = _document(
            replay, "--set", "warningThreshold=5", "--set", "criticalThreshold=8", path
        )["calls"]
        assert {c["call"]: (c["tool"], c["level"]) for c in calls} == expected
        # Paired by arrival order instead, a would have b's changing answers and never block.
        assert ("read_a", "critical") in expected.values()
        assert ("read_b", "critical") not in expected.values()


def test_unanswered_calls_and_answers_without_a_call_are_counted(
    tmp_path: Path, replay: Replay
) -> None:
    chat = OpenAIChat()
    chat.call("read", {"path": "a"}, "text")
    chat.calls(("exec", {"command": "sleep 100"}))  # never answered
    chat.answer("call_9999", "late")  # answers nothing
    path = write_json(tmp_path / "c.json", chat.record())
    code, out, _ = replay(path)
    assert code == 0
    assert "2 calls in 1 run" in out
    assert "transcripts: 1 tool call never answered" in out
    assert "1 tool result answering no call" in out
    summary = _document(replay, path)["summary"]
    assert (summary["unanswered_calls"], summary["results_without_call"]) == (1, 1)


def test_unknown_tool_errors_block_as_unknown_tools(tmp_path: Path, replay: Replay) -> None:
    # OpenAI: an error-shaped output; Anthropic: is_error; Responses: an error object.
    for chat in (OpenAIChat(), AnthropicChat(), ResponsesChat()):
        for _ in range(11):
            chat.call("browse", {"url": "https://example.com"}, "Unknown tool: browse", error=True)
        path = write_json(tmp_path / f"{type(chat).__name__}.json", chat.record())
        [run] = _document(replay, path)["runs"]
        assert run["first_block"]["detector"] == "unknown_tool_repeat", type(chat).__name__


# -- choosing the format ------------------------------------------------------------------------


def test_input_format_forces_one_reader(tmp_path: Path, replay: Replay) -> None:
    chat = _stuck(OpenAIChat(), calls=3)
    path = write_json(tmp_path / "chat.json", chat.record())
    document = _document(replay, "--input-format", "openai-chat", path)
    assert (document["summary"]["files"][0]["format"], document["summary"]["calls"]) == (
        "openai-chat",
        3,
    )
    # Read as Anthropic, the OpenAI messages hold no tool use: nothing to replay.
    code, out, err = replay("--input-format", "anthropic", path)
    assert (code, out) == (2, "")
    assert err.endswith("not a trace (read as anthropic)\n")
    # Forced as loopcore events, every line is malformed.
    lines = write_jsonl(tmp_path / "chat.jsonl", chat.messages)
    code, out, err = replay("--input-format", "loopcore", lines)
    assert (code, out) == (2, "")
    assert f"{lines}:1: role: unknown event field" in err
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", "--input-format", "csv", str(path)])
    assert exit_info.value.code == 2


# -- not a trace ----------------------------------------------------------------------------------


def test_an_input_with_lines_but_no_call_exits_2(tmp_path: Path, replay: Replay) -> None:
    noise = tmp_path / "noise.bin"
    noise.write_bytes(bytes(range(256)) * 40 + b"\n\x00\xff\n")
    code, out, err = replay("--enable", noise)
    assert (code, out) == (2, "")
    reason = err.splitlines()[-1]
    assert reason.startswith(f"loopcore replay: no tool call could be read from {noise} (")
    assert "malformed): not a trace (formats read: loopcore, pi, openai-chat" in reason
    # A well-formed conversation without a single tool call: nothing to replay either.
    chat = write_json(tmp_path / "chat.json", OpenAIChat().record())
    code, out, err = replay(chat)
    assert (code, out) == (2, "")
    assert err.startswith(f"loopcore replay: no tool call could be read from {chat} (")
    # Blank lines hold nothing: an empty report, not an error.
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n  \n\n")
    assert replay(blank)[0] == 0
    # With a trace next to it, the noise is malformed lines, counted and skipped.
    good = write_json(tmp_path / "good.json", _stuck(OpenAIChat()).record())
    code, out, err = replay("--format", "json", noise, good)
    assert code == 0
    assert json.loads(out)["summary"]["calls"] == 3
    assert "malformed lines skipped" in err.splitlines()[-1]


def test_a_system_binary_is_not_a_trace(replay: Replay) -> None:
    binary = Path("/bin/ls")
    if not binary.is_file():
        pytest.skip("no /bin/ls here")
    code, out, err = replay("--enable", binary)
    assert (code, out) == (2, "")
    assert err.splitlines()[-1].startswith("loopcore replay: no tool call could be read from")

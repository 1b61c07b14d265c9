"""Which tool calls does an OpenAI conversation hold? Chat Completions messages, Responses items.

- **Chat Completions**: an assistant message's ``tool_calls`` (each
  ``{"id", "type": "function", "function": {"name", "arguments"}}``, the
  arguments a JSON string) are answered by ``{"role": "tool", "tool_call_id",
  "content"}`` messages; the content is a string or a list of text parts.
  Several calls in one assistant message are one parallel turn.
- **Responses**: ``{"type": "function_call", "call_id", "name", "arguments"}``
  items are answered by ``{"type": "function_call_output", "call_id",
  "output"}`` items; messages and reasoning items carry no tool calls.

Both read one message (item) and hand its calls and answers to a ``Sink``;
pairing, sessions and runs are ``formats._chat``'s.
"""

from __future__ import annotations

from typing import Any

from ._messages import Sink, arguments, expected, field

__all__ = ["is_chat_message", "is_responses_item", "read_chat", "read_responses"]

_RESPONSES_CALLS = ("function_call", "function_call_output")


def is_chat_message(message: dict[str, Any]) -> bool:
    """Does the message have a Chat Completions shape of its own (tool calls or a tool answer)?"""
    return "tool_calls" in message or message.get("role") == "tool"


def is_responses_item(message: dict[str, Any]) -> bool:
    """Is the item a Responses function call or its output?"""
    kind = message.get("type")
    return isinstance(kind, str) and kind in _RESPONSES_CALLS


def read_chat(message: dict[str, Any], where: str, line: int, sink: Sink) -> None:
    """Read one Chat Completions message: an assistant's tool calls, or a tool's answer."""
    role = message.get("role")
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str):
            sink.problem(line, field(where, "tool_call_id"), expected("a string", call_id))
            return
        sink.answer(call_id, message.get("content"), message.get("is_error"))
        return
    tool_calls = message.get("tool_calls")
    if tool_calls is None or role != "assistant":
        return
    if not isinstance(tool_calls, list):
        sink.problem(line, field(where, "tool_calls"), expected("a list", tool_calls))
        return
    calls = []
    for index, entry in enumerate(tool_calls):
        at = field(where, f"tool_calls[{index}]")
        if not isinstance(entry, dict):
            sink.problem(line, at, expected("an object", entry))
            return
        if entry.get("type", "function") != "function":
            continue  # a custom or built-in tool: not a function call
        function = entry.get("function")
        if not isinstance(function, dict):
            sink.problem(line, f"{at}.function", expected("an object", function))
            return
        name, call_id = function.get("name"), entry.get("id")
        if not isinstance(name, str):
            sink.problem(line, f"{at}.function.name", expected("a string", name))
            return
        if not isinstance(call_id, str):
            sink.problem(line, f"{at}.id", expected("a string", call_id))
            return
        calls.append((name, arguments(function.get("arguments", {})), call_id))
    # Only a message whose every call reads is taken: a half-read turn would mis-pair.
    for name, args, call_id in calls:
        sink.call(line, name, args, call_id)


def read_responses(message: dict[str, Any], where: str, line: int, sink: Sink) -> None:
    """Read one Responses item: a function call, or a function call's output."""
    kind = message.get("type")
    if kind not in _RESPONSES_CALLS:
        return
    call_id = message.get("call_id")
    if not isinstance(call_id, str):
        sink.problem(line, field(where, "call_id"), expected("a string", call_id))
        return
    if kind == "function_call_output":
        sink.answer(call_id, message.get("output"), message.get("is_error"))
        return
    name = message.get("name")
    if not isinstance(name, str):
        sink.problem(line, field(where, "name"), expected("a string", name))
        return
    sink.call(line, name, arguments(message.get("arguments", {})), call_id)

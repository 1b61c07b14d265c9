"""Which tool calls does an Anthropic Messages conversation hold? ``tool_use`` and ``tool_result``.

An assistant message's content blocks ``{"type": "tool_use", "id", "name",
"input"}`` are tool calls (several in one message are one parallel turn);
they are answered by the next user message's blocks ``{"type":
"tool_result", "tool_use_id", "content", "is_error"}``, the content a string
or a list of text (and image) blocks. A message whose content is a plain
string holds no tool use.

Reads one message and hands its calls and answers to a ``Sink``; pairing,
sessions and runs are ``formats._chat``'s.
"""

from __future__ import annotations

from typing import Any

from ._messages import Sink, arguments, expected, field

__all__ = ["is_anthropic_message", "read_anthropic"]

_BLOCKS = ("tool_use", "tool_result")


def is_anthropic_message(message: dict[str, Any]) -> bool:
    """Does the message hold a ``tool_use`` or ``tool_result`` block?"""
    content = message.get("content")
    if not isinstance(content, list):
        return False
    for block in content:
        if isinstance(block, dict):
            kind = block.get("type")
            if isinstance(kind, str) and kind in _BLOCKS:
                return True
    return False


def read_anthropic(message: dict[str, Any], where: str, line: int, sink: Sink) -> None:
    """Read one message: an assistant's ``tool_use`` blocks, or a user's ``tool_result`` ones."""
    content = message.get("content")
    role = message.get("role")
    if not isinstance(content, list) or role not in ("assistant", "user"):
        return
    wanted = "tool_use" if role == "assistant" else "tool_result"
    calls = []
    for index, block in enumerate(content):
        if not isinstance(block, dict) or block.get("type") != wanted:
            continue
        at = field(where, f"content[{index}]")
        if wanted == "tool_result":
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str):
                sink.problem(line, f"{at}.tool_use_id", expected("a string", call_id))
                continue
            sink.answer(call_id, block.get("content"), block.get("is_error"))
            continue
        name, call_id = block.get("name"), block.get("id")
        if not isinstance(name, str):
            sink.problem(line, f"{at}.name", expected("a string", name))
            return
        if not isinstance(call_id, str):
            sink.problem(line, f"{at}.id", expected("a string", call_id))
            return
        calls.append((name, arguments(block.get("input", {})), call_id))
    # Only a message whose every call reads is taken: a half-read turn would mis-pair.
    for name, args, call_id in calls:
        sink.call(line, name, args, call_id)

"""Conversations in the three chat formats, built message by message for the replay tests.

Each builder keeps a list of messages (``messages``) as the API would store
them, with call ids of its own; ``call`` is one tool call and its answer,
``calls`` one assistant turn of parallel calls (answered with ``answer``).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["AnthropicChat", "OpenAIChat", "ResponsesChat", "write_json", "write_jsonl"]


def write_jsonl(path: Any, lines: list[Any]) -> Any:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def write_json(path: Any, document: Any) -> Any:
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return path


class _Builder:
    prefix = "call"

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.serial = 0

    def _id(self) -> str:
        self.serial += 1
        return f"{self.prefix}_{self.serial:04d}"

    def calls(self, *calls: tuple[str, Any]) -> list[str]:
        raise NotImplementedError

    def answer(self, call_id: str, content: Any, error: bool = False) -> _Builder:
        raise NotImplementedError

    def call(self, name: str, args: Any, content: Any, error: bool = False) -> _Builder:
        (call_id,) = self.calls((name, args))
        return self.answer(call_id, content, error)

    def user(self, text: str = "go on") -> _Builder:
        self.messages.append({"role": "user", "content": text})
        return self

    def record(self, **fields: Any) -> dict[str, Any]:
        return {**fields, "messages": self.messages}


class OpenAIChat(_Builder):
    """Chat Completions: ``tool_calls`` answered by ``role: tool`` messages."""

    def __init__(self) -> None:
        super().__init__()
        self.messages.append({"role": "system", "content": "You are a helpful agent."})
        self.user("please fix it")

    def calls(self, *calls: tuple[str, Any]) -> list[str]:
        entries = []
        for name, args in calls:
            text = args if isinstance(args, str) else json.dumps(args)
            entries.append(
                {
                    "id": self._id(),
                    "type": "function",
                    "function": {"name": name, "arguments": text},
                }
            )
        self.messages.append({"role": "assistant", "content": None, "tool_calls": entries})
        return [entry["id"] for entry in entries]

    def answer(self, call_id: str, content: Any, error: bool = False) -> OpenAIChat:
        message = {"role": "tool", "tool_call_id": call_id, "content": content}
        if error:
            message["content"] = json.dumps({"error": content})
        self.messages.append(message)
        return self


class AnthropicChat(_Builder):
    """Anthropic Messages: ``tool_use`` blocks answered by ``tool_result`` blocks."""

    prefix = "toolu"

    def __init__(self) -> None:
        super().__init__()
        self.user("please fix it")

    def calls(self, *calls: tuple[str, Any]) -> list[str]:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": "On it."}]
        for name, args in calls:
            blocks.append({"type": "tool_use", "id": self._id(), "name": name, "input": args})
        self.messages.append({"role": "assistant", "content": blocks})
        return [block["id"] for block in blocks[1:]]

    def answer(self, call_id: str, content: Any, error: bool = False) -> AnthropicChat:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": content}
        if error:
            block["is_error"] = True
        last = self.messages[-1]
        if last["role"] == "user" and isinstance(last["content"], list):
            last["content"].append(block)  # answers of one turn share one user message
        else:
            self.messages.append({"role": "user", "content": [block]})
        return self


class ResponsesChat(_Builder):
    """OpenAI Responses: ``function_call`` items answered by ``function_call_output`` items."""

    def __init__(self) -> None:
        super().__init__()
        self.messages.append(
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]}
        )

    def calls(self, *calls: tuple[str, Any]) -> list[str]:
        ids = []
        self.messages.append({"type": "reasoning", "id": f"rs_{self.serial}", "summary": []})
        for name, args in calls:
            ids.append(self._id())
            text = args if isinstance(args, str) else json.dumps(args)
            self.messages.append(
                {"type": "function_call", "call_id": ids[-1], "name": name, "arguments": text}
            )
        return ids

    def answer(self, call_id: str, content: Any, error: bool = False) -> ResponsesChat:
        output = json.dumps({"error": content}) if error else content
        self.messages.append({"type": "function_call_output", "call_id": call_id, "output": output})
        return self

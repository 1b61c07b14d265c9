"""What do the chat formats share? Decoding arguments, telling results from errors, naming fields.

Each chat format module (``openai``, ``anthropic``) reads one message at a
time and hands what it found to a ``Sink`` (the conversation being read): a
tool call, the answer to one, a malformed field. The helpers here turn the
raw pieces into what a gateway would have seen:

- ``arguments``: a JSON string of arguments decoded (not JSON: kept as the raw
  string, as the tool would have received it); anything else as it is;
- ``outcome``: an answer's content as a tool result, or as an error when it is
  flagged (``is_error: true``) or error-shaped: a JSON object (or text holding
  one) with a non-empty ``error``, or text that starts ``Error:``;
- ``field``: a field's path for a report (``messages[3].tool_calls[0].id``).
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from .._outcome import UNSET
from ._reader import DECODER, json_type

__all__ = ["TEXT_PARTS", "Sink", "arguments", "expected", "field", "outcome", "text_of"]

#: Content part types that carry text (``{"type": ..., "text": "..."}``), in any of the formats.
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})

_ERROR_TEXT = re.compile(r"\s*error\s*:", re.IGNORECASE)


class Sink(Protocol):
    """Where a format module puts what a message holds (the conversation being read)."""

    def call(self, line: int, name: str, args: Any, call_id: str) -> None: ...

    def answer(self, call_id: str, content: object, is_error: object) -> None: ...

    def problem(self, line: int, where: str, reason: str) -> None: ...


def field(where: str, name: str) -> str:
    """``where`` (a message's path, maybe empty) followed by a field or an index."""
    if not where:
        return name
    return f"{where}{name}" if name.startswith("[") else f"{where}.{name}"


def expected(what: str, value: object) -> str:
    return f"expected {what}, got {json_type(value) if value is not None else 'null'}"


def arguments(raw: object) -> Any:
    """A call's arguments as the tool received them: a JSON string decoded, else as is."""
    if not isinstance(raw, str):
        return raw
    try:
        return DECODER.decode(raw)
    except (ValueError, RecursionError):
        return raw  # not JSON (or JSON Python cannot hold): replayed as the raw string


def text_of(content: object) -> str | None:
    """The text of an answer's content (a string, or the text parts of a list), or None."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = [
        part["text"]
        for part in content
        if isinstance(part, dict)
        and part.get("type") in TEXT_PARTS
        and isinstance(part.get("text"), str)
    ]
    return "\n".join(texts)


def _error_of(value: dict[str, Any]) -> object:
    """The error an error-shaped object carries, or UNSET when it carries none."""
    error = value.get("error")
    if error is None or error is False or (isinstance(error, (str, list, dict)) and not error):
        return UNSET
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return error


def _error_in(content: object) -> object:
    """The error an answer's content is shaped as, or UNSET."""
    if isinstance(content, dict):
        return _error_of(content)
    text = text_of(content)
    if not text:
        return UNSET
    stripped = text.strip()
    if stripped.startswith("{") and '"error"' in stripped:
        try:
            value = DECODER.decode(stripped)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return _error_of(value)
    if _ERROR_TEXT.match(text):
        return text
    return UNSET


def outcome(content: object, is_error: object) -> tuple[Any, Any]:
    """``(result, error)`` of an answer, one of them UNSET.

    A result is given the shape of a tool result (``{"content": [text
    parts]}``), so that the outcome rules read its text; a mapping that is not
    error-shaped is the result as it is.
    """
    if is_error is True:
        error = _error_in(content)
        if error is UNSET:
            text = text_of(content)
            error = text if text is not None else "" if content is None else content
        return UNSET, error
    error = _error_in(content)
    if error is not UNSET:
        return UNSET, error
    if isinstance(content, str):
        return {"content": [{"type": "text", "text": content}]}, UNSET
    if isinstance(content, list):
        return {"content": content}, UNSET
    if content is None:
        return {"content": []}, UNSET
    return content, UNSET

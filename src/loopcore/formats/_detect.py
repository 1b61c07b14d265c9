"""Which format does a trace file's line show? loopcore events, pi entries or chat conversations.

``detect`` judges one parsed JSONL line (an object, or an array); the file's
reader is the one its first decisive line shows. The three chat formats are
one family here (``CHAT``): ``formats._chat`` tells them apart message by
message.
"""

from __future__ import annotations

from typing import Any

from ..batch._table import EVENT_FIELDS
from ._chat import MESSAGE_TYPES, RESPONSES_ITEMS, is_message
from ._reader import LOOPCORE, PI

__all__ = ["CHAT", "detect"]

#: The chat family, before its format is known (``ChatReader`` tells them apart).
CHAT = "chat"


def _holds_mappings(value: list[Any]) -> bool:
    return any(
        isinstance(item, dict)
        or (isinstance(item, list) and any(isinstance(i, dict) for i in item))
        for item in value
    )


def detect(event: Any) -> str | None:
    """The format a parsed line shows (``CHAT`` for the chat family), or None when it fits
    more than one (a bare compaction line) or none (an array of numbers)."""
    if isinstance(event, list):
        return CHAT if _holds_mappings(event) else None
    kind = event.get("type")
    if "tool" in event or kind == "call":
        return LOOPCORE
    if kind == "compaction":
        # pi's compaction entries carry an id, a summary, token counts: fields no event has.
        return PI if any(key not in EVENT_FIELDS for key in event) else None
    if kind == "message" and isinstance(event.get("message"), dict):
        return PI
    if "messages" in event or is_message(event):
        return CHAT
    if isinstance(kind, str):
        return CHAT if kind in RESPONSES_ITEMS or kind in MESSAGE_TYPES else PI
    if any(
        is_message(item) for value in event.values() if isinstance(value, list) for item in value
    ):
        return CHAT  # a record holding its messages under some other key
    return LOOPCORE  # no tool, no type: a broken event; the loopcore reader names the field

"""Which parts of an outbound send's result are delivery noise? (SPEC §2, outbound sends)

A send that delivers the same message again gets fresh message ids, receipts and
timestamps; hashing its ``details`` without them makes identical sends look
identical. Part of the outcome rules (``_outcome_py``), shared by both twins.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

__all__ = ["is_send", "stable_items"]

_SEND_ACTIONS = frozenset(
    {
        "send",
        "broadcast",
        "reply",
        "thread-reply",
        "sendWithEffect",
        "sendAttachment",
        "upload-file",
        "sticker",
        "poll",
    }
)
_VOLATILE_KEYS = frozenset(
    {
        "messageId",
        "message_id",
        "messageIds",
        "platformMessageId",
        "platformMessageIds",
        "fileId",
        "file_id",
        "fileKey",
        "pollId",
        "poll_id",
        "receipt",
        "runId",
        "idempotencyKey",
        "ts",
        "timestamp",
        "sentAt",
        "deliveredAt",
        "createdAt",
    }
)


def _is_message_object(node: Mapping[Any, Any]) -> bool:
    if not (isinstance(node.get("id"), str) and isinstance(node.get("text"), str)):
        return False
    return (
        isinstance(node.get("direction"), str)
        or isinstance(node.get("senderId"), str)
        or isinstance(node.get("accountId"), str)
        or isinstance(node.get("conversation"), Mapping)
    )


def stable_items(node: Mapping[Any, Any]) -> Iterable[tuple[Any, Any]]:
    """A send result's entries without volatile delivery keys (applied at every depth)."""
    drop_id = _is_message_object(node)
    return [
        (key, value)
        for key, value in node.items()
        if not (isinstance(key, str) and (key in _VOLATILE_KEYS or (drop_id and key == "id")))
    ]


def is_send(tool_name: str, args: Any, send_tools: Collection[str]) -> bool:
    """Is this call an outbound send (SPEC §2): its details hashed without delivery ids?"""
    if tool_name == "sessions_send" or tool_name in send_tools:
        return True
    if tool_name != "message" or not isinstance(args, Mapping):
        return False
    try:
        return args.get("action") in _SEND_ACTIONS
    except Exception:
        return False

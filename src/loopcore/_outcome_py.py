"""Which part of a call and of its outcome is hashed? (SPEC §2 rules, pure-Python twin)

``hash_call`` and ``hash_outcome`` decide *what* is fingerprinted (plan shapes,
exec status, volatile delivery ids, error texts); the fingerprint twin decides
*how*. Nothing here may raise on an odd value except a non-``str`` tool name.
This twin is the reference: the compiled one hashes the common outcomes in C and
hands every other branch to the functions here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Final

import xxhash

from . import _fingerprint
from ._fingerprint_py import encode as _encode_py
from ._names import exact_str, type_name
from ._rules import SPECIAL_OUTCOME_TOOLS

__all__ = [
    "CALL_DOMAIN",
    "ERROR_DOMAIN",
    "IMPLEMENTATION",
    "RESULT_DOMAIN",
    "SPECIAL_OUTCOME_TOOLS",
    "UNSET",
    "Normalizer",
    "check_call_id",
    "check_normalizers",
    "check_send_tools",
    "check_tool_name",
    "hash_call",
    "hash_outcome",
    "is_known_poll",
    "plan_shape",
    "unknown_tool_name",
]

logger = logging.getLogger("loopcore")

IMPLEMENTATION = "python"

CALL_DOMAIN: Final = b"loopcore:call\x00"
RESULT_DOMAIN: Final = b"loopcore:result\x00"
ERROR_DOMAIN: Final = b"loopcore:error\x00"

#: A host's outcome normaliser: ``fn(args, result)`` returns the value to hash.
Normalizer = Callable[[Any, Any], Any]


class _Unset:
    """Type of :data:`UNSET`: "no result / no error given"."""

    __slots__ = ()
    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = _Unset()


def check_tool_name(tool_name: object) -> str:
    if not isinstance(tool_name, str):
        raise TypeError(f"tool_name: expected a str, got {type(tool_name).__name__}")
    return tool_name


def check_call_id(tool_call_id: object) -> str | None:
    if tool_call_id is not None and not isinstance(tool_call_id, str):
        raise TypeError(f"tool_call_id: expected a str or None, got {type(tool_call_id).__name__}")
    return tool_call_id


def _nonblank(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def plan_shape(payload: object) -> tuple[Any, ...]:
    """The part of an update_plan payload that counts as progress (SPEC §2)."""
    plan = payload.get("plan") if isinstance(payload, Mapping) else None
    entries = plan if isinstance(plan, list) else []
    statuses = []
    steps = []
    for entry in entries:
        if isinstance(entry, Mapping):
            status = entry.get("status")
            statuses.append(status if isinstance(status, str) else None)
            steps.append(_nonblank(entry.get("step")))
        else:
            statuses.append(None)
            steps.append(False)
    explanation = _nonblank(payload.get("explanation")) if isinstance(payload, Mapping) else False
    return ("update_plan", len(entries), statuses, steps, explanation)


def hash_call(tool_name: str, args: Any) -> int:
    """64-bit fingerprint of a call: tool name and args (update_plan: args' shape)."""
    check_tool_name(tool_name)
    if tool_name == "update_plan":
        args = _safe(plan_shape, args, args)
    return _fingerprint.fingerprint((tool_name, args), CALL_DOMAIN)


def is_known_poll(tool_name: str, args: Any) -> bool:
    """Is this a polling call whose repeats mean "no progress"? (SPEC §4)"""
    if tool_name == "command_status":
        return True
    if tool_name == "process" and isinstance(args, Mapping):
        try:
            return args.get("action") in ("poll", "log")
        except Exception:
            return False
    return False


def _safe(fn: Callable[..., Any], fallback: Any, *args: Any) -> Any:
    """``fn(*args)``, or ``fallback`` if a hostile mapping or object raises on access."""
    try:
        return fn(*args)
    except Exception:
        return fallback


# -- errors -------------------------------------------------------------------------------

_NAME = r"""(?P<q{n}>['"`]?)(?P<name{n}>[a-z0-9_.-]+)(?P=q{n})"""
_UNKNOWN_TOOL = re.compile(
    r"\bunknown\s+tool(?::\s*|\s+)"
    + _NAME.format(n=1)
    + r"|\btool\s+"
    + _NAME.format(n=2)
    + r"\s+(?:not\s+found|is\s+not\s+available)\b",
    re.IGNORECASE,
)


def unknown_tool_name(text: str) -> str | None:
    """NAME from "unknown tool: NAME" and its variants, lower-cased; else None."""
    match = _UNKNOWN_TOOL.search(text)
    if match is None:
        return None
    name = (match.group("name1") or match.group("name2")).rstrip(".").lower()
    return name or None


#: How much of an error text the unknown-tool extraction reads (SPEC §11): the regex
#: never runs over a huge text; the hash still covers all of it.
UNKNOWN_TOOL_SCAN_CHARS: Final = 4096


def _error_text(error: object) -> object:
    """The text an error is hashed by, or the error itself when it has none (SPEC §2 rule 1).

    Decided by the real type: ``isinstance`` would believe an object whose
    ``__class__`` claims ``str`` or an exception class (SPEC §11).
    """
    cls = type(error)
    if issubclass(cls, BaseException):
        try:
            message = str(error)
        except Exception:
            message = ""
        return exact_str(message) or type_name(cls)
    if issubclass(cls, str):
        return exact_str(error)  # type: ignore[call-overload]
    if issubclass(cls, (bool, int, float)):
        try:
            return exact_str(str(error))
        except Exception:
            # An int past str()'s digit limit, or a subclass whose __str__ raises.
            return error
    return error


# -- results ------------------------------------------------------------------------------

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


def _stable_items(node: Mapping[Any, Any]) -> Iterable[tuple[Any, Any]]:
    """A send result's entries without volatile delivery keys (applied at every depth)."""
    drop_id = _is_message_object(node)
    return [
        (key, value)
        for key, value in node.items()
        if not (isinstance(key, str) and (key in _VOLATILE_KEYS or (drop_id and key == "id")))
    ]


def _hash_send_details(details: Mapping[Any, Any]) -> int:
    # The key filter is a feature of the reference encoder only; its bytes are
    # the canonical encoding of the filtered value, so both twins agree.
    return xxhash.xxh3_64_intdigest(RESULT_DOMAIN + _encode_py(details, _stable_items))


def _content_text(content: object) -> str:
    if not isinstance(content, (list, tuple)):
        return ""
    texts = [
        entry["text"]
        for entry in content
        if isinstance(entry, Mapping)
        and isinstance(entry.get("type"), str)
        and isinstance(entry.get("text"), str)
    ]
    return "\n".join(texts).strip()


def _number_or_none(value: object) -> object:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _exec_value(details: Mapping[str, Any], text: str) -> object:
    """What an exec result contributes, or UNSET when its status is not one of SPEC §2's."""
    status = details["status"]
    get = details.get
    if status == "running":
        return ("exec", status, get("tail") or "")
    if status in ("completed", "failed"):
        aggregated = get("aggregated")
        output = aggregated if _nonblank(aggregated) else text
        return ("exec", status, _number_or_none(get("exitCode")), get("timedOut") is True, output)
    if status in ("approval-pending", "approval-unavailable"):
        return (
            "exec",
            status,
            get("reason"),
            get("host"),
            get("command"),
            get("warningText"),
        )
    return UNSET


_POLL_FIELDS = ("status", "exitCode", "exitSignal", "aggregated")
_LOG_FIELDS = ("status", "totalLines", "totalChars", "truncated", "exitCode", "exitSignal")


def _process_value(action: str, details: Mapping[str, Any], text: str) -> object:
    get = details.get
    fields = _POLL_FIELDS if action == "poll" else _LOG_FIELDS
    return ("process", action, *(get(name) for name in fields), text)


def _is_send(tool_name: str, args: Any, send_tools: Collection[str]) -> bool:
    if tool_name == "sessions_send" or tool_name in send_tools:
        return True
    return (
        tool_name == "message"
        and isinstance(args, Mapping)
        and _safe(lambda: args.get("action") in _SEND_ACTIONS, False)
    )


def _tool_result_hash(
    tool_name: str, args: Any, result: Mapping[str, Any], send_tools: Collection[str]
) -> int:
    raw_details = result.get("details")
    details: Mapping[str, Any] = raw_details if isinstance(raw_details, Mapping) else {}
    text = _content_text(result.get("content"))
    if tool_name == "exec" and isinstance(details.get("status"), str):
        value = _exec_value(details, text)
        if value is not UNSET:
            return _fingerprint.fingerprint(value, RESULT_DOMAIN)
    if tool_name == "process" and isinstance(args, Mapping):
        action = args.get("action")
        if action in ("poll", "log"):
            return _fingerprint.fingerprint(_process_value(action, details, text), RESULT_DOMAIN)
    if _is_send(tool_name, args, send_tools):
        return _hash_send_details(details)
    if tool_name == "update_plan":
        return _fingerprint.fingerprint(plan_shape(details), RESULT_DOMAIN)
    return _fingerprint.fingerprint(("result", details, text), RESULT_DOMAIN)


def _is_tool_result(result: object) -> bool:
    return isinstance(result, Mapping) and ("content" in result or "details" in result)


def _is_vetoed(result: Mapping[str, Any]) -> bool:
    details = result.get("details")
    return (
        isinstance(details, Mapping)
        and details.get("status") == "blocked"
        and details.get("deniedReason") == "tool-loop"
    )


def hash_outcome(
    tool_name: str,
    args: Any,
    *,
    result: Any = UNSET,
    error: Any = UNSET,
    normalizers: Mapping[str, Normalizer] | None = None,
    send_tools: Collection[str] = (),
) -> tuple[int | None, str | None]:
    """``(result_hash, unknown_tool_name)`` of a call's outcome (SPEC §2)."""
    check_tool_name(tool_name)
    if error is not UNSET and error is not None:
        text = _error_text(error)
        unknown = None
        if type(text) is str:
            unknown = unknown_tool_name(text[:UNKNOWN_TOOL_SCAN_CHARS])
        return _fingerprint.fingerprint(text, ERROR_DOMAIN), unknown
    if result is UNSET:
        return None, None

    tool_result = _safe(_is_tool_result, False, result)
    if tool_result and _safe(_is_vetoed, False, result):
        return None, None
    normalizer = normalizers.get(tool_name) if normalizers else None
    if normalizer is not None:
        try:
            value = normalizer(args, result)
        except Exception as exc:
            # The exception text may quote the result; only its type is logged.
            logger.warning(
                "outcome normaliser for tool %s raised %s; using the built-in rules",
                tool_name,
                type(exc).__name__,
            )
        else:
            return _fingerprint.fingerprint(value, RESULT_DOMAIN), None
    if tool_result:
        try:
            return _tool_result_hash(tool_name, args, result, send_tools), None
        except Exception:
            # A mapping that raises on access hashes as an opaque whole value.
            pass
    return _fingerprint.fingerprint(result, RESULT_DOMAIN), None


def check_normalizers(normalizers: Mapping[str, Normalizer] | None) -> dict[str, Normalizer]:
    if normalizers is None:
        return {}
    if not isinstance(normalizers, Mapping):
        raise TypeError(f"normalizers: expected a mapping, got {type(normalizers).__name__}")
    for name, fn in normalizers.items():
        if not isinstance(name, str):
            raise TypeError(f"normalizers: keys must be tool names (str), got {name!r}")
        if not callable(fn):
            raise TypeError(f"normalizers[{name!r}]: expected a callable, got {type(fn).__name__}")
    return dict(normalizers)


def check_send_tools(send_tools: Iterable[str]) -> frozenset[str]:
    if isinstance(send_tools, str) or not isinstance(send_tools, Iterable):
        raise TypeError(
            f"send_tools: expected an iterable of tool names, got {type(send_tools).__name__}"
        )
    names = frozenset(send_tools)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"send_tools: expected tool names (str), got {name!r}")
    return names

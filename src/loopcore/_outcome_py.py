"""Which part of a call and of its outcome is hashed? (SPEC §2 rules, pure-Python twin)

``hash_call`` and ``outcome_of`` decide *what* is fingerprinted (plan shapes,
exec status, volatile delivery ids, error texts, Code Mode receipts) and what
kind of outcome it is (a loop veto, a terminal exec failure, no progress); the
fingerprint twin decides *how*. Every string hashed into an outcome is
nonce-normalised first (SPEC §8.5: the encoders' ``nonces`` mode), never the
args nor a mapping key. Nothing here may raise on an odd value except a
non-``str`` tool name. This twin is the reference: the compiled one hashes the
common outcomes in C and hands every other branch to the functions here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, Final

import xxhash

from . import _fingerprint
from ._exec_shape import is_terminal, shape
from ._fingerprint_py import encode as _encode_py
from ._fingerprint_py import fingerprint as _fingerprint_py
from ._names import exact_str, type_name
from ._nonce import START, Verbatim, normalise
from ._records import KIND_NONE, KIND_TERMINAL_EXEC, KIND_VETO
from ._rules import SPECIAL_OUTCOME_TOOLS as _RULE_TOOLS
from ._sends import is_send, stable_items

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
    "outcome_of",
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

#: ``outcome_of``'s answer: (result_hash, unknown_tool_name, kind, failure_identity_hash,
#: no_progress); ``kind`` is one of ``_records.KIND_*``.
Outcome = tuple[int | None, str | None, int, int | None, bool]

#: Tools whose outcomes follow a rule other than the generic one: the verdict
#: table's list, plus ``write`` (no-ops, SPEC §8.6) and ``wait`` (Code Mode
#: receipts, §8.13). The compiled fast paths hand these to the rules here.
SPECIAL_OUTCOME_TOOLS: Final = _RULE_TOOLS | frozenset({"write", "wait"})


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
    # str.strip itself: a subclass's own strip must not decide (or raise).
    return isinstance(value, str) and bool(str.strip(value))


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


def _is_title(key: object) -> bool:
    # str.__eq__ itself: a str subclass key's own __eq__ must not decide (or raise).
    return isinstance(key, str) and issubclass(type(key), str) and str.__eq__(key, "title") is True


def _untitled(args: Any) -> Any:
    """Exec args without their top-level ``title`` (presentation only, SPEC §8.4)."""
    if isinstance(args, Mapping) and "title" in args:
        return {key: value for key, value in args.items() if not _is_title(key)}
    return args


def hash_call(tool_name: str, args: Any) -> int:
    """64-bit fingerprint of a call: tool name and args (update_plan: args' shape;
    exec: args without ``title``)."""
    check_tool_name(tool_name)
    if tool_name == "update_plan":
        args = _safe(plan_shape, args, args)
    elif tool_name == "exec":
        try:
            # The common case first: a plain dict without a title is hashed as it is.
            if type(args) is not dict or "title" in args:
                args = _untitled(args)
        except Exception:
            pass  # a key whose __eq__ raises: the args are hashed as they are
    return _fingerprint.fingerprint((tool_name, args), CALL_DOMAIN)


def is_known_poll(tool_name: str, args: Any) -> bool:
    """Is this a polling call whose repeats mean "no progress"? (SPEC §4, §8.8)"""
    if tool_name == "command_status" or tool_name == "wait":
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


def _hash_send_details(details: Mapping[Any, Any]) -> int:
    # The key filter is a feature of the reference encoder only; its bytes are
    # the canonical encoding of the filtered value, so both twins agree.
    encoded = _encode_py(details, stable_items, nonces=True)
    return xxhash.xxh3_64_intdigest(RESULT_DOMAIN + encoded)


def _hash(value: object) -> int:
    """A result value's hash: its strings nonce-normalised (SPEC §8.5)."""
    return _fingerprint.fingerprint(value, RESULT_DOMAIN, nonces=True)


def _verbatim(text: str) -> str:
    """``text``, already normalised, marked so the encoder leaves it as it is (§12.10)."""
    return Verbatim(text) if START in text else text


def _content_text(content: object) -> str:
    """The joined text of a result's content, each entry nonce-normalised before the join."""
    if not isinstance(content, (list, tuple)):
        return ""
    # str by the real type, as the compiled twin reads it: an object whose
    # __class__ claims str is no text (SPEC §11).
    texts = [
        entry["text"]
        for entry in content
        if isinstance(entry, Mapping)
        and issubclass(type(entry.get("type")), str)
        and issubclass(type(entry.get("text")), str)
    ]
    joined = "\n".join(texts).strip()
    if START not in joined:
        return joined  # no entry holds a wrapper (a join cannot make a marker)
    # §12.10: each entry on its own, so that no pair spans two entries.
    return Verbatim("\n".join(map(normalise, texts)).strip())


def _number_or_none(value: object) -> object:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _exec_output(aggregated: object, text: str) -> str:
    """``out`` of SPEC §8.4: ``aggregated`` stripped when it has content, else ``text``."""
    if _nonblank(aggregated):
        return normalise(str.strip(aggregated))  # type: ignore[arg-type]
    return text


def _exec_outcome(details: Mapping[str, Any], text: str) -> Outcome | None:
    """An exec result's outcome, or None when its status is not one of SPEC §2's."""
    status = details["status"]
    get = details.get
    if status == "running":
        return _hash(("exec", status, get("tail") or "")), None, KIND_NONE, None, False
    if status in ("completed", "failed"):
        out = _exec_output(get("aggregated"), text)
        code = _number_or_none(get("exitCode"))
        timed_out = get("timedOut") is True
        found = _hash(("exec", status, code, timed_out, out))
        if not is_terminal(code, timed_out, out):
            return found, None, KIND_NONE, None, False
        # The same failure with drifting timestamps, counters and pids (§8.4).
        identity = _hash(("exec", status, code, False, _verbatim(shape(out))))
        return found, None, KIND_TERMINAL_EXEC, identity, False
    if status in ("approval-pending", "approval-unavailable"):
        value = ("exec", status, get("reason"), get("host"), get("command"), get("warningText"))
        return _hash(value), None, KIND_NONE, None, False
    return None


_POLL_FIELDS = ("status", "exitCode", "exitSignal", "aggregated")
_LOG_FIELDS = ("status", "totalLines", "totalChars", "truncated", "exitCode", "exitSignal")


def _process_value(action: str, details: Mapping[str, Any], text: str) -> object:
    get = details.get
    fields = _POLL_FIELDS if action == "poll" else _LOG_FIELDS
    return ("process", action, *(get(name) for name in fields), text)


#: A write that changed nothing hashes as this result (SPEC §8.6), whatever its path.
_UNCHANGED: Final = _fingerprint_py({"status": "unchanged"}, RESULT_DOMAIN)


def _tool_result_outcome(
    tool_name: str, args: Any, result: Mapping[str, Any], send_tools: Collection[str]
) -> Outcome:
    """Rule 4 after the loop veto: a tool-result mapping's outcome."""
    raw_details = result.get("details")
    details: Mapping[str, Any] = raw_details if isinstance(raw_details, Mapping) else {}
    text = _content_text(result.get("content"))
    if tool_name == "exec" and isinstance(details.get("status"), str):
        found = _exec_outcome(details, text)
        if found is not None:
            return found
    if tool_name == "write" and details.get("changed") is False:
        return _UNCHANGED, None, KIND_NONE, None, True
    if tool_name == "process" and isinstance(args, Mapping):
        action = args.get("action")
        if action in ("poll", "log"):
            value = _process_value(action, details, text)
            return _hash(value), None, KIND_NONE, None, False
    if is_send(tool_name, args, send_tools):
        return _hash_send_details(details), None, KIND_NONE, None, False
    if tool_name == "update_plan":
        return _hash(plan_shape(details)), None, KIND_NONE, None, False
    return _hash(("result", details, text)), None, KIND_NONE, None, False


_RECEIPT_DROPPED = frozenset({"telemetry", "runId", "pendingToolCalls"})


def _receipt_value(result: Mapping[Any, Any]) -> object:
    """What a Code Mode receipt of exec/wait is hashed by (SPEC §8.13, §12.11).

    The receipt without its telemetry, run id and bridge requests, paired with its
    unsettled requests reduced to ``{method, args}`` (fresh request ids are not
    progress), or None for the pair's second half when it had no request list.
    A request list that is not a list or tuple holds no requests.
    """
    reduced = {
        key: value
        for key, value in result.items()
        if not (isinstance(key, str) and key in _RECEIPT_DROPPED)
    }
    if "pendingToolCalls" not in result:
        return ("code-mode", reduced, None)
    calls = result["pendingToolCalls"]
    pending = [
        {key: call[key] for key in ("method", "args") if key in call}
        for call in (calls if isinstance(calls, (list, tuple)) else ())
        if isinstance(call, Mapping) and "method" in call and call.get("settled") is not True
    ]
    return ("code-mode", reduced, pending)


def _is_receipt(tool_name: str, result: object) -> bool:
    return (
        (tool_name == "exec" or tool_name == "wait")
        and isinstance(result, Mapping)
        and "content" not in result
        and "details" not in result
        and isinstance(result.get("status"), str)
    )


def _is_tool_result(result: object) -> bool:
    return isinstance(result, Mapping) and ("content" in result or "details" in result)


def _is_vetoed(result: Mapping[str, Any]) -> bool:
    details = result.get("details")
    return (
        isinstance(details, Mapping)
        and details.get("status") == "blocked"
        and details.get("deniedReason") == "tool-loop"
    )


#: No outcome to record (neither result nor error given).
NO_OUTCOME: Final[Outcome] = (None, None, KIND_NONE, None, False)
#: The detector's own block (SPEC §8.1): recorded as a veto, never as a result.
VETO_OUTCOME: Final[Outcome] = (None, None, KIND_VETO, None, False)


def outcome_of(
    tool_name: str,
    args: Any,
    *,
    result: Any = UNSET,
    error: Any = UNSET,
    normalizers: Mapping[str, Normalizer] | None = None,
    send_tools: Collection[str] = (),
) -> Outcome:
    """``(result_hash, unknown_tool_name, kind, failure_identity_hash, no_progress)``.

    SPEC §2 with §8.0-8.6 and §8.13: an error hashes its text (``no_progress``);
    a loop veto has no hash and kind ``KIND_VETO``; a terminal exec failure has
    kind ``KIND_TERMINAL_EXEC`` and an identity hash; a write no-op is
    ``no_progress``. Never raises on a value; only a non-``str`` tool name.
    """
    check_tool_name(tool_name)
    if error is not UNSET and error is not None:
        text = _error_text(error)
        unknown = None
        if type(text) is str:
            unknown = unknown_tool_name(text[:UNKNOWN_TOOL_SCAN_CHARS])
        found = _fingerprint.fingerprint(text, ERROR_DOMAIN, nonces=True)
        return found, unknown, KIND_NONE, None, True
    if result is UNSET:
        return NO_OUTCOME

    tool_result = _safe(_is_tool_result, False, result)
    if tool_result and _safe(_is_vetoed, False, result):
        return VETO_OUTCOME
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
            return _hash(value), None, KIND_NONE, None, False
    try:
        if tool_result:
            return _tool_result_outcome(tool_name, args, result, send_tools)
        if _is_receipt(tool_name, result):
            return _hash(_receipt_value(result)), None, KIND_NONE, None, False
    except Exception:
        # A mapping that raises on access hashes as an opaque whole value.
        pass
    return _hash(result), None, KIND_NONE, None, False


def hash_outcome(
    tool_name: str,
    args: Any,
    *,
    result: Any = UNSET,
    error: Any = UNSET,
    normalizers: Mapping[str, Normalizer] | None = None,
    send_tools: Collection[str] = (),
) -> tuple[int | None, str | None]:
    """``(result_hash, unknown_tool_name)`` of a call's outcome (SPEC §2; a veto has none)."""
    found = outcome_of(
        tool_name,
        args,
        result=result,
        error=error,
        normalizers=normalizers,
        send_tools=send_tools,
    )
    return found[0], found[1]


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

"""How does the hook write a log line a gateway can keep and index? (SPEC §9.3, §12.2)

Every line about a call names its scope as ``[session=… run_id=…]``, with
control characters escaped so that no session id or tool name can forge a line
or colour a terminal, and carries the structured ``extra`` fields JSON log
pipelines index. Tool arguments and results are never logged.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Hashable
from typing import Any

__all__ = ["escape", "extra", "logger", "scope_suffix", "scope_value", "storm_level"]

logger = logging.getLogger("loopcore")

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: Longest scope value written into a line; the rest is elided.
MAX_VALUE = 200


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str, limit: int | None = MAX_VALUE) -> str:
    """``text`` with control characters written as escapes, at most ``limit`` long."""
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return _CONTROL.sub(_escaped, text)


def scope_value(value: Hashable) -> str:
    """A session or run id as a line shows it: a str as is, anything else by ``repr``."""
    if type(value) is str:
        return escape(value)
    if value is None or type(value) in (int, bool, float):
        return repr(value)
    try:
        text = repr(value)
        if type(text) is not str:
            raise TypeError
    except Exception:
        text = f"<{type(value).__name__}>"
    return escape(text)


def scope_suffix(session: Hashable, run_id: str | None) -> str:
    """`` [session=… run_id=…]``: what every scoped line ends with."""
    return f" [session={scope_value(session)} run_id={scope_value(run_id)}]"


def extra(
    event: str,
    session: Hashable,
    run_id: str | None,
    tool: str | None = None,
    detector: str | None = None,
    level: str | None = None,
    count: int | None = None,
    shadow: bool = False,
) -> dict[str, Any]:
    """The ``extra`` attributes of a record about a call (names prefixed ``loopcore_``)."""
    return {
        "loopcore_event": event,
        "loopcore_tool": escape(tool) if type(tool) is str else tool,
        "loopcore_detector": detector,
        "loopcore_level": level,
        "loopcore_count": count,
        "loopcore_session": scope_value(session) if session is not None else None,
        "loopcore_run_id": scope_value(run_id) if run_id is not None else None,
        "loopcore_shadow": shadow,
    }


def storm_level(occurrence: int, loud: int = logging.ERROR) -> int:
    """Storm control: ``loud`` on the 1st, 2nd, 4th, 8th … occurrence, DEBUG otherwise."""
    return loud if occurrence & (occurrence - 1) == 0 else logging.DEBUG

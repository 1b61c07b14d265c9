"""How is text taken from a trace shown on a terminal? ``printable``, escaping control characters.

Tool names, session and run ids, file names and the reasons a line is
malformed come from the input: written as they are, a newline in one would
forge a report line and an escape sequence would colour (or rewrite) the
terminal. So the characters that move the cursor or change what is shown are
written as ``repr``-style escapes (``\\n``, ``\\x1b``, ``\\u2028``): C0 and C1
controls, DEL, the line and paragraph separators, the bidirectional overrides
and isolates, and lone surrogates (which could not be written as UTF-8 at all).
Everything else, backslashes included, is kept as it is.
"""

from __future__ import annotations

import re

__all__ = ["printable"]

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return repr(match.group())[1:-1]


def printable(text: str) -> str:
    """``text`` with every control character written as an escape (see the module docstring)."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape, text)

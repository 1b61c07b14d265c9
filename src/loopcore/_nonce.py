"""Which wrapper nonces in an outcome's text are not progress? (SPEC §8.5, both twins)

A host that wraps fetched content in ``<<<EXTERNAL_UNTRUSTED_CONTENT id="N">>>`` …
``<<<END_EXTERNAL_UNTRUSTED_CONTENT id="N">>>`` draws a fresh 16-hex-digit ``N`` each
time, so the same page fetched twice would never look like a repeat. ``normalise``
replaces both ``N`` of every well-formed wrapper with zeros; the outcome rules apply it
to every string value they hash (the encoders' ``nonces`` mode), never to args or keys.

The scanner is written by hand and reads each character a bounded number of times:
every search starts where the previous one of its kind stopped, so a text with
40,000 backslashes or 10,000 unmatched openings costs linear time. ``scan`` reports
that work (characters read), which the tests bound.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["MIN_WRAPPED", "OPEN", "Verbatim", "normalise", "scan"]

START: Final = "<<<EXTERNAL_UNTRUSTED_CONTENT"
END: Final = "<<<END_EXTERNAL_UNTRUSTED_CONTENT"
#: The text before the first backslash run of an opening and of a closing.
OPEN: Final = START + " id="
CLOSE: Final = END + " id="
NONCE_LEN: Final = 16
ZERO_NONCE: Final = "0" * NONCE_LEN
# After the nonce and its second backslash run: the quote and the three ">".
_TAIL = '">>>'
#: The shortest text holding a whole wrapper (no backslashes, empty content): anything
#: shorter is left alone without being searched.
MIN_WRAPPED: Final = len(OPEN) + len(CLOSE) + 2 * (1 + NONCE_LEN + len(_TAIL))

# A run of backslashes. Nothing follows the star, so the engine never backtracks:
# one greedy pass over the run.
_RUN = re.compile(r"\\*")
_HEX = frozenset("0123456789abcdef")


class Verbatim(str):
    """A str the outcome rules already normalised piece by piece (SPEC §12.10).

    The joined ``text`` of a tool result is normalised entry by entry, before the
    join; the encoders' ``nonces`` mode must not normalise the joined text again
    (a wrapper split across two entries would then match). Both encoders encode a
    ``Verbatim`` exactly like the str it equals and skip normalising it.
    """

    __slots__ = ()


def _run_end(text: str, at: int) -> int:
    """Where the run of backslashes starting at ``at`` ends."""
    match = _RUN.match(text, at)
    return at if match is None else match.end()


def _is_nonce(text: str, at: int) -> bool:
    piece = text[at : at + NONCE_LEN]
    return len(piece) == NONCE_LEN and all(c in _HEX for c in piece)


def _wrapper_end(
    text: str, at: int, head: str, run: int | None
) -> tuple[tuple[int, int, int] | None, int]:
    """``(run length, nonce position, end)`` of ``head`` B ``"`` N B ``">>>`` at ``at``.

    ``run`` None: B is whatever run of backslashes follows ``head``; else it must
    be exactly ``run`` long. None when the text there is not of that form. The
    second item is how far past ``at`` the text was read.
    """
    if not text.startswith(head, at):
        return None, len(head)
    first = at + len(head)
    after = _run_end(text, first)
    length = after - first
    if (run is not None and length != run) or not text.startswith('"', after):
        return None, after + 1 - at
    nonce = after + 1
    if not _is_nonce(text, nonce):
        return None, nonce + NONCE_LEN - at
    second = nonce + NONCE_LEN
    stop = _run_end(text, second)
    if stop - second != length or not text.startswith(_TAIL, stop):
        return None, stop + len(_TAIL) - at
    return (length, nonce, stop + len(_TAIL)), stop + len(_TAIL) - at


def _quotes_escaped(text: str, start: int, stop: int, depth: int) -> tuple[bool, int]:
    """Has every ``"`` in ``text[start:stop]`` a run of k backslashes with depth | k + 1?

    Also returns the characters read. A run before a quote lies between the
    previous quote (or ``start``) and it, so each character is read once.
    """
    begin = start
    while True:
        quote = text.find('"', begin, stop)
        if quote < 0:
            return True, stop - start
        segment = text[begin:quote]
        run = len(segment) - len(segment.rstrip("\\"))
        if (run + 1) % depth:
            return False, quote + 1 - start
        begin = quote + 1


def _find(text: str, marker: str, start: int, stop: int) -> tuple[int, int]:
    """``text.find(marker, start, stop)`` and the characters it read."""
    found = text.find(marker, start, stop)
    return found, (stop if found < 0 else found + len(marker)) - start


def scan(text: str) -> tuple[list[int], int]:
    """The positions of the nonces to zero in ``text``, and the characters read.

    Left to right and non-overlapping (SPEC §8.5): an opening, then content that
    holds no opening or closing marker, then a closing with the same backslash
    run and the same nonce. The pair qualifies when the run is one JSON-encoding
    depth (run + 1 a power of two) and every quote inside is escaped to that depth.
    Neither marker can overlap the other or itself, so the content ends at the
    first marker after the opening: no other closing can belong to it.
    """
    found: list[int] = []
    size = len(text)
    at, work = _find(text, START, 0, size)
    # The first closing marker at or after the current content, cached: contents
    # only move forward, so each stretch of text is searched for one once.
    closing = -1
    while at >= 0:
        opening, read = _wrapper_end(text, at, OPEN, None)
        work += read
        if opening is None:
            at, read = _find(text, START, at + 1, size)
            work += read
            continue
        run, first_nonce, content = opening
        if closing < content:
            closing, read = _find(text, END, content, size)
            work += read
            if closing < 0:
                break  # no closing after here, so none for any later opening
        nxt, read = _find(text, START, content, closing)
        work += read
        if nxt >= 0:
            at = nxt  # the content would hold an opening marker: no pair here
            continue
        close, read = _wrapper_end(text, closing, CLOSE, run)
        work += read
        if (
            close is not None
            and text[first_nonce : first_nonce + NONCE_LEN]
            == (text[close[1] : close[1] + NONCE_LEN])
        ):
            depth = run + 1
            escaped, read = _quotes_escaped(text, content, closing, depth)
            work += read
            if depth & run == 0 and escaped:
                found.append(first_nonce)
                found.append(close[1])
        at, read = _find(text, START, closing, size)
        work += read
    return found, work


def normalise(text: str) -> str:
    """``text`` with the nonces of its qualifying wrappers zeroed (SPEC §8.5).

    Returns an exact str: ``text`` itself when nothing changes. Never raises on a
    str (a subclass's own methods never run).
    """
    if type(text) is not str:
        text = str.__str__(text)
    if len(text) < MIN_WRAPPED or START not in text:
        return text
    positions, _ = scan(text)
    if not positions:
        return text
    pieces = []
    last = 0
    for position in positions:
        pieces.append(text[last:position])
        pieces.append(ZERO_NONCE)
        last = position + NONCE_LEN
    pieces.append(text[last:])
    return "".join(pieces)

"""How is a file that holds one JSON document read, and on which line is each record in it?

A conversation file is often one JSON document written across many lines (a
list of conversations, or one conversation object), not JSONL. Such a file
opens with a line that starts a JSON value and does not finish it
(``opens_document``); its lines are then held (``Document``), up to the line
limit in all, and parsed whole. The few top levels of the document (the
list of records, each record, its list of messages) are decoded one value at a
time (``decode_located``), so that every record and message is known with the
line it starts on: reports and hits then point into the file.
"""

from __future__ import annotations

import itertools
import json
import re
from array import array
from collections.abc import Callable, Iterator
from typing import Any

from ._reader import DECODER, Lines

__all__ = ["LOCATED_DEPTH", "Document", "decode_located", "opens_document"]

#: Containers this deep (0 = the document) or less are given their line: enough for
#: a message inside a record inside a list of records.
LOCATED_DEPTH = 3

#: Held lines ``looks_like_lines`` reads at most.
SAMPLE = 1000

_SPACE = re.compile(r"[ \t\n\r]*")
#: The decoder's own string scanner (the C one): a key, from just past its opening quote.
_scanstring: Callable[[str, int], tuple[str, int]]
_scanstring = json.decoder.scanstring  # type: ignore[attr-defined]


def opens_document(line: bytes, number: int) -> bool:
    """Does ``line`` start a JSON array or object that goes on past its end?

    A pretty-printed document's first line (``{``, ``[``, ``{"messages": [``)
    does; so does a truncated JSONL line, which ``Document.looks_like_lines``
    later tells apart.
    """
    try:
        text = line.decode("utf-8-sig" if number == 1 else "utf-8").strip()
    except UnicodeDecodeError:
        return False
    if not text or text[0] not in "[{":
        return False
    try:
        DECODER.decode(text)
    except json.JSONDecodeError as exc:
        return exc.pos >= len(text)  # the value was still open when the line ended
    except (ValueError, RecursionError):
        return False
    return False


class Document:
    """A file's lines from the one that opens a document, held to be parsed as one text.

    At most ``limit`` bytes (plus the line that passed it) are held: past that,
    ``too_long`` is set and the rest of the file is left unread in ``lines``.
    """

    __slots__ = ("data", "numbers", "starts", "too_long")

    def __init__(self, number: int, line: bytes, lines: Lines, limit: int) -> None:
        self.data = bytearray(line)
        self.starts = array("q", [0])
        self.numbers = array("q", [number])
        self.too_long = False
        for later, text in lines:
            self.starts.append(len(self.data))
            self.numbers.append(later)
            self.data += text
            if len(self.data) > limit:
                self.too_long = True
                return

    @property
    def first(self) -> int:
        return self.numbers[0]

    def line_of(self, text_line: int) -> int:
        """The file's line number of the document's ``text_line`` (1-based)."""
        return self.numbers[min(max(text_line, 1), len(self.numbers)) - 1]

    def held(self) -> Iterator[tuple[int, bytes]]:
        """The held lines again, numbered, for reading them as JSONL after all."""
        data, starts = self.data, self.starts
        ends = [*starts[1:], len(data)]
        for number, start, end in zip(self.numbers, starts, ends, strict=True):
            yield number, bytes(data[start:end])

    def looks_like_lines(self) -> bool:
        """Do most held lines after the first (of the first ``SAMPLE``) hold a whole JSON
        object each? Then the file is JSONL whose first line is broken, not a document (in a
        pretty-printed document, at most the last item of a list stands alone so)."""
        whole = other = 0
        held = self.held()
        next(held)
        for _, line in itertools.islice(held, SAMPLE):
            text = line.strip()
            if not text:
                continue
            try:
                standalone = isinstance(DECODER.decode(text.decode("utf-8")), dict)
            except (ValueError, RecursionError):
                standalone = False
            whole, other = (whole + 1, other) if standalone else (whole, other + 1)
        return whole > other

    def text(self) -> str:
        """The document as text (a byte-order mark dropped); ``UnicodeDecodeError`` if it is
        not UTF-8."""
        return self.data.decode("utf-8-sig" if self.first == 1 else "utf-8")

    def line_at_byte(self, offset: int) -> int:
        """The file's line number holding the document's byte ``offset``."""
        low, high = 0, len(self.starts) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if self.starts[middle] <= offset:
                low = middle
            else:
                high = middle - 1
        return self.numbers[low]


def decode_located(text: str) -> tuple[Any, dict[int, int]]:
    """The document's value, and the 1-based text line of each container near its top.

    The second item maps ``id(container)`` to the line its ``[`` or ``{`` is
    on, for containers at most ``LOCATED_DEPTH`` deep. Raises what
    ``json.loads`` raises on a bad document (``JSONDecodeError`` with the
    position, ``RecursionError``, ``ValueError``).
    """
    locator = _Locator(text)
    value, end = locator.value(_SPACE.match(text, 0).end(), 0)  # type: ignore[union-attr]
    end = _SPACE.match(text, end).end()  # type: ignore[union-attr]
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return value, locator.lines


class _Locator:
    """Decodes the top of a document value by value, remembering each container's line."""

    __slots__ = ("at", "line", "lines", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines: dict[int, int] = {}
        self.at = 0
        self.line = 1

    def line_of(self, pos: int) -> int:
        # Positions only grow while decoding: count the newlines since the last one.
        self.line += self.text.count("\n", self.at, pos)
        self.at = pos
        return self.line

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        text = self.text
        head = text[pos : pos + 1]
        if head not in ("[", "{"):
            return DECODER.raw_decode(text, pos)
        line = self.line_of(pos)
        if depth >= LOCATED_DEPTH:
            value, end = DECODER.raw_decode(text, pos)
        elif head == "[":
            value, end = self._array(pos, depth)
        else:
            value, end = self._object(pos, depth)
        self.lines[id(value)] = line
        return value, end

    def _space(self, pos: int) -> int:
        return _SPACE.match(self.text, pos).end()  # type: ignore[union-attr]

    def _next(self, pos: int, close: str) -> tuple[bool, int]:
        """After a member: (True, past the closing bracket) or (False, the next member)."""
        pos = self._space(pos)
        if self.text.startswith(close, pos):
            return True, pos + 1
        if not self.text.startswith(",", pos):
            raise json.JSONDecodeError("Expecting ',' delimiter", self.text, pos)
        return False, self._space(pos + 1)

    def _array(self, pos: int, depth: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        pos = self._space(pos + 1)
        if self.text.startswith("]", pos):
            return out, pos + 1
        while True:
            item, pos = self.value(pos, depth + 1)
            out.append(item)
            done, pos = self._next(pos, "]")
            if done:
                return out, pos

    def _object(self, pos: int, depth: int) -> tuple[dict[str, Any], int]:
        text = self.text
        out: dict[str, Any] = {}
        pos = self._space(pos + 1)
        if text.startswith("}", pos):
            return out, pos + 1
        while True:
            if not text.startswith('"', pos):
                raise json.JSONDecodeError(
                    "Expecting property name enclosed in double quotes", text, pos
                )
            key, pos = _scanstring(text, pos + 1)
            pos = self._space(pos)
            if not text.startswith(":", pos):
                raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
            out[key], pos = self.value(self._space(pos + 1), depth + 1)
            done, pos = self._next(pos, "}")
            if done:
                return out, pos

"""When is an exec result a terminal failure, and what stays the same across its runs? (§8.4)

A command that fails the same way every time — with only timestamps, attempt
counters, durations and pids drifting — is no progress, even when each call runs
a new command. ``is_terminal`` says whether a finished exec failed for good;
``shape`` reduces its output to the part that stays the same, for the failure's
identity hash. Both are pure functions of plain values, shared by both outcome
twins (the compiled one hands every exec outcome to the reference rules).
"""

from __future__ import annotations

import math
import re
from typing import Final

__all__ = ["SHAPE_WINDOW", "exit_footer", "exit_number", "is_terminal", "js_number", "shape"]

_AI = re.ASCII | re.IGNORECASE
#: The drifting parts of a failure's output, replaced by ``#`` in this order.
_DRIFT: Final = (
    re.compile(r"\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:z|[+-]\d{2}:\d{2})?", _AI),
    re.compile(r"\d{1,2}:\d{2}:\d{2}(?:\.\d{1,6})?", re.ASCII),
    re.compile(r"\b(?:attempt|retry)\b[\s#:=]*\d+", _AI),
    re.compile(r"\b\d+(?:\.\d+)?\s?(?:ns|us|ms|seconds?|minutes?|hours?|s)\b", _AI),
    re.compile(r"\b(?:pid|ppid)\b[\s#:=]*\d+", _AI),
)

#: ``shape`` reads at most this many characters from each end of the output (§12.17).
SHAPE_WINDOW: Final = 64 * 1024
# Between the shaped head and tail of a long output. The two ends are shaped
# separately, so no match can span the cut (none can start in the head and end
# in the tail, whatever the joint); the joint itself holds a NUL, which no
# command's text output is expected to contain, so a cut output does not equal
# an uncut one by accident.
_CUT: Final = "\n\x00\n"


def _shape_part(text: str) -> str:
    for pattern in _DRIFT:
        text = pattern.sub("#", text)
    return text


def shape(out: str) -> str:
    """``out`` with its drifting parts replaced by ``#`` (SPEC §8.4).

    Reads at most the first and last ``SHAPE_WINDOW`` characters: a longer output
    is shaped as its head and its tail, each on its own, joined by a fixed cut.
    Each pattern scans its text once (no nested repetition that could backtrack
    over a long run), so the cost is linear in what is read.
    """
    if len(out) <= 2 * SHAPE_WINDOW:
        return _shape_part(out)
    return _shape_part(out[:SHAPE_WINDOW]) + _CUT + _shape_part(out[-SHAPE_WINDOW:])


def js_number(value: float) -> str:
    """A finite number as JavaScript's ``String(x)`` writes it (``1.0`` → ``"1"``).

    The digits are Python's shortest round-trip ones (``repr``), the same JavaScript
    prints; only the layout differs: fixed notation from 1e-6 up to 1e21, else an
    exponent with an explicit sign and no padding (``1e-7``, ``1.5e+21``).
    """
    value = float(value)
    if value == 0:
        return "0"
    if value < 0:
        return "-" + js_number(-value)
    mantissa, _, exponent = float.__repr__(value).partition("e")
    whole, _, fraction = mantissa.partition(".")
    figures = whole + fraction
    # value = 0.DIGITS * 10**point, DIGITS without leading or trailing zeros.
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = figures.lstrip("0")
    point -= len(figures) - len(stripped)
    digits = stripped.rstrip("0")
    count = len(digits)
    if count <= point <= 21:
        return digits + "0" * (point - count)
    if 0 < point <= 21:
        return digits[:point] + "." + digits[point:]
    if -6 < point <= 0:
        return "0." + "0" * -point + digits
    power = point - 1
    sign = "+" if power >= 0 else "-"
    head = digits if count == 1 else digits[0] + "." + digits[1:]
    return f"{head}e{sign}{abs(power)}"


def exit_number(code: object) -> float | None:
    """An exit code as the number JavaScript would hold, or None when it is not a number.

    Decided by the real type (a bool is not a number; an int or float subclass is
    read from its stored value, none of its methods run). An int too large for a
    double is infinite, as it would be once parsed from JSON.
    """
    cls = type(code)
    if issubclass(cls, bool):
        return None
    if issubclass(cls, int):
        try:
            return float(int.__index__(code))  # type: ignore[arg-type]
        except OverflowError:
            return math.inf
    if issubclass(cls, float):
        return float.__float__(code)  # type: ignore[arg-type]
    return None


def exit_footer(number: float) -> str:
    """The line exec writes when a command printed nothing: ``(Command exited with code E)``."""
    return f"(Command exited with code {js_number(number)})"


def is_terminal(code: object, timed_out: bool, out: str) -> bool:
    """Did a completed/failed exec fail for good? (SPEC §8.4)

    A finite non-zero exit code, no timeout, and some output other than the bare
    exit footer. ``code`` is the exit code as the result holds it.
    """
    if timed_out:
        return False
    number = exit_number(code)
    if number is None or not math.isfinite(number) or number == 0:
        return False
    return out != "" and out != exit_footer(number)

"""How is a value named without running its own code? (type names, exact str, bad values)

Shared by the outcome rules, the Python ring and the config errors: a host's
class can lie about or raise from ``__name__``, ``__repr__`` or a str
subclass's methods, so names are read from the real type and copied to exact
``str``, and a bad setting is described by its base type's own repr.
"""

from __future__ import annotations

from typing import overload

__all__ = ["describe", "exact_str", "type_name"]

#: How long a bad value may be shown in an error message before it is shortened.
SHOWN_CHARS = 40


def type_name(cls: type) -> str:
    """The class's own ``__name__``, which a metaclass cannot make lie or raise."""
    name: str = type.__dict__["__name__"].__get__(cls, type)
    return name


@overload
def exact_str(text: str) -> str: ...


@overload
def exact_str(text: None) -> None: ...


def exact_str(text: str | None) -> str | None:
    """``text`` as an exact ``str`` (None stays None): a subclass's own methods never run
    on it again, not even a ``__del__`` when the copy is dropped."""
    return text if text is None or type(text) is str else str.__str__(text)


def _digits(number: int) -> int:
    """How many decimal digits ``number`` (positive) has, without converting it to text."""
    # floor(log10(2 ** (bits - 1))) + 1, with log10(2) rounded down: never too many.
    count = (number.bit_length() - 1) * 3010299956 // 10**10 + 1
    while 10**count <= number:
        count += 1
    return count


def _describe_int(value: int) -> str:
    # Past 39 digits (and past int-to-str's digit limit, where repr raises) the value is
    # described by its length: the digits are never all converted.
    if -(10**39) < value < 10**39:
        return int.__repr__(value)
    sign = "a negative" if value < 0 else "an"
    return f"{sign} integer of {_digits(-value if value < 0 else value)} digits"


def describe(value: object) -> str:
    """A bad value as an error message shows it: scalars by repr, containers by type.

    Decided by the real type, with the base type's own repr, so that no value can make
    an error message raise; shown at most ``SHOWN_CHARS`` characters long.
    """
    cls = type(value)
    if value is None or cls is bool:
        text = repr(value)
    elif issubclass(cls, int):
        text = _describe_int(int.__index__(value))  # type: ignore[arg-type]
    elif issubclass(cls, str):
        text = str.__repr__(value)
    elif issubclass(cls, float):
        text = float.__repr__(value)
    else:
        return type_name(cls)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."

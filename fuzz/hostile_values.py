"""Hostile building blocks for ``fuzz_fingerprint.py``: every method they may meet lies or raises.

str/int/float/bytes/list/dict subclasses whose methods raise, a Mapping that
raises on access, dict keys that collide with the outcome rules' keys and
raise on ``==``, objects whose ``__class__`` lies or raises, classes whose
metaclass, ``__module__`` or ``__qualname__`` is hostile, exceptions whose
``__str__`` raises or returns a hostile str, and model/dataclass holders.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


class Boom(Exception):
    """What every hostile method raises (an Exception: BaseException may escape)."""


def _boom(*_args: Any, **_kwargs: Any) -> Any:
    raise Boom


# ---- hostile building blocks ------------------------------------------------


class HStr(str):
    __str__ = __repr__ = __format__ = encode = strip = __eq__ = __lt__ = _boom
    __hash__ = str.__hash__


class HInt(int):
    __index__ = __int__ = __float__ = __repr__ = __str__ = __format__ = _boom
    __eq__ = __lt__ = bit_length = to_bytes = _boom
    __hash__ = int.__hash__


class HFloat(float):
    __float__ = __repr__ = __str__ = __format__ = __eq__ = is_integer = _boom
    __hash__ = float.__hash__


class HBytes(bytes):
    __bytes__ = __repr__ = __str__ = __eq__ = _boom
    __hash__ = bytes.__hash__


class HList(list):  # type: ignore[type-arg]
    __iter__ = __len__ = __repr__ = __getitem__ = _boom


class HDict(dict):  # type: ignore[type-arg]
    items = get = keys = __getitem__ = __contains__ = __iter__ = __repr__ = _boom


class HMapping(Mapping[Any, Any]):
    __getitem__ = __iter__ = __len__ = items = get = __contains__ = _boom


class HashAs:
    """A dict key that collides with a rule's key ("content", "action") and raises on ``==``."""

    def __init__(self, like: str) -> None:
        self.like = like

    def __hash__(self) -> int:
        return hash(self.like)

    __eq__ = _boom

    def __repr__(self) -> str:
        return f"HashAs({self.like!r})"


class Hostile:
    """An object that is hostile in the ways ``flags`` names; ``claim`` is what it says it is."""

    def __init__(self, flags: frozenset[str], claim: type | None, tag: int) -> None:
        object.__setattr__(self, "_flags", flags)
        object.__setattr__(self, "_claim", claim)
        object.__setattr__(self, "_tag", tag)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        if "class-raises" in self._flags:
            raise Boom
        return self._claim or Hostile

    def __repr__(self) -> str:
        if "repr-raises" in self._flags:
            raise Boom
        if "repr-hstr" in self._flags:
            return HStr(f"<hostile {self._tag} at 0x{self._tag:x}>")
        return f"<hostile {self._tag}>"

    __str__ = __format__ = __eq__ = __lt__ = __bool__ = __len__ = __iter__ = _boom

    def __hash__(self) -> int:
        if "hash-raises" in self._flags:
            raise Boom
        return self._tag

    def __getattr__(self, name: str) -> Any:
        raise Boom


class LyingMeta(type):
    def __getattribute__(cls, name: str) -> Any:
        if name in ("__module__", "__qualname__", "__name__", "model_dump", "__array__"):
            raise Boom
        return super().__getattribute__(name)


class MetaHostile(metaclass=LyingMeta):
    def __repr__(self) -> str:
        return "<MetaHostile>"


class BadModule:
    pass


BadModule.__module__ = HStr("hostile.module")


class BadQualname:
    pass


BadQualname.__qualname__ = HStr("Bad.Qualname")
BadQualname.__module__ = None  # type: ignore[assignment]


class BadError(Exception):
    __str__ = _boom


class HStrError(Exception):
    def __str__(self) -> str:
        return HStr("unknown tool: ghost")


class BadNameError(Exception):
    pass


BadNameError.__qualname__ = HStr("Bad.Error")
BadNameError.__module__ = HStr("hostile")


@dataclasses.dataclass
class Point:
    x: Any
    y: Any = None


class Model:
    def __init__(self, fields: Any, mode: str) -> None:
        self.fields = fields
        self.mode = mode

    def model_dump(self) -> Any:
        if self.mode == "raise":
            raise Boom
        if self.mode == "hostile":
            return HMapping()
        return self.fields

    def __repr__(self) -> str:
        return f"<Model {self.mode}>"


CLASSES = {
    "meta": MetaHostile,
    "module": BadModule,
    "qualname": BadQualname,
}
ERRORS = {
    "str-raises": BadError,
    "str-hstr": HStrError,
    "bad-name": BadNameError,
    "plain": ValueError,
}
CLAIMS = {"none": None, "str": str, "int": int, "float": float, "dict": dict, "list": list}
SUBCLASSES = {"str": HStr, "int": HInt, "float": HFloat, "bytes": HBytes}

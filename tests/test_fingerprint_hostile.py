"""Values whose classes lie or raise: both fingerprint twins encode them alike, never raising.

SPEC §11 "Never raising on values": an object whose ``__class__``,
``__module__``, ``__qualname__``, ``__repr__``, ``__str__`` or ``__format__``
lies or raises encodes through fixed fallbacks. The name in an ``x`` or ``r``
encoding is ``type(value)``'s own ``__module__`` + "." + ``__qualname__``, read
through ``type``'s descriptors: a qualname that is not an exact ``str`` is "?",
a module that is not one is left out; nothing a subclass defines
(``__format__``, ``encode``) ever runs on these texts. Expected bytes are
built from the format, as in test_encoding_format.py.
"""

from __future__ import annotations

import re
import struct
from typing import Any

import pytest

from loopcore import _fingerprint_py, _outcome_py
from loopcore._twins import use_twin

from .conftest import TWINS

if "cython" in TWINS:
    from loopcore import _fingerprint_c, _outcome_c

    ENCODERS: tuple[Any, ...] = (_fingerprint_py, _fingerprint_c)
    OUTCOMES: tuple[Any, ...] = (_outcome_py, _outcome_c)
else:
    ENCODERS = (_fingerprint_py,)
    OUTCOMES = (_outcome_py,)


def s(text: str) -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    return b"s" + struct.pack("<Q", len(data)) + data


def opaque(name: str, text: str) -> bytes:
    return b"r" + s(name) + s(text)


def stripped_repr(value: object) -> str:
    return re.sub(r" at 0x[0-9a-fA-F]+", "", object.__repr__(value))


def encodings(value: Any) -> bytes:
    """The one encoding every twin gives ``value`` (none may raise, all must agree)."""
    found = [encoder.encode(value) for encoder in ENCODERS]
    assert all(e == found[0] for e in found), found
    for encoder in ENCODERS:
        assert encoder.fingerprint(value, b"dom") == _fingerprint_py.fingerprint(value, b"dom")
    return found[0]


class Boom(Exception):
    pass


def _boom(*_args: Any, **_kwargs: Any) -> Any:
    raise Boom


class FormatRaises(str):
    __format__ = _boom


class EncodeRaises(str):
    encode = _boom


class AllRaise(str):
    __format__ = encode = __str__ = __repr__ = __eq__ = __add__ = __radd__ = _boom
    __hash__ = str.__hash__


class ModuleFormatRaises:
    pass


ModuleFormatRaises.__module__ = FormatRaises("mod")


class QualnameEncodeRaises:
    pass


QualnameEncodeRaises.__qualname__ = EncodeRaises("Q.Name")
QualnameEncodeRaises.__module__ = None  # type: ignore[assignment]


class QualnameAllRaise:
    pass


QualnameAllRaise.__qualname__ = AllRaise("Q")


class NamesRaise(type):
    def __getattribute__(cls, name: str) -> Any:
        if name in ("__module__", "__qualname__", "__name__"):
            raise Boom
        return super().__getattribute__(name)


class MetaNamed(metaclass=NamesRaise):
    pass


def test_module_whose_format_raises() -> None:
    value = ModuleFormatRaises()
    # The module is not an exact str: left out, and never formatted.
    assert encodings(value) == opaque("ModuleFormatRaises", stripped_repr(value))


@pytest.mark.parametrize("cls", [QualnameEncodeRaises, QualnameAllRaise])
def test_qualname_str_subclass_is_the_marker(cls: type) -> None:
    value = cls()
    assert encodings(value) == opaque("?", stripped_repr(value))


def test_metaclass_cannot_hide_the_name() -> None:
    value = MetaNamed()
    name = f"{__name__}.MetaNamed"
    assert encodings(value) == opaque(name, stripped_repr(value))


class ReprHostileStr:
    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return AllRaise(self.text)


@pytest.mark.parametrize("text", ["<plain>", "<thing at 0x7f00aa>", ""])
def test_repr_returning_a_hostile_str_subclass(text: str) -> None:
    value = ReprHostileStr(text)
    expected = re.sub(r" at 0x[0-9a-fA-F]+", "", text)
    assert encodings(value) == opaque(f"{__name__}.ReprHostileStr", expected)


class ReprRaises:
    __repr__ = __str__ = __format__ = _boom


def test_repr_raising_is_the_marker() -> None:
    assert encodings(ReprRaises()) == opaque(f"{__name__}.ReprRaises", "<repr failed>")


class MessageHostile(Exception):
    def __str__(self) -> str:
        return AllRaise("the message")


class MessageRaises(Exception):
    __str__ = _boom


class ErrorNamesHostile(Exception):
    pass


ErrorNamesHostile.__qualname__ = AllRaise("Err")
ErrorNamesHostile.__module__ = FormatRaises("hostile")


@pytest.mark.parametrize(
    ("error", "name", "message"),
    [
        (MessageHostile("x"), f"{__name__}.MessageHostile", "the message"),
        (MessageRaises("x"), f"{__name__}.MessageRaises", ""),
        (ErrorNamesHostile("boom"), "?", "boom"),
        (ValueError(AllRaise("arg")), "builtins.ValueError", ""),
    ],
    ids=["str-returns-hostile-subclass", "str-raises", "hostile-names", "hostile-arg"],
)
def test_exceptions_with_hostile_text_or_names(error: Exception, name: str, message: str) -> None:
    assert encodings(error) == b"x" + s(name) + s(message)


def _lying(base: type, claim: Any) -> Any:
    class Lying(base):  # type: ignore[valid-type, misc]
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            if claim is Boom:
                raise Boom
            return claim  # type: ignore[no-any-return]

    return Lying


def _u64(n: int) -> bytes:
    return struct.pack("<Q", n)


ONE_A = b"l" + _u64(2) + b"i" + _u64(1) + s("a")
A_B = b"d" + _u64(1) + s("a") + s("b")


@pytest.mark.parametrize("claim", [str, int, float, dict, list, bytes, Boom], ids=repr)
@pytest.mark.parametrize(
    ("base", "make", "expected"),
    [
        (list, lambda cls: cls([1, "a"]), ONE_A),
        (tuple, lambda cls: cls((1, "a")), ONE_A),
        (dict, lambda cls: cls(a="b"), A_B),
        (str, lambda cls: cls("text"), s("text")),
    ],
    ids=["list", "tuple", "dict", "str"],
)
def test_a_lying_class_is_encoded_by_its_real_type(
    base: type, make: Any, expected: bytes, claim: Any
) -> None:
    value = make(_lying(base, claim))
    assert encodings(value) == expected
    assert encodings([value, {"k": (value,)}]) == encodings([base(value), {"k": (base(value),)}])


@pytest.mark.parametrize("claim", [str, int, float, dict, list, BaseException, Boom], ids=repr)
def test_a_plain_object_claiming_a_type_is_opaque(claim: Any) -> None:
    value = _lying(object, claim)()
    assert encodings(value) == opaque(
        f"{__name__}.{type(value).__qualname__}", stripped_repr(value)
    )


HOSTILE: dict[str, Any] = {
    "module-format-raises": ModuleFormatRaises(),
    "qualname-encode-raises": QualnameEncodeRaises(),
    "qualname-all-raise": QualnameAllRaise(),
    "metaclass-names-raise": MetaNamed(),
    "repr-hostile-str": ReprHostileStr("<x>"),
    "repr-raises": ReprRaises(),
    "error-message-hostile": MessageHostile("x"),
    "error-message-raises": MessageRaises("x"),
    "error-names-hostile": ErrorNamesHostile("unknown tool: ghost"),
    "list-class-raises": _lying(list, Boom)([1]),
    "dict-claims-str": _lying(dict, str)(content="x"),
    "object-claims-str": _lying(object, str)(),
    "object-claims-exception": _lying(object, BaseException)(),
    "str-all-raise": AllRaise("unknown tool: ghost"),
    "class-module-format-raises": ModuleFormatRaises,
    "class-qualname-all-raise": QualnameAllRaise,
    "class-metaclass-names-raise": MetaNamed,
}


@pytest.mark.parametrize("name", list(HOSTILE))
@pytest.mark.parametrize("tool", ["read", "exec", "process", "message", "update_plan"])
def test_hash_call_and_hash_outcome_agree_across_twins(name: str, tool: str) -> None:
    # By name: pytest's own checks on a parameter would meet the lying __class__.
    value = HOSTILE[name]
    results = set()
    for twin in TWINS:
        for module in OUTCOMES:
            with use_twin(twin):
                call = module.hash_call(tool, {"action": "poll", "v": value})
                outcomes = (
                    module.hash_outcome(tool, value, result=value),
                    module.hash_outcome(tool, {}, result={"content": value, "details": value}),
                    module.hash_outcome(tool, {}, result={"details": {"status": value}}),
                    module.hash_outcome(tool, {}, error=value),
                )
            assert 0 <= call < 2**64
            results.add((call, outcomes))
    assert len(results) == 1, results

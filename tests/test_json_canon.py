"""Is the call hash read from the args' JSON text in C the reference's, whenever C is sure?

``batch._rows_c.call_hash_of_json`` (the C reader of ``loopcore/_json_canon.h``)
against ``hash_call`` of ``json.loads`` of the same bytes: generated JSON of
every shape (random nesting, key orders, escapes, numbers of every form, the
nasty cases: duplicate keys, lone surrogates, UTF-8 encoded surrogates, invalid
UTF-8, NaN, ints past int64, deep nesting, exec's ``title``). Wherever the C
reader answers, its hash is the reference's; where it must give up, it does;
and on plain args it does answer (so the fast path is really taken). Then whole
replays of lines holding such args, compiled reading path against the reference.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from loopcore._outcome_py import hash_call
from loopcore.formats import _fast

from .conftest import TWINS
from .test_rows_twins import _read as replay  # the table, row lines and reports of a replay

pytestmark = [
    pytest.mark.skipif("cython" not in TWINS, reason="the compiled twin is not built"),
    pytest.mark.skipif(not _fast.AVAILABLE, reason="msgspec is not installed"),
]

TOOLS = ["read", "exec", "edit", "wait", "command_status", "ünïcode", "write"]
INT64 = 2**63


def _canon(tool: str, data: bytes) -> int | None:
    from loopcore.batch._rows_c import call_hash_of_json  # type: ignore[attr-defined]

    found: int | None = call_hash_of_json(tool, data)
    return found


def _reference(tool: str, data: bytes) -> int:
    return hash_call(tool, json.loads(data))


def _agrees(tool: str, data: bytes) -> int | None:
    """The C hash, checked against the reference's wherever C answers."""
    found = _canon(tool, data)
    if found is not None:
        assert found == _reference(tool, data), data
    return found


# -- generated values ----------------------------------------------------------------------

keys = st.text(max_size=8)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=40)
)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(keys, inner, max_size=6),
    max_leaves=30,
)


def _dumps(value: Any, style: int) -> bytes:
    """``value`` as JSON, in one of a few styles (ASCII or not, spaced or not)."""
    if style == 0:
        text = json.dumps(value)
    elif style == 1:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    elif style == 2:
        text = json.dumps(value, indent=1)
    else:
        text = " " + json.dumps(value, ensure_ascii=False, separators=(" , ", " : ")) + "\r\n"
    # surrogatepass: a lone surrogate written raw becomes the bytes json reads back.
    return text.encode("utf-8", "surrogatepass")


def _plain(value: Any, depth: int = 1) -> bool:
    """Could the C reader be sure of this value? (what it must then answer)"""
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return -INT64 <= value < INT64
    if isinstance(value, float):
        if not math.isfinite(value):
            return False
        return not value.is_integer() or -INT64 <= value < INT64
    if isinstance(value, str):
        return not any(0xD800 <= ord(c) <= 0xDFFF for c in value)
    if depth >= 16:
        return False
    if isinstance(value, list):
        return all(_plain(item, depth + 1) for item in value)
    assert isinstance(value, dict)
    return len(value) <= 64 and all(
        _plain(key) and _plain(item, depth + 1) for key, item in value.items()
    )


@settings(max_examples=400)
@given(tool=st.sampled_from(TOOLS), value=values, style=st.integers(0, 3))
def test_the_c_hash_is_the_reference_hash(tool: str, value: Any, style: int) -> None:
    data = _dumps(value, style)
    found = _agrees(tool, data)
    titled = tool == "exec" and isinstance(value, dict) and "title" in value
    if _plain(value) and not titled:
        assert found is not None, data
    if titled:
        assert found is None


# -- numbers of every form -----------------------------------------------------------------

numbers = st.builds(
    lambda sign, whole, fraction, exponent: sign + whole + fraction + exponent,
    st.sampled_from(["", "-"]),
    st.sampled_from(["0", "00", "1", "9"]) | st.from_regex(r"[1-9][0-9]{0,25}", fullmatch=True),
    st.sampled_from(["", ".", ".0", ".5", ".25"]) | st.from_regex(r"\.[0-9]{1,30}", fullmatch=True),
    st.sampled_from(["", "e", "E+", "e-"]) | st.from_regex(r"[eE][+-]?[0-9]{1,4}", fullmatch=True),
)


@settings(max_examples=500)
@given(token=numbers, wrap=st.sampled_from(["{}", "[{}]", '{{"n": {}}}', "[1, {} ]"]))
def test_numbers_hash_as_json_reads_them(token: str, wrap: str) -> None:
    data = wrap.format(token).encode()
    try:
        value = json.loads(data)
    except ValueError:
        assert _canon("read", data) is None  # not JSON: "00", "1.", "1e"
        return
    found = _agrees("read", data)
    number = value if not isinstance(value, (list, dict)) else None
    if isinstance(value, list):
        number = value[-1]
    elif isinstance(value, dict):
        number = value["n"]
    if _plain(number) and len(token) <= 64:
        assert found is not None, data


@pytest.mark.parametrize(
    "token",
    [
        "0",
        "-0",
        "-0.0",
        "0.0",
        "1e2",
        "1E+2",
        "100e-2",
        "2.5",
        "-2.5e-3",
        "1e-400",
        "5e-324",
        "1.5e-300",
        "9223372036854775807",
        "-9223372036854775808",
        "-9223372036854775808.0",
        "9.223372036854775e18",
        "0.1",
        "123456789012345678",
        "3.141592653589793238462643383279",
    ],
)
def test_number_edges_agree(token: str) -> None:
    assert _agrees("read", f"[{token}]".encode()) is not None


@pytest.mark.parametrize(
    "token",
    [
        "9223372036854775808",
        "-9223372036854775809",
        "1e19",
        "1e400",
        "-1e400",
        "1" * 30,
        "9223372036854775808.0",
        "9223372036854775807.0",
        "1.7976931348623157e308",
    ],
)
def test_numbers_past_int64_or_float_give_up(token: str) -> None:
    assert _canon("read", f"[{token}]".encode()) is None


# -- strings and escapes -------------------------------------------------------------------

pieces = st.lists(
    st.text(max_size=6).map(lambda s: json.dumps(s, ensure_ascii=False)[1:-1])
    | st.sampled_from(['\\"', "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u0000"])
    | st.integers(0, 0xFFFF).map(lambda c: f"\\u{c:04x}")
    | st.integers(0, 0xFFFF).map(lambda c: f"\\u{c:04X}")
    | st.integers(0x10000, 0x10FFFF).map(lambda c: json.dumps(chr(c))[1:-1]),
    max_size=12,
)


@settings(max_examples=500)
@given(parts=pieces, as_key=st.booleans())
def test_escapes_decode_as_json_does(parts: list[str], as_key: bool) -> None:
    literal = '"' + "".join(parts) + '"'
    data = ("{" + literal + ": 1}" if as_key else "[" + literal + "]").encode(
        "utf-8", "surrogatepass"
    )
    found = _agrees("read", data)
    text = json.loads(data)
    decoded = next(iter(text)) if as_key else text[0]
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in decoded):
        assert found is not None, data


@pytest.mark.parametrize(
    "data",
    [
        b'["\\ud800"]',  # a lone high surrogate
        b'["\\udc00"]',  # a lone low surrogate
        b'["\\ud800\\u0041"]',
        b'["\\ud800x"]',
        b'["\xed\xa0\x80"]',  # a surrogate written as UTF-8 (json reads it, surrogatepass)
        b'["\xff"]',  # invalid UTF-8
        b'["\xc0\x80"]',  # overlong
        b'["\xe0\x80\x80"]',
        b'["\xf4\x90\x80\x80"]',  # past U+10FFFF
        b'["\xc3"]',  # truncated
        b'["a\x01b"]',  # a raw control character
        b'["\\x"]',
        b'["\\u12"]',
        b'{"a": 1, "a": 2}',  # duplicate keys
        b'{"a": 1, "\\u0061": 2}',
        b"[NaN]",
        b"[Infinity]",
        b"[-Infinity]",
        b"[1,]",
        b"[1 2]",
        b'{"a" 1}',
        b"{,}",
        b"[tru]",
        b"[01]",
        b"[.5]",
        b"[+1]",
        b"",
        b"1 2",
        b"[" * 16 + b"]" * 16,  # deeper than the reader goes
        b"{" + b",".join(b'"k%d": %d' % (i, i) for i in range(65)) + b"}",
    ],
)
def test_what_c_is_not_sure_of_gives_up(data: bytes) -> None:
    assert _canon("read", data) is None


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 15 + b"]" * 15,
        b"{" + b",".join(b'"k%d": %d' % (i, i) for i in range(64)) + b"}",
        b' \t\r\n{ "b" : [ ] , "a" : { } } \n',
        b'"\xf0\x9f\x98\x80 \xe2\x82\xac \xc3\xa9"',
        b'{"": null, "\\u0000": true, "x": false}',
        b'{"bb": 1, "a": 2, "ccc": {"y": 1, "x": []}}',
        b'{"' + b"k" * 300 + b'": "' + b"v" * 5000 + b'"}',
    ],
)
def test_what_c_is_sure_of_agrees(data: bytes) -> None:
    assert _agrees("read", data) is not None


def test_exec_title_gives_up_only_at_the_top() -> None:
    assert _canon("exec", b'{"command": "ls", "title": "x"}') is None
    assert _canon("exec", b'{"command": "ls", "titl\\u0065": "x"}') is None
    assert _agrees("exec", b'{"command": "ls", "env": {"title": "x"}}') is not None
    assert _agrees("exec", b'[{"title": "x"}]') is not None
    assert _agrees("read", b'{"title": "x"}') is not None


@pytest.mark.parametrize("tool", ["process", "message", "update_plan"])
def test_tools_whose_rules_read_their_args_give_up(tool: str) -> None:
    assert _canon(tool, b'{"action": "poll"}') is None


def test_a_long_encoding_agrees() -> None:
    data = json.dumps({"text": "x" * (600 * 1024), "more": ["y" * 1000] * 400}).encode()
    assert _agrees("read", data) is not None
    assert _canon("read", json.dumps(["z" * (1 << 20)]).encode()) is None  # past the cap


@pytest.mark.parametrize("stop", ['"', "\\", "\x01", "\u00e9", "\\n", "\\u00e9"])
def test_a_stop_at_each_place_near_the_end_of_the_text(stop: str) -> None:
    # The last fewer than 16 bytes of a string that ends its text are read in one
    # vector that ends with the text (lc_json_plain_run): a stop byte at each place of
    # it, in texts shorter and longer than that vector.
    for size in range(0, 40):
        for at in range(size + 1):
            body = "x" * at + stop + "y" * (size - at)
            for text in (f'["{body}"]', f'{{"k": "{body}"}}', f'"{body}"'):
                _answers_only_for_json(text.encode())
    assert _agrees("read", b'["' + b"x" * 30 + b'"]') is not None


# -- hostile bytes -----------------------------------------------------------------------------
# The replay hands the reader only what msgspec accepted as one JSON value, but the
# reader must not rely on it: on any bytes at all it answers (then the bytes are JSON
# and its hash is the reference's) or gives up, and never reads past the end.


def _answers_only_for_json(data: bytes) -> None:
    found = _canon("read", data)
    if found is None:
        return
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        pytest.fail(f"answered for bytes json.loads refuses: {data!r}")
    assert found == hash_call("read", value), data


@given(st.binary(max_size=200))
def test_arbitrary_bytes_answer_only_as_json_does(data: bytes) -> None:
    _answers_only_for_json(data)


@given(
    values,
    st.integers(0, 3),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(0, 10_000),
)
def test_mutated_json_answers_only_as_json_does(
    value: Any, style: int, flips: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(_dumps(value, style))
    for at, byte in flips:
        if data:
            data[at % len(data)] = byte
    _answers_only_for_json(bytes(data))
    # Cut short anywhere: an unterminated string, number, escape or container.
    _answers_only_for_json(bytes(data[: cut % (len(data) + 1)]))


# -- whole replays ---------------------------------------------------------------------------

raw_args = values.flatmap(
    lambda v: st.integers(0, 3).map(lambda s: _dumps(v, s))
) | st.sampled_from(
    [
        b'{"a": 1, "a": 2}',
        b'["\\ud800"]',
        b"[NaN]",
        b"[1e400]",
        b'["\xed\xa0\x80"]',
        b'["\xff"]',
        b'{"command": "ls", "title": "t"}',
        b'{"action": "poll"}',
        b"[" * 20 + b"]" * 20,
        b"[9223372036854775808]",
    ]
)


def _line(tool: str, args: bytes, number: int) -> bytes:
    return (
        b'{"tool": '
        + json.dumps(tool).encode()
        + b', "args": '
        + args.strip()
        + b', "result": "ok", "tool_call_id": "c'
        + str(number).encode()
        + b'", "session": "s", "run_id": "r"}\n'
    )


@settings(max_examples=120)
@given(
    calls=st.lists(
        st.tuples(st.sampled_from([*TOOLS, "process", "message", "update_plan"]), raw_args),
        min_size=1,
        max_size=8,
    )
)
def test_replays_of_raw_args_equal_the_reference(
    calls: list[tuple[str, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = [_line(tool, args, i) for i, (tool, args) in enumerate(calls)]
    for line in lines:
        try:
            json.loads(line)
        except ValueError:
            assume(False)  # both paths report it; the report words are tested elsewhere
    fast = replay(lines, "cython", False, monkeypatch)
    assert fast == replay(lines, "python", True, monkeypatch)
    assert fast == replay(lines, "cython", True, monkeypatch)

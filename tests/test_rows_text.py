"""Does reading an event line from its JSON text make the rows decoding it makes?

The compiled reading loop reads a common line from its text (``batch/_rows_text.pxi``)
before decoding it: the fields found in C, only the tool name, session and run id
made into str, the args and a plain str result hashed from their text. Generated
lines, written in every way JSON allows (key order, white space, escapes, long
strings, odd numbers) and in ways it does not, are read three ways and compared
table to table and report to report: the reference ``json`` path, the msgspec path
alone (``BY_TEXT`` off) and the text path first.
"""

from __future__ import annotations

import io
import json
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopcore.batch import CallTableBuilder
from loopcore.formats import _fast
from loopcore.formats._load import read_lines

from .conftest import TWINS, use_twin
from .test_rows_twins import _table as twins_table

pytestmark = [
    pytest.mark.skipif(not _fast.AVAILABLE, reason="msgspec is not installed"),
    pytest.mark.skipif("cython" not in TWINS, reason="the compiled twin is not built"),
]

WRAPPED = (
    '<<<EXTERNAL_UNTRUSTED_CONTENT id="0123456789abcdef">>>page'
    '<<<END_EXTERNAL_UNTRUSTED_CONTENT id="0123456789abcdef">>>'
)
_TEXT = st.sampled_from(
    [
        "ok",
        "  padded  ",
        "",
        "same output",
        'tab\tnew\nline "quoted" back\\slash /',
        "caf\u00e9 \u2603 \U0001f600",
        "\x00\x1f\x7f",
        "\ud800",
        "<<<",
        "a<<b<c<<<",
        WRAPPED,
        "x" * 2030,
        "\u00e9" * 1100,
    ]
) | st.text(max_size=8)
_NUMBERS = st.sampled_from(
    ["0", "-0", "12", "-7", "1.5", "0.25", "1e3", "1E400", "-1e-400", "123456789012345678",
     "1234567890123456789012", "00", "01", "1.", ".5", "-", "+1", "NaN", "Infinity", "1.0"]
)  # fmt: skip
_RAW_NUMBERS = _NUMBERS.map(lambda n: ("!raw", n))
_SCALARS = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | _TEXT
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
_OUTPUT = _TEXT | st.sampled_from(
    [
        *("  out  ", "\x1cout\x1f", "\u00a0out", "out\u2003", "\t\n", " ", "x\u00e9", "\u00e9x"),
        # What shape() reduces (SPEC §8.4), and the bare exit footers of the codes below.
        *("error at 2024-01-02T03:04:05.678Z (attempt 3, took 12ms, pid 4242)", "retry #2 in 5 s"),
        *("at 10:20:30 PID=77 ppid 1 1.5 seconds", "12:00:00" * 40, "fail\u00e9 attempt 2"),
        *("(Command exited with code 1)", "(Command exited with code -1)", " (Command exited"),
        *("(Command exited with code 2)\n", "(Command exited with code 1.0)", "x" * 600 + " 3ms"),
    ]
)
#: Exec results of the shapes the exec rule reads, the common one among them.
_EXEC_RESULT = st.fixed_dictionaries(
    {
        "details": st.fixed_dictionaries(
            {
                "status": st.sampled_from(["completed"] * 3 + ["failed", "running", "blocked"]),
                "exitCode": st.sampled_from(
                    [0] * 6
                    + [1] * 3
                    + [2, -1, None, 0.0, 1.0, False, "0"]
                    + [-(2**40), 10**14, 10**15, 2**63, -(2**63), 10**30]
                ),
                "aggregated": _OUTPUT,
            },
            optional={
                "timedOut": st.sampled_from([True, False, None, 1]),
                "durationMs": st.integers(0, 9000),
                "pid": st.integers(0, 2**70),
                "deniedReason": st.just("tool-loop"),
                "tail": _TEXT,
            },
        )
    },
    optional={
        "content": st.lists(
            st.fixed_dictionaries({"type": st.just("text"), "text": _OUTPUT}), max_size=2
        )
        | _VALUES,
        "status": st.just("completed"),
    },
)
_RESULT = (
    _TEXT
    | _EXEC_RESULT
    | st.fixed_dictionaries(
        {},
        optional={
            "content": st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT})),
            "details": st.fixed_dictionaries(
                {},
                optional={
                    "status": st.sampled_from(["completed", "running", "blocked"]),
                    "exitCode": st.sampled_from([0, 1, None]),
                    "aggregated": _TEXT,
                    "deniedReason": st.just("tool-loop"),
                },
            ),
        },
    )
    | _VALUES
)
_TOOLS = st.sampled_from(
    [
        *("read", "edit", "exec", "process", "write", "wait", "message", "update_plan"),
        *("command_status", "caf\u00e9", "wai", "processes"),
    ]
)
#: Fields as Python values (written by ``json``), or "!raw" JSON text written as it is.
_FIELDS = st.fixed_dictionaries(
    {"tool": _TOOLS | _SCALARS, "args": _VALUES},
    optional={
        "result": _RESULT,
        "error": st.sampled_from([None, "Unknown tool: browse"]) | _VALUES,
        "session": st.sampled_from(["s1", "s2", "", 1, None]) | _SCALARS,
        "run_id": st.sampled_from(["r1", "r2", " r1 ", None]) | _SCALARS,
        "tool_call_id": st.sampled_from(["c1", None, 5, "\ud800"]),
        "ts": st.sampled_from([None, 1, 1.5, "2024-01-01", True]) | _RAW_NUMBERS,
        "type": st.sampled_from(["call", "call", "compaction", None, 1]),
        "extra": _SCALARS,
    },
)
#: The fields of the common line (the text path reads it, or gives up on a part of it).
_COMMON = st.fixed_dictionaries(
    {"tool": _TOOLS, "args": _VALUES},
    optional={
        "result": _RESULT,
        "error": st.none(),
        "session": st.sampled_from(["s1", "s2", "", None, "caf\u00e9", "\ud800"]),
        "run_id": st.sampled_from(["r1", "r2", " r1 ", None]),
        "tool_call_id": st.sampled_from(["c1", None]) | _TEXT,
        "ts": st.sampled_from([None, 1, 1.5, "2024-01-01"]) | _RAW_NUMBERS,
        "type": st.just("call"),
    },
)
_GAPS = st.sampled_from(["", " ", "  ", "\t", "\r\n ", "\n"])


# Flaws made by replacing text: (what, with what, how many times; -1 every one).
_FLAWS: dict[int, tuple[bytes, bytes, int]] = {
    1: (b'"tool"', b'"to\\u006fl"', 1),
    2: (b'"args"', b'"args": 1, "args"', 1),
    4: (b"}", b",}", 1),
    5: (b'"r1"', b'"r\xff1"', -1),
    6: (b'"s1"', b'"s\x011"', -1),
    7: (b'"read"', b'"re\xc3"', -1),
    8: (b'"status"', b'"status": "failed", "status"', 1),
    9: (b'"status"', b'"st\\u0061tus"', 1),
    10: (b'"exitCode": 0', b'"exitCode": 0 ', 1),
    11: (b'"exitCode": 0', b'"exitCode": -0', 1),
    12: (b'"exitCode": 1', b'"exitCode": 1e0', 1),
    13: (b'"exitCode": 1', b'"exitCode": 1.50', 1),
    # An exec result's members, found while its line is checked (lc_event_result): a
    # repeated or escaped member, an empty details.
    14: (b'"details"', b'"details": {"status": "failed"}, "details"', 1),
    15: (b'"details"', b'"d\\u0065tails"', 1),
    16: (b'"aggregated"', b'"aggregated": "x", "aggregated"', 1),
    17: (b'"content"', b'"content": 1, "content"', 1),
    18: (b'"details": {', b'"details": {}, "x": {', 1),
    19: (b'"aggregated"', b'"aggr\\u0065gated"', 1),
}


@st.composite
def _line(draw: st.DrawFn) -> bytes:
    """One event line, its fields in a drawn order, with drawn gaps and escapes."""
    fields = draw(_COMMON if draw(st.integers(0, 3)) else _FIELDS)
    pair = draw(st.integers(0, 5))
    if pair < 2:  # the pairs the text path hashes, most of the time
        fields["tool"] = "exec"
        fields["result"] = draw(_EXEC_RESULT)
    elif pair < 4:
        fields["tool"] = draw(st.sampled_from(["read", "edit", "caf\u00e9"]))
        fields["result"] = draw(_TEXT)
    names = draw(st.permutations(list(fields)))
    ascii_only = draw(st.booleans())
    gap = draw(_GAPS)

    def text(value: Any) -> str:
        if isinstance(value, tuple) and value[:1] == ("!raw",):
            return str(value[1])
        return json.dumps(value, ensure_ascii=ascii_only, allow_nan=True)

    items = [f"{json.dumps(name)}{gap}:{draw(_GAPS)}{text(fields[name])}" for name in names]
    body = "{" + draw(_GAPS) + f"{gap},{gap}".join(items) + draw(_GAPS) + "}" + draw(_GAPS)
    line = body.encode("utf-8", "surrogatepass")
    flaw = draw(st.integers(0, 30))
    if flaw == 0:
        line = b"\xef\xbb\xbf" + line
    elif flaw == 3:
        line = line + b" x"
    elif flaw in _FLAWS:
        line = line.replace(*_FLAWS[flaw])
    return line


def _table(traces: Any, err: str) -> tuple[Any, ...]:
    return (*twins_table(traces), err)


def _read(lines: list[bytes], way: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    with monkeypatch.context() as patched:
        if way == "reference":
            patched.setenv(_fast.REFERENCE_ENV, "1")
        else:
            patched.delenv(_fast.REFERENCE_ENV, raising=False)
        patched.setattr(_fast, "BY_TEXT", way == "text")
        err = io.StringIO()
        with use_twin("cython"):
            traces = read_lines(lines, "trace.jsonl", err=err)
        return _table(traces, err.getvalue())


@settings(max_examples=300, deadline=None)
@given(st.lists(_line(), min_size=1, max_size=12), st.lists(st.integers(0, 40), max_size=8))
def test_lines_read_from_their_text_make_the_decoded_rows(
    monkeypatch: pytest.MonkeyPatch, lines: list[bytes], repeats: list[int]
) -> None:
    lines = lines + [lines[i % len(lines)] for i in repeats]  # repeats: the scan reads each row
    reference = _read(lines, "reference", monkeypatch)
    assert _read(lines, "msgspec", monkeypatch) == reference
    assert _read(lines, "text", monkeypatch) == reference


def _rows_read(lines: list[bytes]) -> tuple[int, list[int], int]:
    """How many lines the text path made rows of, the lines it left to the reference, and
    how many results it hashed from their text."""
    with use_twin("cython"):
        builder = CallTableBuilder()
    slow: list[int] = []
    _fast.read_fast(
        iter(enumerate(lines, 1)), lambda: None, builder, array("q"), lambda n, _: slow.append(n)
    )
    rows: Any = builder._rows
    return rows.lines_read, slow, rows.results_read


def test_common_lines_are_read_from_their_text() -> None:
    common = [
        {"tool": "read", "args": {"path": "a.py"}, "result": "text", "session": "s", "run_id": "r"},
        {"tool": "exec", "args": {"command": "ls"}, "result": {"content": [], "details": {}}},
        {"tool": "process", "args": {"action": "poll"}, "result": {"details": {"status": "x"}}},
        {"tool": "edit", "args": {}, "result": WRAPPED, "ts": 1.5, "tool_call_id": None},
        {"type": "call", "tool": "read", "args": [], "error": None, "ts": "2024"},
    ]
    lines = [json.dumps(e).encode() for e in common]
    assert _rows_read(lines) == (len(lines), [], 1)  # the read's result (edit's is wrapped)
    done = {"status": "completed", "exitCode": 0, "aggregated": " out\n", "pid": 7}
    execs = [
        {"tool": "exec", "args": {}, "result": {"content": [], "details": done}},
        {"tool": "exec", "args": {}, "result": {"details": {**done, "timedOut": True}}},
        {"tool": "exec", "args": {}, "result": {"details": {**done, "status": "failed"}}},
        {"tool": "exec", "args": {}, "result": {"details": {**done, "exitCode": 1}}},
        {"tool": "exec", "args": {}, "result": {"details": {**done, "aggregated": " "}}},
        {"tool": "exec", "args": {}, "result": {"details": {**done, "exitCode": 1.0}}},
    ]
    # The failed one's too (a terminal failure, shaped in C); not a blank one, nor 1.0.
    assert _rows_read([json.dumps(e).encode() for e in execs]) == (6, [], 4)


@pytest.mark.parametrize(
    "line",
    [
        b'{"tool": "read", "args": {}, "error": "boom"}',
        b'{"type": "compaction"}',
        b'{"tool": "read", "args": {}, "session": 1}',
        b'{"tool": "read", "args": {}, "ts": 1e400}',
        b'{"tool": "read", "args": {}, "extra": 1}',
        b'{"tool": "read", "args": {}, "tool": "read"}',
        b'{"tool": "read", "args": {"x": NaN}}',
        b'{"tool": "read", "args": {}, "result": "\\ud800"}',
        b'{"tool": "read", "args": {"x": 1e5}}',
        b'{"tool": "read", "args": {"x": [1, 2,]}}',
        b'{"tool": "exec", "args": {}, "result": {"details": {"pid": "\xff"}}}',
        b'{"tool": "exec", "args": {}, "result": {"content": [{"text": "\x01"}]}}',
    ],
)
def test_lines_it_is_not_sure_of_are_decoded(line: bytes) -> None:
    # Read the msgspec way (whose rows the test above holds equal), or the reference way.
    assert _rows_read([line])[0] == 0


def _host_rows(lines: list[bytes], by_text: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patched:
        patched.setattr(_fast, "BY_TEXT", by_text)
        with use_twin("cython"):
            builder = CallTableBuilder(
                normalizers={"edit": lambda args, result: len(str(result)), "exec": repr},
                send_tools=["read"],
            )
            _fast.read_fast(
                iter(enumerate(lines, 1)), lambda: None, builder, array("q"), lambda *_: None
            )
        table = builder.build()
    return table.hashes.tobytes(), table.flags.tobytes(), sorted(table.names.items())


@settings(max_examples=60, deadline=None)
@given(st.lists(_line(), min_size=1, max_size=12))
def test_a_hosts_send_tools_and_normalisers_are_honoured(
    monkeypatch: pytest.MonkeyPatch, lines: list[bytes]
) -> None:
    # Their results are never hashed from the text: the rules the host asked for run.
    assert _host_rows(lines, True, monkeypatch) == _host_rows(lines, False, monkeypatch)

"""Do the compiled and reference row builders make the same rows, line for line?

``batch._rows_c`` (the compiled rows and msgspec reading loop) is compared with
``batch._rows_py`` on the pure-Python outcome twin, and both with the reference
reading path (``json`` and ``add_event``): generated trace lines with the result
shapes of real traces (exec, process polls, writes, errors, unknown tools) and
hostile ones, and direct ``CallTableBuilder.add`` calls with values no JSON line
holds (tuples, ``str`` subclasses, mappings that are not dicts, objects that
raise).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopcore.batch import CallTableBuilder, _rows_py
from loopcore.formats import _fast
from loopcore.formats._load import read_lines

from .conftest import EXTENSIONS_EXPECTED, TWINS, use_twin

PYTHON, COMPILED = "python", "cython"

needs_compiled = pytest.mark.skipif(
    "cython" not in TWINS, reason="the compiled twin is not built in this install"
)
needs_msgspec = pytest.mark.skipif(not _fast.AVAILABLE, reason="msgspec is not installed")


def _table(traces: Any) -> tuple[Any, ...]:
    table = traces.table
    return (
        table.hashes.tobytes(),
        table.flags.tobytes(),
        table.scope.tobytes(),
        [(repr(s), r) for s, r in table.scopes],
        sorted(table.names.items()),
        traces.lines.tobytes(),
        traces.files,
    )


def _read(
    lines: list[bytes], twin: str, reference: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, ...]:
    if reference:
        monkeypatch.setenv(_fast.REFERENCE_ENV, "1")
    else:
        monkeypatch.delenv(_fast.REFERENCE_ENV, raising=False)
    err = io.StringIO()
    with use_twin(twin):
        traces = read_lines(lines, "trace.jsonl", err=err)
    return (*_table(traces), err.getvalue())


# -- which twin ----------------------------------------------------------------------------


def test_the_builder_takes_the_rows_of_the_outcome_twin() -> None:
    with use_twin(PYTHON):
        assert type(CallTableBuilder()._rows) is _rows_py.Rows
    if "cython" in TWINS:
        with use_twin(COMPILED):
            rows = CallTableBuilder()._rows
        assert type(rows).__module__ == "loopcore.batch._rows_c"


@pytest.mark.skipif(not EXTENSIONS_EXPECTED, reason="LOOPCORE_EXPECT_EXTENSIONS is not set")
def test_the_compiled_rows_load_when_extensions_are_expected() -> None:
    from loopcore.batch import _rows_c  # type: ignore[attr-defined]

    assert _rows_c.IMPLEMENTATION == "cython"
    assert type(CallTableBuilder()._rows) is _rows_c.Rows


# -- generated lines -----------------------------------------------------------------------

_TEXT = st.sampled_from(
    [
        "ok",
        "  padded  ",
        "",
        "same output",
        "Unknown tool: browse",
        "error: pid 4242 at 2024-01-02T03:04:05Z after 3 attempts, 12ms",
        "(Command exited with code 1)",
        "<<<EXTERNAL_UNTRUSTED_CONTENT id=abc>>>x<<<END_EXTERNAL_UNTRUSTED_CONTENT id=abc>>>",
        "\ud800",
    ]
) | st.text(max_size=10)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | _TEXT
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_CONTENT = (
    st.lists(
        st.fixed_dictionaries({"type": st.sampled_from(["text", "image"]), "text": _TEXT})
        | _VALUES,
        max_size=3,
    )
    | _VALUES
)
_DETAILS = (
    st.fixed_dictionaries(
        {},
        optional={
            "status": st.sampled_from(
                ["completed", "failed", "running", "approval-pending", "blocked", "other"]
            )
            | _SCALARS,
            "exitCode": st.sampled_from([0, 1, 2, -1, 1.5]) | _SCALARS,
            "aggregated": _TEXT | _SCALARS,
            "timedOut": st.booleans() | _SCALARS,
            "tail": _TEXT,
            "changed": st.booleans(),
            "durationMs": st.integers(0, 10_000),
            "pid": st.integers(0, 70_000),
        },
    )
    | _VALUES
)
_RESULT = (
    st.fixed_dictionaries({}, optional={"content": _CONTENT, "details": _DETAILS, "status": _TEXT})
    | _VALUES
)
_ARGS = (
    st.fixed_dictionaries(
        {},
        optional={
            "command": _TEXT,
            "title": _TEXT,
            "action": st.sampled_from(["poll", "log", "kill"]) | _SCALARS,
            "sessionId": _TEXT,
            "path": _TEXT,
        },
    )
    | _VALUES
)
_TOOLS = st.sampled_from(
    ["read", "exec", "process", "write", "update_plan", "wait", "command_status", "browse"]
)
_EVENT = st.fixed_dictionaries(
    {"tool": _TOOLS | _SCALARS, "args": _ARGS},
    optional={
        "result": _RESULT,
        "error": st.sampled_from(["Unknown tool: browse", "boom", None]) | _VALUES,
        "session": st.sampled_from(["s1", "s2", 1, None]) | _SCALARS,
        "run_id": st.sampled_from(["r1", "r2", " r1 ", "", None]) | _SCALARS,
        "tool_call_id": st.sampled_from(["c1", None, 5]),
        "ts": _SCALARS,
        "type": st.sampled_from(["call", "call", "compaction", "other"]),
        "extra": _SCALARS,
    },
)
_RAW = st.sampled_from(
    [b"", b"   ", b"{bad", b'"text"', b"[1]", b'\xef\xbb\xbf{"tool": "read", "args": {}}', b"\xff"]
)


def _encoded(event: dict[str, Any]) -> bytes:
    return json.dumps(event, allow_nan=True).encode("utf-8", "surrogatepass")


def _lines(events: list[dict[str, Any]], raw: list[bytes], repeats: list[int]) -> list[bytes]:
    lines = [_encoded(e) for e in events]
    lines += [lines[i % len(lines)] for i in repeats]  # repeats: the scan depends on every row
    for n, line in enumerate(raw):
        lines.insert((n * 7) % (len(lines) + 1), line)
    return lines


@needs_msgspec
@needs_compiled
@settings(max_examples=150, deadline=None)
@given(
    st.lists(_EVENT, min_size=1, max_size=20),
    st.lists(_RAW, max_size=3),
    st.lists(st.integers(0, 50), max_size=8),
)
def test_compiled_rows_equal_the_reference(
    monkeypatch: pytest.MonkeyPatch,
    events: list[dict[str, Any]],
    raw: list[bytes],
    repeats: list[int],
) -> None:
    lines = _lines(events, raw, repeats)
    reference = _read(lines, PYTHON, True, monkeypatch)
    assert _read(lines, COMPILED, False, monkeypatch) == reference
    assert _read(lines, PYTHON, False, monkeypatch) == reference
    assert _read(lines, COMPILED, True, monkeypatch) == reference


class _PlainEvent:
    """An event whose fields are instance attributes, not member slots."""

    def __init__(self, event: Any) -> None:
        for name in ("type", "tool", "args", "result", "error", "tool_call_id", "session",
                     "run_id", "ts"):  # fmt: skip
            setattr(self, name, getattr(event, name))


@needs_msgspec
@needs_compiled
@settings(max_examples=40, deadline=None)
@given(st.lists(_EVENT, min_size=1, max_size=12), st.lists(_RAW, max_size=2))
def test_an_event_type_without_slots_is_read_by_name_to_the_same_rows(
    monkeypatch: pytest.MonkeyPatch, events: list[dict[str, Any]], raw: list[bytes]
) -> None:
    # The compiled loop reads an event's fields at their member slots; for a type it
    # cannot (here a plain class), it runs the reference loop, to the same rows.
    lines = _lines(events, raw, [])
    reference = _read(lines, PYTHON, True, monkeypatch)
    decode = _fast._DECODE
    with monkeypatch.context() as patched:
        patched.setattr(_fast, "_Event", _PlainEvent)
        patched.setattr(_fast, "_DECODE", lambda line: _PlainEvent(decode(line)))
        patched.setattr(_fast, "_RAW", None)
        assert _read(lines, COMPILED, False, monkeypatch) == reference


@needs_msgspec
@needs_compiled
@pytest.mark.parametrize("raw_args", [True, False], ids=["raw-args", "decoded-args"])
def test_the_compiled_loop_reads_the_event_types_at_their_slots(
    monkeypatch: pytest.MonkeyPatch, raw_args: bool
) -> None:
    # Both event types (``_RawEvent`` retypes ``_Event``'s args) have their fields
    # at member slots: the by-name loop, a slower fallback, is never taken for them.
    from loopcore.batch import _rows_c  # type: ignore[attr-defined]

    def by_name(*args: Any) -> int:
        raise AssertionError("the compiled loop fell back to reading fields by name")

    lines = [_encoded({"tool": "read", "args": {"path": f"/{n}"}, "result": "x"}) for n in range(3)]
    reference = _read(lines, PYTHON, True, monkeypatch)
    with monkeypatch.context() as patched:
        patched.setattr(_rows_c, "_read_events", by_name)
        if not raw_args:
            patched.setattr(_fast, "_RAW", None)
        assert _read(lines, COMPILED, False, monkeypatch) == reference


@needs_msgspec
def test_the_python_rows_read_like_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    events = [
        {
            "tool": "exec",
            "args": {"command": "make"},
            "result": {"details": {"status": "failed", "exitCode": 2, "aggregated": "boom"}},
            "session": "s",
            "run_id": "r",
        },
        {"type": "compaction", "session": "s", "run_id": "r"},
        {"tool": "read", "args": {"path": "a"}, "result": "x", "session": "s", "run_id": "r"},
        {"tool": "browse", "args": {}, "error": "Unknown tool: browse", "session": 1},
    ]
    lines = _lines(events, [b"{bad"], [0, 2, 2])
    assert _read(lines, PYTHON, False, monkeypatch) == _read(lines, PYTHON, True, monkeypatch)


# -- direct calls with Python values -------------------------------------------------------


class _Name(str):
    """A str subclass whose == runs code of its own."""

    def __eq__(self, other: object) -> bool:
        return str.__eq__(self, other)

    __hash__ = str.__hash__


class _Args(Mapping[str, Any]):
    def __init__(self, **values: Any) -> None:
        self.values = values

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


class _Raises:
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing")

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return "_Raises()"


class _Key:
    """A mapping key that collides with every str and raises when compared."""

    def __hash__(self) -> int:
        return hash("action")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparing")

    def __repr__(self) -> str:
        return "_Key()"


_CALLS: list[tuple[Any, Any, dict[str, Any]]] = [
    ("read", {"path": "a"}, {"result": "x"}),
    ("read", ("a", 1), {"result": ("tuple", b"bytes")}),
    (_Name("exec"), {"command": "make"}, {"result": {"details": {"status": "completed"}}}),
    ("process", _Args(action="poll"), {"result": {"content": "running"}}),
    ("process", {"action": _Raises()}, {"result": "x"}),
    ("process", {_Key(): 1}, {"result": "x"}),
    ("process", {"action": "log"}, {"result": {"details": {"status": "running"}}}),
    ("wait", {}, {"result": {"status": "done"}}),
    ("command_status", [], {"error": "Unknown tool: nope"}),
    ("write", {"path": "a"}, {"result": {"details": {"changed": False}}}),
    (
        "exec",
        {"command": "make", "title": "t"},
        {
            "result": {
                "details": {
                    "status": "failed",
                    "exitCode": 1,
                    "aggregated": "pid 12 failed at 10:00:01",
                }
            }
        },
    ),
    (_Name("browse"), {}, {"error": {"message": "Unknown tool: browse"}}),
    ("read", {"path": "a"}, {"result": {"content": [{"type": "text", "text": "hi"}]}}),
    ("read", {"x": _Raises()}, {"result": _Raises()}),
]


def _direct(twin: str, **options: Any) -> tuple[Any, ...]:
    with use_twin(twin):
        builder = CallTableBuilder(**options)
        for n, (tool, args, outcome) in enumerate(_CALLS):
            builder.add(tool, args, session=("s", n % 2), run_id="r" if n % 3 else None, **outcome)
            if n == 4:
                builder.add_compaction(session=("s", 1), run_id="r")
    table = builder.build()
    return (
        table.hashes.tobytes(),
        table.flags.tobytes(),
        table.scope.tobytes(),
        table.scopes,
        sorted(table.names.items()),
    )


@needs_compiled
@pytest.mark.parametrize(
    "options",
    [{}, {"send_tools": ["read"]}, {"normalizers": {"exec": lambda args, result: "same"}}],
    ids=["plain", "send_tools", "normalizers"],
)
def test_direct_calls_make_the_same_rows(options: dict[str, Any]) -> None:
    assert _direct(COMPILED, **options) == _direct(PYTHON, **options)


@needs_compiled
def test_a_failing_call_adds_no_row_in_either_twin() -> None:
    for twin in (PYTHON, COMPILED):
        with use_twin(twin):
            builder = CallTableBuilder()
            with pytest.raises(TypeError, match="run_id"):
                builder.add_checked("read", {}, "x", None, "s", 3)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="session"):
                builder.add_checked("read", {}, "x", None, [1], None)
            assert len(builder) == 0
            builder.add_checked("read", {}, "x", None, "s", None)
            builder.add_checked("read", {}, "x", None, "s", None)
            assert builder.build().scope.tolist() == [0, 0]

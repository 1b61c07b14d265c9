"""The msgspec reading path of loopcore JSONL: the replay of the reference ``json`` path, exactly.

Every output format of ``loopcore replay`` (and stderr, and the exit status) is
compared between the fast path and the reference one (``LOOPCORE_REPLAY_REFERENCE=1``),
on the test traces, on lines that msgspec and ``json`` read differently, and on
hypothesis-generated lines (compared table to table).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopcore.formats import _fast, load
from loopcore.formats.loopcore import EventReader
from tests.conftest import Replay
from tests.test_replay_jobs import events, write

FORMATS = ("table", "json", "csv")
DATA = Path(__file__).resolve().parent / "data"

pytestmark = pytest.mark.skipif(not _fast.AVAILABLE, reason="msgspec is not installed")

#: Lines the two decoders could disagree on, each with what the reference makes of it.
EDGES = [
    '\ufeff{"tool": "read", "args": {}, "result": "bom"}',
    '{"tool": "read", "args": {"x": NaN}, "result": Infinity}',
    '{"tool": "read", "args": {"x": 1e400}, "result": -1e400}',
    '{"tool": "read", "args": {"x": "\\ud800"}, "result": "lone surrogate"}',
    '{"tool": "read", "args": {"x": 123456789012345678901234567890}, "result": 1}',
    '{"tool": "read", "args": {"x": ' + "9" * 4301 + "}}",
    '{"tool": "read", "args": {"k": 1, "k": 2}, "tool": "write", "result": {"a": 1, "a": [2]}}',
    '{"tool": "read", "args": {}, "color": "unknown field"}',
    '{"tool": "read"}',
    '{"args": {}}',
    '{"tool": 7, "args": {}}',
    '{"tool": "read", "args": {}, "ts": true}',
    '{"tool": "read", "args": {}, "ts": [1]}',
    '{"tool": "read", "args": {}, "ts": 1.5}',
    '{"tool": "read", "args": {}, "tool_call_id": 3}',
    '{"tool": "read", "args": {}, "run_id": 3}',
    '{"tool": "read", "args": {}, "run_id": "  padded  "}',
    '{"tool": "read", "args": {}, "run_id": ""}',
    '{"tool": "read", "args": {}, "session": [1]}',
    '{"tool": "read", "args": {}, "session": 1.0}',
    '{"tool": "read", "args": {}, "session": true}',
    '{"tool": "read", "args": {}, "type": "call", "result": null}',
    '{"tool": "read", "args": {}, "type": "other"}',
    '{"tool": "read", "args": {}, "type": null}',
    '{"type": "compaction", "run_id": "r1"}',
    '{"tool": "exec", "args": {"command": "x", "title": "t"}, "error": {"code": 1}}',
    '{"tool": "read", "args": {}, "error": null, "result": "x"}',
    '{"tool": "read", "args": {}, "error": 12}',
    '{"tool": "read", "args": ' + "[" * 3000 + "]" * 3000 + "}",
    '"a string"',
    "[1, 2]",
    "   ",
    "",
    "{bad json",
    '{"tool": "read", "args": {"a": "\\u0000\\t"}, "result": "\x7f"}',
]


@pytest.fixture
def reference(monkeypatch: pytest.MonkeyPatch) -> Any:
    def use(on: bool) -> None:
        if on:
            monkeypatch.setenv(_fast.REFERENCE_ENV, "1")
        else:
            monkeypatch.delenv(_fast.REFERENCE_ENV, raising=False)

    return use


def _both(replay: Replay, reference: Any, *args: object) -> tuple[int, str, str]:
    reference(True)
    slow = replay(*args)
    reference(False)
    fast = replay(*args)
    assert fast == slow
    return fast


def _edges(tmp_path: Path) -> Path:
    path = tmp_path / "edges.jsonl"
    lines = [json.dumps({"tool": "read", "args": {}, "result": "first"}), *EDGES]
    # Each edge line also between ordinary ones, and once more after a repeat, so its row
    # (or its absence) shifts the scan's counts.
    body = "\n".join(lines + lines[1:] + [lines[0]] * 5) + "\n"
    path.write_bytes(body.encode("utf-8", "surrogatepass") + b'{"tool": "\xff"}\n')
    return path


def test_the_reference_can_be_forced(reference: Any) -> None:
    reference(False)
    assert _fast.use_fast()
    reference(True)
    assert not _fast.use_fast()


def test_ordinary_lines_take_the_fast_path(
    tmp_path: Path, reference: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference(False)
    slow: list[int] = []
    original = EventReader.line

    def counted(self: EventReader, number: int, line: bytes) -> None:
        slow.append(number)
        original(self, number, line)

    monkeypatch.setattr(EventReader, "line", counted)
    clean = [e for e in events(1, 500) if not isinstance(e, str) and "type" not in e]
    trace = write(tmp_path / "clean.jsonl", clean)
    traces = load([str(trace)], err=io.StringIO(), progress=False)
    assert len(traces.table) == len(clean)
    assert slow == []
    load([str(_edges(tmp_path))], err=io.StringIO(), progress=False)
    assert len(slow) > len(EDGES)  # the odd lines went the reference way


@pytest.mark.parametrize("output", FORMATS)
def test_every_format_on_the_test_traces(
    tmp_path: Path, replay: Replay, reference: Any, output: str
) -> None:
    files = [
        *sorted(DATA.iterdir()),
        write(tmp_path / "a.jsonl", events(2, 1500)),
        write(tmp_path / "b.jsonl", events(3, 700, scopes=30)),
        _edges(tmp_path),
    ]
    code, _out, err = _both(replay, reference, *files, "--enable", "--format", output)
    assert code == 1
    assert "edges.jsonl" in err  # the edge lines were reported, the same way
    for file in files:
        _both(replay, reference, file, "--enable", "--format", output)
    _both(replay, reference, files[-1], "--enable", "--strict")


def test_sweep(tmp_path: Path, replay: Replay, reference: Any) -> None:
    trace = write(tmp_path / "a.jsonl", events(4, 800))
    _both(
        replay, reference, trace, "--enable", "--sweep", "warningThreshold=3:8", "--format", "csv"
    )


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["Unknown tool: web", "\ud800", "same", "poll"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_TOOLS = st.sampled_from(["read", "exec", "process", "write", "update_plan", "wait", "browse"])
_EVENT = st.fixed_dictionaries(
    {"tool": _TOOLS | _SCALARS, "args": _VALUES},
    optional={
        "result": _VALUES,
        "error": _VALUES,
        "session": st.sampled_from(["s1", "s2", 1, None, 2.5]) | _SCALARS,
        "run_id": st.sampled_from(["r1", "r2", " r1 ", "", None]) | _SCALARS,
        "tool_call_id": st.sampled_from(["c1", None, 5]),
        "ts": _SCALARS,
        "type": st.sampled_from(["call", "compaction", "other"]),
        "extra": _SCALARS,
    },
)


def _encoded(event: dict[str, Any]) -> bytes:
    text = json.dumps(event, allow_nan=True)
    return text.encode("utf-8", "surrogatepass")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_EVENT, min_size=1, max_size=25), st.data())
def test_generated_lines(
    tmp_path: Path, reference: Any, lines: list[dict[str, Any]], data: st.DataObject
) -> None:
    encoded = [_encoded(e) for e in lines]
    # Repeats make the scan's counts depend on every row.
    encoded += data.draw(st.lists(st.sampled_from(encoded), max_size=10))
    path = tmp_path / "generated.jsonl"
    path.write_bytes(b"\n".join(encoded) + b"\n")
    found = []
    for on in (True, False):
        reference(on)
        err = io.StringIO()
        traces = load([str(path)], err=err, progress=False)
        table = traces.table
        found.append(
            (
                table.hashes.tobytes(),
                table.flags.tobytes(),
                table.scope.tobytes(),
                [(repr(s), r) for s, r in table.scopes],
                table.names,
                traces.lines.tobytes(),
                traces.files,
                err.getvalue(),
            )
        )
    assert found[0] == found[1]

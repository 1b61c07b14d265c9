"""``loopcore replay --jobs N``: the input read by worker processes, the output of ``--jobs 1``.

The inputs here are small, so the thresholds that keep a small input in
process (``PARALLEL_MIN_BYTES``, and an input small beside the process's
resident memory) and set the size of a file's pieces (``MIN_PIECE_BYTES``) are
lowered: every file is read by workers, and a large one in many pieces, with
runs, compactions and malformed lines across the cuts.
"""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from loopcore.batch import _kernels, _scan
from loopcore.formats import _parallel
from tests.conftest import Replay

FORMATS = ("table", "json", "csv")


def events(seed: int, calls: int, scopes: int = 12) -> list[Any]:
    """A loopcore trace: runs interleaved, stuck repeats, polls, exec failures, unknown tools,
    compactions and the odd malformed line (a JSON string for each, or a raw text)."""
    rng = random.Random(seed)
    out: list[Any] = []
    for n in range(calls):
        scope = rng.randrange(scopes)
        where = {"session": f"s{scope % 3}", "run_id": f"r{scope}"}
        kind = rng.random()
        if kind < 0.3:
            event = {"tool": "read", "args": {"path": "a.txt"}, "result": "same", **where}
        elif kind < 0.45:
            event = {
                "tool": "process",
                "args": {"action": "poll", "sessionId": "job"},
                "result": {
                    "content": [{"type": "text", "text": "still running"}],
                    "details": {"status": "running"},
                },
                **where,
            }
        elif kind < 0.55:
            event = {
                "tool": "exec",
                "args": {"command": "make"},
                "result": {
                    "content": [{"type": "text", "text": f"error at {n}"}],
                    "details": {"status": "failed", "exitCode": 2, "aggregated": "boom"},
                },
                **where,
            }
        elif kind < 0.62:
            event = {"tool": "browse", "args": {}, "error": "Unknown tool: browse", **where}
        elif kind < 0.66:
            event = {"type": "compaction", **where}
        elif kind < 0.68:
            out.append(rng.choice(['{"tool": ', "not json", '{"tool": 3, "args": {}}', "[1]"]))
            continue
        else:
            event = {"tool": "read", "args": {"path": f"{n}.txt"}, "result": str(n), **where}
        out.append(event)
    return out


def write(path: Path, lines: list[Any], compress: bool = False) -> Path:
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    data = text.encode()
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(_parallel, "resident_bytes", lambda: 0)
    monkeypatch.setattr(_parallel, "MIN_PIECE_BYTES", 2048)
    # The scan's counts in blocks of a few hundred calls, counted by threads too.
    monkeypatch.setattr(_scan, "PARALLEL_SCAN_ROWS", 0)
    monkeypatch.setattr(_kernels, "_BLOCK", 300)


def _same(replay: Replay, jobs: int, *args: object) -> tuple[int, str, str]:
    one = replay(*args, "--jobs", "1")
    many = replay(*args, "--jobs", str(jobs))
    assert many == one
    return one


def test_one_big_file_in_many_pieces(tmp_path: Path, replay: Replay, small_pieces: None) -> None:
    trace = write(tmp_path / "big.jsonl", events(1, 3000))
    tasks = _parallel.plan([str(trace)], [trace.stat().st_size], 3, None, 1 << 20, False)
    assert len(tasks) > 10  # really cut: each piece a range of whole lines
    assert all(not t.first for t in tasks[1:])
    for output in FORMATS:
        code, _out, err = _same(replay, 3, trace, "--enable", "--format", output)
        assert code == 1
        # More than MAX_REPORTS malformed lines over the pieces: the same first reports,
        # with the file's line numbers, and the same count of the rest.
        assert "more malformed lines" in err


def test_several_files_and_formats(tmp_path: Path, replay: Replay, small_pieces: None) -> None:
    data = Path(__file__).resolve().parent / "data"
    files = [
        write(tmp_path / "a.jsonl", events(2, 800)),
        write(tmp_path / "b.jsonl.gz", events(3, 500), compress=True),
        *sorted(data.iterdir()),
        write(tmp_path / "c.jsonl", events(4, 1500, scopes=40)),
    ]
    for output in FORMATS:
        _same(replay, 2, *files, "--enable", "--format", output)
    _same(replay, 2, *files, "--format", "json")  # detection off: the guard alone
    _same(replay, 2, *files, "--enable", "--sweep", "warningThreshold=3:6", "--format", "json")


def test_scopes_that_span_files(tmp_path: Path, replay: Replay, small_pieces: None) -> None:
    # The same runs in two files (and a compaction at the end of the first): one scan.
    first = write(
        tmp_path / "1.jsonl",
        [*events(5, 600, scopes=4), {"type": "compaction", "run_id": "r1", "session": "s1"}],
    )
    second = write(tmp_path / "2.jsonl", events(6, 600, scopes=4))
    for output in FORMATS:
        _same(replay, 2, first, second, "--enable", "--format", output)


def test_strict_and_unreadable_inputs(tmp_path: Path, replay: Replay, small_pieces: None) -> None:
    trace = write(tmp_path / "big.jsonl", events(7, 2000))
    code, _, err = _same(replay, 2, trace, "--enable", "--strict")
    assert code == 2
    assert "--strict" in err
    missing = tmp_path / "missing.jsonl"
    code, _, err = _same(replay, 2, trace, missing, "--enable")
    assert code == 2
    assert "missing.jsonl" in err


def test_a_forced_format_and_a_line_limit(
    tmp_path: Path, replay: Replay, small_pieces: None
) -> None:
    lines: list[Any] = events(8, 1500)
    lines.insert(700, json.dumps({"tool": "read", "args": {"path": "x" * 5000}}))
    trace = write(tmp_path / "t.jsonl", lines)
    args = ("--enable", "--input-format", "loopcore", "--max-line-bytes", "4000")
    _code, _, err = _same(replay, 2, trace, *args, "--format", "json")
    assert "line longer than 4000 bytes" in err


def test_jobs_option_is_checked(replay: Replay, tmp_path: Path) -> None:
    trace = write(tmp_path / "t.jsonl", events(9, 10))
    for bad in ("0", "-1", "two", ""):
        code, _, err = replay(trace, "--jobs", bad)
        assert code == 2
        assert "--jobs: expected a positive integer" in err


def test_small_inputs_stay_in_process(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    write(trace, events(10, 50))
    tasks = _parallel.plan([str(trace)], [trace.stat().st_size], 4, None, 1 << 20, False)
    assert len(tasks) == 1  # below MIN_PIECE_BYTES: one piece, so load reads it in process


def test_workers_only_for_an_input_large_beside_this_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from loopcore.batch import _workers

    resident = _parallel.resident_bytes()
    if _workers.AVAILABLE:  # Linux: read from /proc, at least what the interpreter holds
        assert resident is not None
        assert resident > 1 << 20
    floor = _parallel.PARALLEL_MIN_BYTES
    assert not _parallel.worth_workers(floor - 1)
    monkeypatch.setattr(_parallel, "resident_bytes", lambda: 5 * floor)
    assert _parallel.worth_workers(floor) is True  # a fifth of the resident memory
    monkeypatch.setattr(_parallel, "resident_bytes", lambda: 5 * floor + 5)
    assert _parallel.worth_workers(floor) is False
    assert _parallel.worth_workers(floor + 1) is True
    monkeypatch.setattr(_parallel, "resident_bytes", lambda: None)  # unknown: by size only
    assert _parallel.worth_workers(floor) is True


def test_a_large_process_reads_in_process(
    tmp_path: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from loopcore.batch import _workers
    from loopcore.formats import load

    trace = write(tmp_path / "t.jsonl", events(14, 1500))
    want = load([str(trace)], err=io.StringIO(), progress=False).table
    monkeypatch.setattr(_parallel, "resident_bytes", lambda: 1 << 40)

    def no_workers(*args: object, **kwargs: object) -> Any:
        raise AssertionError("read by workers")

    monkeypatch.setattr(_workers, "read_all", no_workers)
    monkeypatch.setattr(_parallel, "_context", no_workers)
    got = load([str(trace)], err=io.StringIO(), progress=False, jobs=2).table
    assert got.hashes.tobytes() == want.hashes.tobytes()
    assert got.scopes == want.scopes


def test_a_too_long_first_line_does_not_decide_the_format(
    tmp_path: Path, replay: Replay, small_pieces: None
) -> None:
    from tests.test_replay import Pi

    pi = Pi()
    for n in range(400):
        pi.user().call("read", {"path": "a.txt" if n % 2 else f"{n}.txt"}, "same")
    long_event = {"tool": "read", "args": {"path": "x" * 5000}, "result": "ok"}
    trace = write(tmp_path / "pi.jsonl", [long_event, *pi.lines])
    args = (trace, "--enable", "--max-line-bytes", "4000", "--format", "json")
    _, out, err = _same(replay, 2, *args)
    assert json.loads(out)["summary"]["files"][0]["format"] == "pi"
    assert "line longer than 4000 bytes" in err


def test_load_checks_jobs_and_extend_checks_its_part(tmp_path: Path) -> None:
    import io

    from loopcore.batch import CallTableBuilder
    from loopcore.formats import load

    trace = write(tmp_path / "t.jsonl", events(11, 20))
    for bad in (0, -2, True, 1.5):
        with pytest.raises(ValueError, match="jobs: expected a positive integer"):
            load([str(trace)], err=io.StringIO(), jobs=bad)  # type: ignore[arg-type]
    builder = CallTableBuilder()
    builder.add("read", {"path": "a"}, result="x", run_id="r1")
    part = builder.part()
    with pytest.raises(ValueError, match="part: its columns differ"):
        CallTableBuilder().extend(part._replace(flags=b""))
    # A part appended to an empty builder builds the same table as the builder it came from.
    again = CallTableBuilder()
    again.extend(part)
    first, second = builder.build(), again.build()
    assert first.hashes.tobytes() == second.hashes.tobytes()
    assert first.scopes == second.scopes


def test_parts_taken_build_the_table_of_parts_extended() -> None:
    from loopcore.batch import CallTableBuilder
    from loopcore.batch._table import COMPACTION

    def piece(calls: list[tuple[str, str]], compaction: str | None = None) -> Any:
        builder = CallTableBuilder()
        for tool, run in calls:
            builder.add(tool, {"n": len(tool)}, result=tool, run_id=run)
        if compaction is not None:
            builder.add_compaction(run_id=compaction)  # pending: arms the next piece's call
        return builder.part()

    parts = [
        piece([("read", "r1"), ("exec", "r2")], compaction="r2"),
        piece([("exec", "r2"), ("edit", "r3"), ("exec", "r2")]),
        piece([]),
        piece([("read", "r3"), ("read", "r1")], compaction="r4"),
    ]
    extended, taken = CallTableBuilder(), CallTableBuilder()
    for builder in (extended, taken):
        builder.add("wait", {}, result="w", run_id="r0")
    rows = []
    for part in parts:
        extended.extend(part)
        rows.append(taken.take(part))
    assert sum(len(r.scope) for r in rows) == len(extended) - 1
    assert len(taken) == 1  # taking appends nothing
    want, got = extended.build(), taken.build(rows)
    assert got.flags[:, COMPACTION].sum() == 1  # r2's compaction, armed across the cut
    for column in ("scope", "hashes", "flags"):
        assert getattr(got, column).tobytes() == getattr(want, column).tobytes()
        assert getattr(got, column).dtype == getattr(want, column).dtype
    assert (got.scopes, got.names) == (want.scopes, want.names)
    assert extended.part().pending == taken.part().pending


def test_the_scan_counted_by_threads_is_the_scan(
    tmp_path: Path, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import threading

    import numpy as np

    from loopcore import LoopDetectionConfig
    from loopcore.batch import scan
    from loopcore.formats import load

    trace = write(tmp_path / "t.jsonl", events(12, 4000, scopes=30))
    table = load([str(trace)], err=io.StringIO()).table
    config = LoopDetectionConfig(enabled=True)
    assert len(_kernels.block_cuts(_kernels.scope_index(table)[2])) > 4  # really in blocks
    one = _scan.stats(table, 30, 10)
    counted_in: set[int] = set()
    counts = _scan.counts

    def counts_here(*args: Any) -> Any:
        counted_in.add(threading.get_ident())
        return counts(*args)

    monkeypatch.setattr(_scan, "counts", counts_here)
    many = _scan.stats(table, 30, 10, jobs=3)
    assert counted_in
    assert threading.get_ident() not in counted_in  # by the pool's threads
    for column in one._fields:
        assert np.array_equal(getattr(many, column), getattr(one, column)), column
    assert scan(table, config, jobs=2).to_records() == scan(table, config).to_records()
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="jobs: expected a positive integer"):
            scan(table, config, jobs=bad)  # type: ignore[arg-type]


def test_the_process_pool_where_fork_is_not_used(
    tmp_path: Path, replay: Replay, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # macOS and Windows: a pool of N workers reads the pieces (the scan's threads as on Linux).
    from loopcore.batch import _workers

    trace = write(tmp_path / "big.jsonl", events(13, 2000))
    want = replay(trace, "--enable", "--format", "json", "--jobs", "2")
    monkeypatch.setattr(_workers, "AVAILABLE", False)
    assert replay(trace, "--enable", "--format", "json", "--jobs", "2") == want
    assert replay(trace, "--enable", "--format", "json", "--jobs", "1") == want

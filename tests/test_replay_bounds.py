"""``loopcore replay`` on hostile inputs: bounded lines, streams, what a directory walk opens.

Everything that could hang or exhaust memory runs in a subprocess with a
timeout and, where memory is the point, an address-space limit (``RLIMIT_AS``)
a fixed headroom above what a replay of a tiny trace needs on this machine.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loopcore.formats import MAX_LINE_BYTES
from loopcore.formats._reader import PROGRESS_EVERY

MiB = 1 << 20
#: More lines than one progress update apart: a stream is asked for its position at least once.
STREAM_LINES = PROGRESS_EVERY + 3_616

# One thread per BLAS and two malloc arenas: the address space of a replay depends
# on the trace, not on how many cores the machine has.
ENV = {
    **os.environ,
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
}
REPLAY = [sys.executable, "-m", "loopcore", "replay"]
# ``python -m loopcore`` that reports its peak address space on stderr as it exits.
PEAK = (
    "import atexit, runpy, sys\n"
    "def peak():\n"
    "    with open('/proc/self/status') as status:\n"
    "        sys.stderr.write(''.join(l for l in status if l.startswith('VmPeak:')))\n"
    "atexit.register(peak)\n"
    "sys.argv = ['loopcore', *sys.argv[1:]]\n"
    "runpy.run_module('loopcore', run_name='__main__')\n"
)

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc/self/status as on Linux"
)
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")


def _event(i: int = 0, run_id: str = "r1") -> dict[str, Any]:
    return {"tool": "read", "args": {"path": f"{i % 7}.txt"}, "result": "ok", "run_id": run_id}


def _lines(count: int) -> bytes:
    return b"".join(json.dumps(_event(i)).encode() + b"\n" for i in range(count))


def _limited(address_space: int) -> Callable[[], None]:
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    return limit


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> int:
    """The peak address space (bytes) of a replay of a three-line trace, here and now."""
    if not sys.platform.startswith("linux"):
        pytest.skip("RLIMIT_AS and /proc/self/status as on Linux")
    tiny = tmp_path_factory.mktemp("baseline") / "tiny.jsonl"
    tiny.write_bytes(_lines(3))
    done = subprocess.run(
        [sys.executable, "-c", PEAK, "replay", "--enable", "--format", "json", str(tiny)],
        capture_output=True,
        env=ENV,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (peak,) = [line for line in done.stderr.decode().splitlines() if line.startswith("VmPeak:")]
    return int(peak.split()[1]) * 1024


def _run(
    *args: object, memory: int | None = None, timeout: float = 120, stdin: bytes | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*REPLAY, *map(str, args)],
        input=None if stdin is None else stdin.decode("latin-1"),
        capture_output=True,
        text=True,
        encoding="latin-1",
        env=ENV,
        timeout=timeout,
        preexec_fn=None if memory is None else _limited(memory),
        check=False,
    )


# -- --max-line-bytes -------------------------------------------------------------------------


def _padded(size: int) -> bytes:
    """A valid event line of exactly ``size`` bytes (its line end not counted)."""
    line = json.dumps(_event()).encode()
    return line[:-1] + b" " * (size - len(line)) + b"}"


def test_lines_longer_than_max_line_bytes_are_skipped_as_malformed(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_bytes(
        _padded(100)
        + b"\n"
        + b'{"tool": "' + b"a" * 5000 + b'", "args": {}}\n'
        + _padded(1024) + b"\n"  # exactly the limit: a line like any other
        + _padded(1025) + b"\r\n"
        + _padded(1024) + b"\r\n"  # the \r is part of the line: one byte too many
        + _padded(200) + b"\n"
        + b"x" * 3000  # the last line, without a line end
    )  # fmt: skip
    done = _run("--max-line-bytes", 1024, "--format", "json", path, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        f"{path}:2: line longer than 1024 bytes (--max-line-bytes)",
        f"{path}:4: line longer than 1024 bytes (--max-line-bytes)",
        f"{path}:5: line longer than 1024 bytes (--max-line-bytes)",
        f"{path}:7: line longer than 1024 bytes (--max-line-bytes)",
        "loopcore replay: 4 malformed lines skipped",
    ]
    [summary] = json.loads(done.stdout)["summary"]["files"]
    assert (summary["lines"], summary["calls"], summary["skipped_lines"]) == (7, 3, 4)
    # The default is 64 MiB: in the same file only the last line is malformed (not JSON).
    done = _run("--format", "json", path, timeout=60)
    assert done.stderr.splitlines()[0].startswith(f"{path}:7: invalid JSON")
    assert json.loads(done.stdout)["summary"]["files"][0]["calls"] == 6
    assert 64 * MiB == MAX_LINE_BYTES


def test_a_too_long_line_under_strict_stops_at_once(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_bytes(_padded(100) + b"\n" + b"[" * 4096 + b"\n" + _padded(100) + b"\n")
    done = _run("--max-line-bytes", 1000, "--strict", path, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"loopcore replay: {path}:2: line longer than 1000 bytes (--max-line-bytes) "
        "(--strict: stopping at the first malformed line)\n"
    )


@linux_only
def test_a_gzip_bomb_line_is_streamed_past_in_bounded_memory(tmp_path: Path, baseline: int) -> None:
    # 200 MiB without a line end, about 200 KB on disk; then one good line.
    bomb = tmp_path / "bomb.jsonl.gz"
    chunk = b"x" * MiB
    with gzip.open(bomb, "wb", compresslevel=9) as packed:
        for _ in range(200):
            packed.write(chunk)
        packed.write(b"\n" + json.dumps(_event()).encode() + b"\n")
    assert bomb.stat().st_size < 2 * MiB
    # The default limit: the too-long line costs about twice 64 MiB at most, never 200 MiB.
    done = _run("--format", "json", bomb, memory=baseline + 200 * MiB)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.splitlines()[0] == (
        f"{bomb}:1: line longer than {MAX_LINE_BYTES} bytes (--max-line-bytes)"
    )
    [summary] = json.loads(done.stdout)["summary"]["files"]
    assert (summary["lines"], summary["calls"], summary["skipped_lines"]) == (2, 1, 1)


@linux_only
def test_dev_zero_is_read_in_bounded_memory_for_ever(baseline: int) -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    # An input that never ends is read until it is stopped: bounded memory is the promise.
    process = subprocess.Popen(
        [*REPLAY, "--max-line-bytes", str(MiB), "/dev/zero"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
        preexec_fn=_limited(baseline + 64 * MiB),
    )
    watchdog = threading.Timer(120, process.kill)  # whatever happens, it ends
    watchdog.start()
    try:
        assert process.stderr is not None
        first = process.stderr.readline().decode()  # the report: reading has begun
        assert first == f"/dev/zero:1: line longer than {MiB} bytes (--max-line-bytes)\n"
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=3)  # still reading: it has not run out of memory
    finally:
        watchdog.cancel()
        process.kill()
        process.communicate(timeout=60)
    # --strict stops at that first line: an end for /dev/zero.
    done = _run("--strict", "--max-line-bytes", 4096, "/dev/zero", memory=baseline + 64 * MiB)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("loopcore replay: /dev/zero:1: line longer than 4096 bytes")


# -- streams ----------------------------------------------------------------------------------


def test_dev_stdin_is_read_as_a_stream() -> None:
    if not os.path.exists("/dev/stdin"):
        pytest.skip("no /dev/stdin")
    done = _run("--format", "json", "/dev/stdin", stdin=_lines(STREAM_LINES), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    [summary] = json.loads(done.stdout)["summary"]["files"]
    assert (summary["path"], summary["lines"], summary["calls"]) == (
        "/dev/stdin",
        STREAM_LINES,
        STREAM_LINES,
    )
    # Gzip through a pipe (``<(cat trace.jsonl.gz)``) is a stream too.
    done = _run("--format", "json", "/dev/stdin", stdin=gzip.compress(_lines(STREAM_LINES)))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["calls"] == STREAM_LINES


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    path = tmp_path / "live.jsonl"
    os.mkfifo(path)
    return path


@needs_fifo
def test_a_fifo_named_on_the_command_line_is_read_as_a_stream(fifo: Path) -> None:
    data = _lines(STREAM_LINES)
    failures: list[BaseException] = []

    def feed() -> None:
        try:
            with open(fifo, "wb") as writer:
                writer.write(data)
        except BrokenPipeError:  # the replay stopped reading: its exit status says why
            pass
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        done = _run("--format", "json", fifo, timeout=120)
    finally:
        if writer.is_alive():  # the replay never opened it: let the writer's open() return
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join(timeout=60)
    assert not failures
    assert done.returncode == 0, done.stderr
    [summary] = json.loads(done.stdout)["summary"]["files"]
    assert (summary["lines"], summary["calls"]) == (STREAM_LINES, STREAM_LINES)


# -- directory walks --------------------------------------------------------------------------


@needs_fifo
def test_a_directory_walk_skips_fifos_sockets_and_devices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces = tmp_path / "traces"
    (traces / "nested").mkdir(parents=True)
    (traces / "a.jsonl").write_bytes(_lines(3))
    (traces / "nested" / "b.jsonl.gz").write_bytes(gzip.compress(_lines(2)))
    os.mkfifo(traces / "x.jsonl")  # opening it would wait for a writer for ever
    os.mkfifo(traces / "nested" / "y.ndjson")
    monkeypatch.chdir(traces)  # a short socket path, whatever the temporary directory
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind("s.jsonl")
        if os.path.exists("/dev/zero"):
            os.symlink("/dev/zero", traces / "zero.jsonl")  # a device, through a link
        os.symlink(traces / "a.jsonl", traces / "link.jsonl")  # a link to a file is a file
        done = _run("--format", "json", traces, timeout=60)
    finally:
        server.close()
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    summary = json.loads(done.stdout)["summary"]
    assert [f["path"] for f in summary["files"]] == [
        str(traces / "a.jsonl"),
        str(traces / "nested" / "b.jsonl.gz"),
    ]  # link.jsonl is a.jsonl again: each file once
    assert summary["calls"] == 5
    only_specials = tmp_path / "specials"
    only_specials.mkdir()
    os.mkfifo(only_specials / "x.jsonl")
    done = _run(only_specials, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert f"{only_specials}: directory holds no trace files" in done.stderr


# -- --sweep ranges ---------------------------------------------------------------------------


@linux_only
@pytest.mark.parametrize(
    ("sweep", "count"),
    [
        ("historySize=1:1000000000000000", 1_000_000_000_000_000),
        ("warningThreshold=1:300000000", 300_000_000),
        ("criticalThreshold=-999999999999999999:999999999999999999:7", 285714285714285715),
    ],
)
def test_a_sweep_range_too_large_is_refused_before_it_is_made(
    tmp_path: Path, baseline: int, sweep: str, count: int
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(_lines(3))
    done = _run("--sweep", sweep, path, memory=baseline + 100 * MiB, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"loopcore replay: --sweep: {count} values is more than 1000; use a larger STEP\n"
    )

"""The ``loopcore`` command line: the demo a new user runs first."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from loopcore.cli import main


def test_demo_shows_warning_block_and_compaction_abort(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-color"]) == 0
    out = capsys.readouterr().out
    assert "warned   WARNING:" in out
    assert "BLOCKED  CRITICAL:" in out
    assert "no progress" in out
    assert "ping-pong loop" in out
    assert "post-compaction guard armed for 3 attempts" in out
    assert "run aborted:" in out
    assert "compaction_loop_persisted" in out
    # Recover once: each stuck run is blocked once, goes on, and ends on the second critical.
    assert out.count("(the model gets the block as the tool's result; the run goes on)") == 2
    assert out.count("run ends: Stopped this run because tool-loop recovery") == 2
    assert "the model reads the result with: [System note: Tool-loop warning after 10" in out
    assert "2 warning, 4 block, 1 guard_armed, 1 compaction_abort" in out


def test_module_entry_point_runs_the_demo() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopcore", "demo", "--no-color"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "compaction_loop_persisted" in done.stdout


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["nonsense"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


class _ReaderGone(io.StringIO):
    """A stdout whose reader exits just before ``fail_at`` is written (``| head``)."""

    def __init__(self, fail_at: str, fd: int) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.fd = fd

    def write(self, text: str) -> int:
        if self.fail_at in text:
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)

    def fileno(self) -> int:
        return self.fd


@pytest.mark.parametrize("fail_at", ["loopcore demo", "[log WARNING]", "call 21: BLOCKED"])
def test_demo_stops_quietly_when_the_reader_goes_away(
    fail_at: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with open(os.devnull, "w") as sink:
        stdout = _ReaderGone(fail_at, os.dup(sink.fileno()))
        monkeypatch.setattr(sys, "stdout", stdout)
        try:
            assert main(["demo", "--no-color"]) == 1
        finally:
            monkeypatch.undo()
            os.close(stdout.fd)
    stderr = capsys.readouterr().err
    assert "Traceback" not in stderr
    assert "Logging error" not in stderr


def test_the_replay_modules_import_without_a_cycle() -> None:
    # The plot draws a report; it needs neither the command nor a circular import of it.
    code = (
        "import sys, loopcore.cli.plot, loopcore.cli.render; "
        "assert 'loopcore.cli.replay' not in sys.modules, sorted(sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_reading_the_command_line_imports_neither_the_readers_nor_numpy() -> None:
    # ``loopcore demo`` and ``--help`` stay quick: the replay's needs load when it runs.
    code = (
        "import sys, loopcore.cli; "
        "heavy = ('numpy', 'loopcore.formats', 'loopcore.batch'); "
        "loaded = [m for m in heavy if m in sys.modules]; "
        "assert not loaded, loaded"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr


def test_replay_help_gives_the_line_limit_the_readers_use(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from loopcore.cli.options import DEFAULT_MAX_LINE_BYTES
    from loopcore.formats import MAX_LINE_BYTES

    assert DEFAULT_MAX_LINE_BYTES == MAX_LINE_BYTES
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", "--help"])
    assert exit_info.value.code == 0
    assert "--max-line-bytes N" in capsys.readouterr().out


def test_version_is_printed_by_the_console_script() -> None:
    import loopcore

    for argv in (["--version"], ["replay", "--version"]):
        done = subprocess.run(
            [sys.executable, "-m", "loopcore", *argv],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout) == (0, f"loopcore {loopcore.__version__}\n")


def test_replay_without_numpy_names_the_extra() -> None:
    # As if the cli extra were not installed: importing numpy fails.
    code = (
        "import sys; sys.modules['numpy'] = None; "
        "from loopcore.cli import main; sys.exit(main(['replay', 'trace.jsonl']))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "loopcore replay: needs numpy, which comes with the cli extra: "
        "pip install 'loopcore[cli]'\n"
    )

"""Real redis-server processes for the Redis store's tests (never a fake).

``.ci/run`` starts one server and exports ``LOOPCORE_REDIS_URL`` (with
``LOOPCORE_EXPECT_REDIS=1``); without it the tests start their own from the
``redis-server`` binary on a free loopback port. Tests that restart or stop a
server (AOF durability, outages) always start their own.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

__all__ = ["EXPECTED", "RedisServer", "binary_or_skip", "free_port"]

#: Set by .ci/run: a missing server or binary fails the tests instead of skipping them.
EXPECTED = os.environ.get("LOOPCORE_EXPECT_REDIS") == "1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def binary_or_skip() -> str:
    """The redis-server binary; skips (fails when expected) when there is none."""
    found = shutil.which("redis-server")
    if found:
        return found
    reason = "redis-server is not installed (apt-get install redis-server)"
    if EXPECTED:
        pytest.fail(f"LOOPCORE_EXPECT_REDIS=1 but {reason}", pytrace=False)
    pytest.skip(reason)


class RedisServer:
    """One redis-server on 127.0.0.1, in its own directory (its AOF lives there)."""

    def __init__(self, directory: Path, *, appendonly: bool = False) -> None:
        self.binary = binary_or_skip()
        self.directory = directory
        self.appendonly = appendonly
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--dir", str(self.directory), "--protected-mode", "no"]
        if self.appendonly:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not answer within 20 s")

    def stop(self) -> None:
        """A clean shutdown (SIGTERM): the AOF is flushed."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=20)
        self.process = None

    def pause(self) -> None:
        """The server hangs (SIGSTOP): connections stay open, nothing answers."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
        self.stop()

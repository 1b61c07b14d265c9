"""Shared fixtures: the tests of twinned modules run once per twin (pure Python, and compiled).

A test module opts in with ``pytestmark = pytest.mark.usefixtures("twin")`` (or
by asking for ``twin``): the session-scoped fixture points every chooser module
at one twin, so pytest runs those tests on the Python twins, then on the
compiled ones. The compiled leg imports the ``_c`` modules directly and never
falls back: when extensions are expected (``LOOPCORE_EXPECT_EXTENSIONS=1``) and
missing, that leg errors instead of quietly testing the Python twin twice.
Modules that are not twinned (configuration, the CLI) run once.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from loopcore._twins import COMPONENTS, use_twin

settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile("slow", parent=settings.get_profile("default"), max_examples=2000)
settings.load_profile(os.environ.get("LOOPCORE_HYPOTHESIS_PROFILE", "default"))

EXTENSIONS_DISABLED = bool(os.environ.get("LOOPCORE_NO_EXTENSIONS"))
EXTENSIONS_EXPECTED = os.environ.get("LOOPCORE_EXPECT_EXTENSIONS") == "1"
#: Set by .ci/run, which installs every extra: a missing one fails instead of skipping.
INTEGRATIONS_EXPECTED = os.environ.get("LOOPCORE_EXPECT_INTEGRATIONS") == "1"

__all__ = [
    "EXTENSIONS_DISABLED",
    "EXTENSIONS_EXPECTED",
    "INTEGRATIONS_EXPECTED",
    "TWINS",
    "loopcore_records",
    "require",
    "use_twin",
]


def require(module: str, extra: str) -> Any:
    """Import ``module`` for a test module that needs an extra's package.

    Skips the calling module with the install command when the package is
    missing, unless ``LOOPCORE_EXPECT_INTEGRATIONS=1`` says every extra is
    installed: then a missing package is a failure, never a quiet skip.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if INTEGRATIONS_EXPECTED:
            pytest.fail(
                f"{module} does not import, but LOOPCORE_EXPECT_INTEGRATIONS=1: {exc}",
                pytrace=False,
            )
        pytest.skip(
            f"{module} is not installed: pip install 'loopcore[{extra}]'", allow_module_level=True
        )


def compiled_present() -> bool:
    try:
        for component in COMPONENTS:
            importlib.import_module(f"loopcore._{component}_c")
    except ImportError:
        return False
    return True


TWINS = ["python"]
if not EXTENSIONS_DISABLED and (EXTENSIONS_EXPECTED or compiled_present()):
    TWINS.append("cython")


@pytest.fixture(params=TWINS, scope="session")
def twin(request: pytest.FixtureRequest) -> Iterator[str]:
    """The twin every chooser points at for the tests that use this fixture."""
    with use_twin(request.param) as name:
        yield name


def loopcore_records(
    caplog: pytest.LogCaptureFixture, level: int | None = None
) -> list[logging.LogRecord]:
    """The captured log records of the ``loopcore`` logger, optionally of one level."""
    return [
        r
        for r in caplog.records
        if r.name.split(".")[0] == "loopcore" and (level is None or r.levelno == level)
    ]


Replay = Callable[..., tuple[int, str, str]]


@pytest.fixture
def replay(capsys: pytest.CaptureFixture[str]) -> Replay:
    """Run ``loopcore replay ARGS``; returns (exit status, stdout, stderr)."""
    from loopcore.cli import main

    def run(*args: object) -> tuple[int, str, str]:
        code = main(["replay", *map(str, args)])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis: ``LOOPCORE_REDIS_URL``'s, else a redis-server started for the session."""
    from .redis_server import EXPECTED, RedisServer

    require("redis", "redis")
    url = os.environ.get("LOOPCORE_REDIS_URL")
    if url:
        import redis

        try:
            redis.Redis.from_url(url, socket_timeout=5).ping()
        except redis.RedisError as exc:
            message = f"LOOPCORE_REDIS_URL={url} does not answer: {type(exc).__name__}"
            if EXPECTED:
                pytest.fail(message, pytrace=False)
            pytest.skip(message)
        yield url
        return
    with RedisServer(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


@pytest.fixture
def redis_prefix() -> str:
    """A key prefix of this test's own: tests sharing one server never see each other's keys."""
    import uuid

    return f"loopcore-test:{uuid.uuid4().hex[:12]}:"

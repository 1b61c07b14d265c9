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
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, settings

from loopcore import _fingerprint, _outcome, _percall, _ring

settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile("slow", parent=settings.get_profile("default"), max_examples=2000)
settings.load_profile(os.environ.get("LOOPCORE_HYPOTHESIS_PROFILE", "default"))

EXTENSIONS_DISABLED = bool(os.environ.get("LOOPCORE_NO_EXTENSIONS"))
EXTENSIONS_EXPECTED = os.environ.get("LOOPCORE_EXPECT_EXTENSIONS") == "1"

#: Every chooser module and the component name of its twins (``_<name>_py`` / ``_c``).
CHOOSERS = (
    (_fingerprint, "fingerprint"),
    (_outcome, "outcome"),
    (_ring, "ring"),
    (_percall, "percall"),
)


def compiled_present() -> bool:
    try:
        for _, component in CHOOSERS:
            importlib.import_module(f"loopcore._{component}_c")
    except ImportError:
        return False
    return True


TWINS = ["python"]
if not EXTENSIONS_DISABLED and (EXTENSIONS_EXPECTED or compiled_present()):
    TWINS.append("cython")

_SUFFIX = {"python": "py", "cython": "c"}


@contextmanager
def use_twin(name: str) -> Iterator[str]:
    """Point every chooser module at one twin inside the block (imported directly)."""
    with pytest.MonkeyPatch.context() as patch:
        for chooser, component in CHOOSERS:
            module = importlib.import_module(f"loopcore._{component}_{_SUFFIX[name]}")
            for attr in chooser.__all__:
                if hasattr(module, attr):
                    patch.setattr(chooser, attr, getattr(module, attr))
        yield name


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

"""Shared fixtures: the whole suite runs once per twin (pure Python, and compiled when built).

The compiled leg imports the ``_c`` modules directly and never falls back: when
extensions are expected (``LOOPCORE_EXPECT_EXTENSIONS=1``) and missing, that leg
errors instead of quietly testing the Python twin twice.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings

from loopcore import _fingerprint, _history

# The twin fixture is function-scoped and autouse; it patches module attributes
# that stay valid for every example hypothesis draws inside one test.
settings.register_profile(
    "default",
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.register_profile("slow", parent=settings.get_profile("default"), max_examples=2000)
settings.load_profile(os.environ.get("LOOPCORE_HYPOTHESIS_PROFILE", "default"))

EXTENSIONS_DISABLED = bool(os.environ.get("LOOPCORE_NO_EXTENSIONS"))
EXTENSIONS_EXPECTED = os.environ.get("LOOPCORE_EXPECT_EXTENSIONS") == "1"


def compiled_present() -> bool:
    try:
        importlib.import_module("loopcore._fingerprint_c")
        importlib.import_module("loopcore._history_c")
    except ImportError:
        return False
    return True


TWINS = ["python"]
if not EXTENSIONS_DISABLED and (EXTENSIONS_EXPECTED or compiled_present()):
    TWINS.append("cython")

_SUFFIX = {"python": "py", "cython": "c"}


def _load(component: str, twin: str) -> ModuleType:
    return importlib.import_module(f"loopcore._{component}_{_SUFFIX[twin]}")


@pytest.fixture(params=TWINS, autouse=True)
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point the chooser modules at one twin for the duration of a test."""
    name: str = request.param
    for chooser, component in ((_fingerprint, "fingerprint"), (_history, "history")):
        module = _load(component, name)
        for attr in chooser.__all__:
            monkeypatch.setattr(chooser, attr, getattr(module, attr))
    return name


def loopcore_records(
    caplog: pytest.LogCaptureFixture, level: int | None = None
) -> list[logging.LogRecord]:
    """The captured log records of the ``loopcore`` logger, optionally of one level."""
    return [
        r
        for r in caplog.records
        if r.name.split(".")[0] == "loopcore" and (level is None or r.levelno == level)
    ]

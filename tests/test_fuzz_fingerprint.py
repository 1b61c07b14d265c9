"""The fuzz target ``fuzz/fuzz_fingerprint.py``, as part of the normal suite.

A few dozen examples per property by default (a few seconds);
``LOOPCORE_FUZZ_EXAMPLES=N`` runs N each. The target lives outside ``tests/``
(it also runs stand-alone and under atheris), so a copy of the tests without
the checkout around it (``scripts/check-wheel.sh``) skips this module.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

TARGET = Path(__file__).resolve().parent.parent / "fuzz" / "fuzz_fingerprint.py"
if not TARGET.is_file():
    pytest.skip(f"{TARGET} is not here (tests copied out of the checkout)", allow_module_level=True)


def _load() -> Any:
    spec = importlib.util.spec_from_file_location("loopcore_fuzz_fingerprint", TARGET)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


fuzz = _load()

test_fuzz_encode = fuzz.fuzz_encode
test_fuzz_outcome = fuzz.fuzz_outcome
test_fuzz_special_outcome = fuzz.fuzz_special_outcome

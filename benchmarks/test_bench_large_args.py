"""How fast is a call with a large argument fingerprinted? A 20,000-character string (workload 6).

``loopcore._fingerprint_c.fingerprint`` vs ``_fingerprint_py.fingerprint`` on
``("write", {"path": ..., "content": <20,000 chars>})`` under the call domain
(exactly what ``hash_call`` hashes), vs the baseline's ``json.dumps`` + SHA-256
of ``["write", args]``. Times are per fingerprint; MB/s counts the string's
20,000 UTF-8 bytes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from baseline import fingerprint_call
from loopcore._outcome import CALL_DOMAIN
from twins import twin_module

ROUNDS = 100
FINGERPRINTS_PER_ROUND = 50

CONTENT = ("    total = compute(values, scale=2.5)  # one line of a long source file\n" * 300)[
    :20_000
]
ARGS = {"path": "/src/app/generated.py", "content": CONTENT}
assert len(CONTENT) == 20_000


def _fingerprinter(leg: str) -> Callable[[], object]:
    if leg == "baseline":

        def baseline() -> object:
            return fingerprint_call("write", ARGS)

        return baseline

    fingerprint = twin_module("fingerprint", leg).fingerprint
    value = ("write", ARGS)

    def twin() -> object:
        return fingerprint(value, CALL_DOMAIN)

    return twin


@pytest.mark.benchmark(group="large args: 20,000-char string")
def test_large_args_fingerprint(benchmark: BenchmarkFixture, leg: str) -> None:
    fn = _fingerprinter(leg)
    benchmark.extra_info["per"] = "fingerprint"
    benchmark.extra_info["payload_bytes"] = len(CONTENT.encode())
    benchmark.pedantic(fn, rounds=ROUNDS, iterations=FINGERPRINTS_PER_ROUND, warmup_rounds=1)

    if leg != "baseline":  # both twins hash to the same value
        assert fn() == twin_module("fingerprint", "python").fingerprint(
            ("write", ARGS), CALL_DOMAIN
        )

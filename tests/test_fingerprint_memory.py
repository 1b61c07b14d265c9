"""Huge str and bytes values: linear work, hashed as they stream (SPEC §11).

The compiled twin hashes a payload of 1 MiB or more straight from the value's
own storage (no copy) unless it sits inside a mapping or set whose entries are
still being sorted; the reference keeps big payloads as chunks of their own
and streams them into xxh3, so it holds at most the UTF-8 of a str. First:
the streamed digest is xxh3-64 of the same bytes, at every size and alignment
around the stream boundaries. Then peak memory, measured in a fresh process.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from typing import Any

import pytest
import xxhash

from loopcore import _fingerprint_py

from .conftest import TWINS

if "cython" in TWINS:
    from loopcore import _fingerprint_c

    ENCODERS: tuple[Any, ...] = (_fingerprint_py, _fingerprint_c)
else:
    ENCODERS = (_fingerprint_py,)

MIB = 1 << 20
DOMAINS = (b"", b"d", b"loopcore:call\x00", b"x" * 63, b"y" * 64, b"z" * 65, b"w" * 1000)
# Around the stream threshold, a stripe (64), a block (1024) and the 240-byte
# short-input limit of the one-shot hash.
SIZES = (MIB - 1, MIB, MIB + 1, MIB + 63, MIB + 64, MIB + 65, MIB + 1023, MIB + 1025, 3 * MIB + 7)


def _shapes(payload: Any) -> list[Any]:
    return [
        payload,
        [payload],
        [1, payload, "after"],
        (payload, payload),
        [[[payload]]],
        {"content": payload},  # few ASCII keys: written in order, streamed
        {"k": [payload, {"z": payload}], "a": 1},
        {"é": payload, "x": 1},  # a non-ASCII key: sorted in the buffer
        {1: payload, "a": [payload]},
        {frozenset({payload}) if isinstance(payload, (str, bytes)) else 0: 1},
    ]


@pytest.mark.parametrize("size", SIZES)
def test_streamed_digests_are_xxh3_of_the_encoding(size: int) -> None:
    rnd = random.Random(size)
    payloads = [
        rnd.randbytes(size),
        "a" * size,
        "\u00e9" * (size // 2),
        "\u20ac" * (size // 3) + "x",
        "\U0001f600" * (size // 4),
        "\ud800" * (size // 3),
    ]
    for payload in payloads:
        for value in _shapes(payload):
            encoded = _fingerprint_py.encode(value)
            for encoder in ENCODERS:
                assert encoder.encode(value) == encoded
            for domain in DOMAINS:
                expected = xxhash.xxh3_64_intdigest(domain + encoded)
                assert ENCODERS[-1].fingerprint(value, domain) == expected
            # The reference streams through xxhash's own state: two alignments.
            for domain in DOMAINS[:2]:
                expected = xxhash.xxh3_64_intdigest(domain + encoded)
                assert _fingerprint_py.fingerprint(value, domain) == expected


def test_several_streamed_payloads_in_one_value() -> None:
    parts = [os.urandom(MIB + n) for n in (0, 5, 64)] + ["s" * (2 * MIB), "\u0101" * MIB]
    value = [parts, "small", {"a": parts[0], "b": [parts[1], parts[3]]}, parts]
    expected = xxhash.xxh3_64_intdigest(b"dom" + _fingerprint_py.encode(value))
    for encoder in ENCODERS:
        assert encoder.fingerprint(value, b"dom") == expected


# ---- peak memory ------------------------------------------------------------------

PROBE = r"""
import json, os, resource, sys
if sys.argv[1] == "python":
    os.environ["LOOPCORE_NO_EXTENSIONS"] = "1"
from loopcore import _fingerprint, hash_call, hash_outcome
assert _fingerprint.IMPLEMENTATION == sys.argv[1], _fingerprint.IMPLEMENTATION
size = int(sys.argv[3])
value = {"bytes": lambda: b"x" * size, "ascii": lambda: "x" * size,
         "latin1": lambda: "\u00e9" * size}[sys.argv[2]]()

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)

def reset_peak():
    # Linux: VmHWM is this process's own high-water mark (ru_maxrss can carry
    # the parent's over exec); writing 5 to clear_refs resets it to now.
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass

def rss():
    if sys.platform.startswith("linux"):
        reset_peak()
        return status("VmRSS")
    return peak()

def peak():
    if sys.platform.startswith("linux"):
        return status("VmHWM")
    value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return value if sys.platform == "darwin" else value * 1024

before = rss()
_fingerprint.fingerprint(value, b"dom")
hash_call("write", {"path": "/x", "content": value})
hash_outcome("read", {}, result={"content": [{"type": "text", "text": value}]})
print(json.dumps({"growth": peak() - before}))
"""


def _peak_growth(twin: str, kind: str, size: int) -> int:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, twin, kind, str(size)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "LOOPCORE_NO_EXTENSIONS"},
    )
    assert proc.returncode == 0, proc.stderr
    growth: int = json.loads(proc.stdout)["growth"]
    return growth


needs_rss = pytest.mark.skipif(
    sys.platform == "win32", reason="peak RSS comes from the resource module"
)


@needs_rss
@pytest.mark.parametrize("twin", TWINS)
def test_64_mib_bytes_fingerprint_with_peak_growth_under_twice_its_size(twin: str) -> None:
    size = 64 * MIB
    growth = _peak_growth(twin, "bytes", size)
    assert growth < 2 * size, f"{twin}: peak RSS grew {growth / MIB:.0f} MiB"
    # Neither twin copies a bytes payload at all.
    assert growth < size // 4, f"{twin}: peak RSS grew {growth / MIB:.0f} MiB"


@needs_rss
@pytest.mark.parametrize("kind", ["ascii", "latin1"])
@pytest.mark.parametrize("twin", TWINS)
def test_huge_str_costs_at_most_its_utf8(twin: str, kind: str) -> None:
    size = 64 * MIB
    utf8 = size if kind == "ascii" else 2 * size
    growth = _peak_growth(twin, kind, size)
    if twin == "cython":
        # Hashed straight from the str's storage (ASCII) or piece by piece.
        assert growth < size // 4, f"{kind}: peak RSS grew {growth / MIB:.0f} MiB"
    else:
        # str.encode() is the reference's one copy; no joined second one.
        assert growth < utf8 + size // 4, f"{kind}: peak RSS grew {growth / MIB:.0f} MiB"

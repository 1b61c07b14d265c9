"""Does the compiled encoder's xxh3 give xxhash's digest at every input length?

The long-input path (over 240 bytes) runs its stripes in SSE2 where the compiler
targets it, and the encoder hashes payloads of 1 MiB and more in place while
writing them: every length around the stripe, block and streaming boundaries
is compared with the ``xxhash`` package over the encoder's own bytes.
"""

from __future__ import annotations

import random

import pytest
import xxhash

from .conftest import TWINS

pytestmark = pytest.mark.skipif(
    "cython" not in TWINS, reason="the compiled twin is not built in this install"
)

LENGTHS = [
    *range(0, 300),
    *range(1000, 1100),
    *range(2030, 2070),
    16 * 1024 + 7,
    (1 << 20) - 1,
    1 << 20,
    (1 << 20) + 4097,
    3 << 20,
]


@pytest.mark.parametrize("kind", ["bytes", "str"])
def test_digest_equals_xxhash_at_every_length(kind: str) -> None:
    from loopcore import _fingerprint_c as c

    rnd = random.Random(14)
    for n in LENGTHS:
        value: bytes | str = rnd.randbytes(n) if kind == "bytes" else "é" * (n // 2) + "x"
        assert c.fingerprint(value) == xxhash.xxh3_64_intdigest(c.encode(value)), n
        assert c.fingerprint(value, b"domain:") == xxhash.xxh3_64_intdigest(
            b"domain:" + c.encode(value)
        ), n

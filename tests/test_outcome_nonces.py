"""SPEC §8.5 wrapper nonces: the scanner against a literal reading of the rule, and its cost.

``_nonce.normalise`` is compared with ``literal``, a brute-force transcription of
the rule written for these tests (every closing position tried, every quote's
backslashes counted backwards), on texts built from the tokens that matter.
Its cost is bounded by counting what it reads (``scan``'s second value), never
by the clock.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore._nonce import MIN_WRAPPED, Verbatim, normalise, scan

OPEN = "<<<EXTERNAL_UNTRUSTED_CONTENT id="
CLOSE = "<<<END_EXTERNAL_UNTRUSTED_CONTENT id="
START = "<<<EXTERNAL_UNTRUSTED_CONTENT"
END = "<<<END_EXTERNAL_UNTRUSTED_CONTENT"
HEX = frozenset("0123456789abcdef")
ZERO = "0" * 16
N1 = "9f3a0c1d2b4e5f60"
N2 = "0123456789abcdef"


def wrap(nonce: str, body: str, backslashes: int = 0, close_nonce: str | None = None) -> str:
    run = "\\" * backslashes
    end = nonce if close_nonce is None else close_nonce
    return f'{OPEN}{run}"{nonce}{run}">>>{body}{CLOSE}{run}"{end}{run}">>>'


# ---- the rule, transcribed literally ----------------------------------------------------


def _parse(text: str, at: int, head: str, run: int | None) -> tuple[int, int, int] | None:
    if text[at : at + len(head)] != head:
        return None
    i = at + len(head)
    count = 0
    while i < len(text) and text[i] == "\\":
        i += 1
        count += 1
    if run is not None and count != run:
        return None
    if i >= len(text) or text[i] != '"':
        return None
    nonce = i + 1
    if nonce + 16 > len(text) or any(ch not in HEX for ch in text[nonce : nonce + 16]):
        return None
    j = nonce + 16
    again = 0
    while j < len(text) and text[j] == "\\":
        j += 1
        again += 1
    if again != count or text[j : j + 4] != '">>>':
        return None
    return count, nonce, j + 4


def _escaped(content: str, depth: int) -> bool:
    for index, ch in enumerate(content):
        if ch != '"':
            continue
        k = 0
        while index - k - 1 >= 0 and content[index - k - 1] == "\\":
            k += 1
        if (k + 1) % depth:
            return False
    return True


def literal(text: str) -> str:
    """SPEC §8.5 word by word: left to right, non-overlapping, first match at each place."""
    out = list(text)
    i = 0
    while i < len(text):
        opening = _parse(text, i, OPEN, None)
        match = None
        if opening is not None:
            run, first, content = opening
            for j in range(content, len(text)):
                closing = _parse(text, j, CLOSE, run)
                body = text[content:j]
                if closing is None or START in body or END in body:
                    continue
                if text[closing[1] : closing[1] + 16] == text[first : first + 16]:
                    match = (run, first, closing[1], body, closing[2])
                    break
        if match is None:
            i += 1
            continue
        run, first, second, body, end = match
        depth = run + 1
        if depth & (depth - 1) == 0 and _escaped(body, depth):
            out[first : first + 16] = ZERO
            out[second : second + 16] = ZERO
        i = end
    return "".join(out)


TOKENS = st.sampled_from(
    [
        OPEN,
        CLOSE,
        START,
        END,
        '"',
        "\\",
        "\\\\\\",
        '">>>',
        '\\">>>',
        N1,
        N2,
        "0123456789abcdeF",
        "0123456789abcde",
        "x",
        "\n",
        "<",
    ]
)
SOUP = st.lists(TOKENS, max_size=40).map("".join)
BODY = st.lists(st.sampled_from(['"', "\\", "a", "\n", "<<<", '\\"', '\\\\\\"']), max_size=8).map(
    "".join
)


@st.composite
def wrapped_texts(draw: st.DrawFn) -> str:
    """Texts holding well-formed (or nearly) wrappers among other tokens."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        parts.append(draw(SOUP))
        run = draw(st.sampled_from([0, 1, 2, 3, 7]))
        nonce = draw(st.sampled_from([N1, N2]))
        close = draw(st.sampled_from([nonce, nonce, N1, N2]))
        parts.append(wrap(nonce, draw(BODY), run, close))
    parts.append(draw(SOUP))
    return "".join(parts)


@given(SOUP | wrapped_texts())
def test_normalise_is_the_rule(text: str) -> None:
    assert normalise(text) == literal(text)


@given(SOUP | wrapped_texts())
def test_normalise_is_idempotent_and_keeps_the_length(text: str) -> None:
    once = normalise(text)
    assert normalise(once) == once
    assert len(once) == len(text)


@given(SOUP | wrapped_texts())
def test_work_is_linear(text: str) -> None:
    _, work = scan(text)
    assert work <= 6 * len(text) + 64


ADVERSARIAL = {
    "40k backslashes in the opening": OPEN + "\\" * 40_000 + '"' + N1 + "\\" * 40_000 + '">>>x',
    "40k backslashes, then a closing": wrap(N1, "body", 40_000),
    "32767 backslashes (a depth), quotes escaped to it": wrap(N1, "\\" * 32_767 + '"', 32_767),
    "40k backslashes after an opening": wrap(N1, "\\" * 40_000 + '"'),
    "40k backslashes, no marker": "\\" * 40_000,
    "openings with no closing": (OPEN + '"' + N1 + '">>>') * 5_000,
    "closings with no opening": (CLOSE + '"' + N1 + '">>>') * 5_000,
    "bare markers": (START + END) * 3_000,
    "angle brackets": "<" * 40_000 + OPEN,
    "quotes": wrap(N1, '\\"' * 20_000, 1),
    "half openings": (OPEN + "\\" * 50 + '"' + N1[:15]) * 2_000,
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_inputs_cost_linear_work(name: str) -> None:
    text = ADVERSARIAL[name]
    positions, work = scan(text)
    assert work <= 6 * len(text) + 64
    assert normalise(text) == ("".join(_zeroed(text, positions)))


def _zeroed(text: str, positions: list[int]) -> list[str]:
    chars = list(text)
    for at in positions:
        chars[at : at + 16] = ZERO
    return chars


def test_adversarial_depth_payload_is_normalised() -> None:
    # 32767 backslashes: fifteen JSON encodings, quotes inside escaped to match.
    text = ADVERSARIAL["32767 backslashes (a depth), quotes escaped to it"]
    assert normalise(text) == text.replace(N1, ZERO)
    assert (
        normalise(ADVERSARIAL["40k backslashes, then a closing"])
        == (ADVERSARIAL["40k backslashes, then a closing"])
    )  # 40001 is no power of two


def test_work_grows_in_proportion() -> None:
    small = scan(wrap(N1, '"', 4_000) * 10)[1]
    large = scan(wrap(N1, '"', 4_000) * 100)[1]
    assert large <= 11 * small


# ---- §8.5's consequences, at the scanner -----------------------------------------------


def test_fresh_nonces_normalise_alike() -> None:
    assert normalise(wrap(N1, 'page "text"')) == normalise(wrap(N2, 'page "text"'))
    assert normalise(wrap(N1, "x")) == wrap(ZERO, "x")


@pytest.mark.parametrize("times", [1, 2, 3, 4, 5])
def test_json_encoded_wrappers_normalise_alike(times: int) -> None:
    first, second = wrap(N1, 'he said "hi"\n\\path'), wrap(N2, 'he said "hi"\n\\path')
    for _ in range(times):
        first, second = json.dumps(first), json.dumps(second)
    assert first != second
    assert normalise(first) == normalise(second)
    assert N1 not in normalise(first)


def test_real_zero_id_equals_a_normalised_one() -> None:
    assert normalise(wrap(ZERO, "x")) == normalise(wrap(N1, "x")) == wrap(ZERO, "x")


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda n: wrap(n, "x").replace(f'"{n}', '"'), id="empty id"),
        pytest.param(lambda n: wrap(n, "x").replace(n, n.upper()), id="upper-case id"),
        pytest.param(lambda n: wrap(n, "x").replace(n, n[:15]), id="short id"),
        pytest.param(lambda n: f'{OPEN}\\"{n}\\">>>x{CLOSE}\\\\\\"{n}\\\\\\">>>', id="runs differ"),
        pytest.param(lambda n: wrap(n, 'say "x"', 1), id="badly escaped quote"),
        pytest.param(lambda n: wrap(n, 'say \\"x\\"', 3), id="shallower quote"),
        pytest.param(lambda n: wrap(n, "x", 2), id="two backslashes: no depth"),
        pytest.param(lambda n: wrap(n, "x", close_nonce=N2 if n != N2 else N1), id="ids differ"),
        pytest.param(lambda n: wrap(n, START + "x"), id="opening inside"),
        pytest.param(lambda n: wrap(n, END + "x"), id="closing inside"),
        pytest.param(lambda n: wrap(n, "x")[:-1], id="no closing"),
    ],
)
def test_malformed_wrappers_keep_their_nonces(make: object) -> None:
    assert callable(make)
    first, second = make(N1), make("aaaaaaaaaaaaaaaa")
    assert normalise(first) == first
    assert normalise(second) == second


def test_changed_payload_stays_different() -> None:
    assert normalise(wrap(N1, "v1")) != normalise(wrap(N2, "v2"))


def test_pairs_are_left_to_right_and_non_overlapping() -> None:
    text = "a " + wrap(N1, "one") + " b " + wrap(N2, "two", 1) + " c"
    assert normalise(text) == "a " + wrap(ZERO, "one") + " b " + wrap(ZERO, "two", 1) + " c"
    # An opening whose content holds another opening: only the inner pair matches.
    nested = OPEN + f'"{N1}">>>' + wrap(N2, "in")
    assert normalise(nested) == OPEN + f'"{N1}">>>' + wrap(ZERO, "in")


def test_short_texts_and_subclasses() -> None:
    assert len(wrap(N1, "")) == MIN_WRAPPED
    assert normalise(wrap(N1, "")) == wrap(ZERO, "")
    text = "plain text"
    assert normalise(text) is text

    class Loud(str):
        def __contains__(self, item: object) -> bool:
            raise AssertionError("a subclass's own method ran")

    out = normalise(Loud(wrap(N1, "x")))
    assert type(out) is str
    assert out == wrap(ZERO, "x")
    assert isinstance(Verbatim("x"), str)

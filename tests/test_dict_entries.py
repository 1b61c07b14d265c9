"""Do dicts read from their entry tables hash exactly as the reference walks them?

The compiled twins read a small dict's entries straight from its entry table
(``_dict_entries.h``) for an args dict's memo, a flat dict's bytes and a
result's details, whose "status" entry is found in the same pass. Tables with
deleted and re-added entries, keys of every kind, split instance dicts, a
"status" key that is not the interned str, and a details dict changed while
its content is read must all give the reference's hashes, verdicts and records.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore import ToolLoopGuard, _fingerprint_py, _outcome_py
from loopcore._records import OUTCOME_KINDS
from loopcore._twins import use_twin

from .conftest import TWINS

COMPILED = "cython" in TWINS
CONFIG = {"enabled": True, "historySize": 30, "warningThreshold": 20, "criticalThreshold": 25}

keys = st.one_of(
    st.sampled_from(["a", "b", "path", "status", "lines", "truncated", "é", "ключ"]),
    st.integers(-3, 3),
    st.text(max_size=4),
)
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-300, 300),
    st.integers(),
    st.floats(allow_nan=False),
    st.sampled_from(["blocked", "ok", "", "x" * 40]),
    st.text(max_size=6),
)
# Each step sets a key, or deletes one the dict holds (a hole in its table).
steps = st.lists(st.tuples(st.booleans(), keys, values), max_size=24)


def built(ops: list[tuple[bool, Any, Any]]) -> dict[Any, Any]:
    d: dict[Any, Any] = {}
    for delete, key, value in ops:
        if delete and d:
            del d[list(d)[hash(str(key)) % len(d)]]
        else:
            d[key] = value
    return d


class Slots:
    """Instances share their dicts' keys: a split table, read the usual way."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def split_dict(**fields: Any) -> dict[str, Any]:
    Slots(**fields)  # the first instance fixes the shared keys
    return Slots(**fields).__dict__


@pytest.mark.skipif(not COMPILED, reason="the compiled twin is not built")
@given(ops=steps, nonces=st.booleans())
def test_a_dict_with_holes_encodes_as_the_reference(
    ops: list[tuple[bool, Any, Any]], nonces: bool
) -> None:
    from loopcore import _fingerprint_c

    d = built(ops)
    assert _fingerprint_c.encode(d, nonces=nonces) == _fingerprint_py.encode(d, nonces=nonces)
    assert _fingerprint_c.encode([d, {"k": d}]) == _fingerprint_py.encode([d, {"k": d}])


@pytest.mark.skipif(not COMPILED, reason="the compiled twin is not built")
def test_a_split_instance_dict_encodes_as_the_reference() -> None:
    from loopcore import _fingerprint_c

    d = split_dict(path="/a", offset=1, limit=2)
    del d["offset"]
    assert _fingerprint_c.encode(d) == _fingerprint_py.encode(d)
    assert _fingerprint_c.encode(d, nonces=True) == _fingerprint_py.encode(d, nonces=True)


def reference_records(steps: list[tuple[Any, Any]]) -> list[tuple[Any, ...]]:
    expected: list[tuple[Any, ...]] = []
    for args, result in steps:
        found = _outcome_py.outcome_of("read", args, result=result)
        if found[0] is None:
            expected.append((None, None, None, None, False))
        else:
            expected.append((found[0], found[1], OUTCOME_KINDS[found[2]], found[3], found[4]))
    return expected


def guard_records(twin: str, steps: list[tuple[Any, Any]]) -> list[tuple[Any, ...]]:
    with use_twin(twin):
        guard = ToolLoopGuard(CONFIG)
    for n, (args, result) in enumerate(steps):
        guard.before_call("read", args, tool_call_id=f"c{n}")
        guard.after_call("read", args, tool_call_id=f"c{n}", result=result)
    return [
        (r.result_hash, r.unknown_tool_name, r.outcome_kind, r.failure_identity_hash, r.no_progress)
        for r in guard.detector.history()
    ]


def text_result(details: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "body"}], "details": details}


@given(args_ops=steps, details_ops=steps)
def test_guard_records_of_dicts_with_holes_are_the_reference(
    args_ops: list[tuple[bool, Any, Any]], details_ops: list[tuple[bool, Any, Any]]
) -> None:
    steps = [(built(args_ops), text_result(built(details_ops)))]
    steps.append((steps[0][0], text_result(split_dict(lines=2, truncated=False))))
    expected = reference_records(steps)
    for twin in TWINS:
        assert guard_records(twin, steps) == expected, twin


@pytest.mark.parametrize("status", ["blocked", "failed", None, 3, b"blocked"])
@pytest.mark.parametrize("interned", [True, False])
def test_a_status_key_is_found_whether_interned_or_not(status: Any, interned: bool) -> None:
    key = "status" if interned else "".join(["sta", "tus"])
    assert (key is "status") is interned  # noqa: F632 (the very point)
    details = {"lines": 1, key: status}
    del details["lines"]
    details["lines"] = 2
    steps = [({"path": "/a"}, text_result(details))]
    expected = reference_records(steps)
    for twin in TWINS:
        assert guard_records(twin, steps) == expected, twin


# A common result's text of each storage width, with and without a space at an
# end (the rule strips it: the fast path must leave those to the reference).
TEXT_FORMS = ["body", " body", "body\n", "é body", "é\xa0", "ключ", "\u3000ключ", "ключ\u2003"]
TEXT_FORMS += ["\U0001f600 x", "x \U0001f600\u3000", "\x85é"]


@pytest.mark.parametrize("text", TEXT_FORMS)
@pytest.mark.parametrize("fresh_keys", [False, True])
def test_a_common_result_text_of_any_width_hashes_as_the_reference(
    text: str, fresh_keys: bool
) -> None:
    # Fresh key objects (not the interned ones) are found by their text.
    content, kind, body = (
        ("".join(["con", "tent"]), "".join(["ty", "pe"]), "".join(["te", "xt"]))
        if fresh_keys
        else ("content", "type", "text")
    )
    result = {content: [{kind: "text", body: text}], "details": {"lines": 1}}
    steps = [({"path": "/a"}, result), ({"path": "/b"}, {content: [{kind: "text", body: text}]})]
    expected = reference_records(steps)
    for twin in TWINS:
        assert guard_records(twin, steps) == expected, twin


class TypeCollider:
    """A key that meets "type" in an entry's table and changes the details meanwhile."""

    def __init__(self, details: dict[str, Any]) -> None:
        self.details = details

    def __hash__(self) -> int:
        return hash("type")

    def __eq__(self, other: object) -> bool:
        self.details["lines"] = 99
        self.details.pop("truncated", None)
        return False


def test_details_changed_while_the_content_is_read_hash_as_changed() -> None:
    def result() -> dict[str, Any]:
        details: dict[str, Any] = {"lines": 1, "truncated": False}
        entry = {TypeCollider(details): 0, "type": "text", "text": "body"}
        return {"content": [entry], "details": details}

    expected = reference_records([({"path": "/a"}, result())])
    for twin in TWINS:
        assert guard_records(twin, [({"path": "/a"}, result())]) == expected, twin


def test_an_args_dict_changed_between_the_calls_is_hashed_again() -> None:
    for twin in TWINS:
        with use_twin(twin):
            guard = ToolLoopGuard(CONFIG)
        args = {"path": "/a", "offset": 0, "limit": 5}
        guard.before_call("read", args, tool_call_id="c0")
        del args["offset"]
        args["offset"] = 1
        guard.after_call("read", args, tool_call_id="c0", result="ok")
        hashes = [r.args_hash for r in guard.detector.history()]
        assert hashes[-1] == _outcome_py.hash_call("read", args), twin


class Str(str):
    """A str subclass key: its dict's table is a general one."""


def copy_of(key: str, how: int) -> Any:
    # The same text as a new str object (not the interned one), or as a subclass.
    if how == 1:
        return "".join([key[:1], key[1:]]) if len(key) > 1 else key
    if how == 2:
        return Str(key)
    return key


entries = st.tuples(
    st.sampled_from(["type", "text", "kind", "txt"]),
    st.integers(0, 2),
    st.one_of(st.sampled_from(["text", "image"]), st.text(max_size=5), st.none(), st.integers()),
)
fields = st.tuples(
    st.sampled_from(["content", "details", "contents", "detail", "status"]),
    st.integers(0, 2),
    st.one_of(
        st.lists(st.lists(entries, max_size=4), max_size=3),
        st.just({"lines": 3}),
        st.none(),
        st.text(max_size=4),
    ),
)


def result_of(spec: list[tuple[str, int, Any]], holes: int) -> dict[Any, Any]:
    result: dict[Any, Any] = {f"pad{i}": i for i in range(holes)}
    for name, how, value in spec:
        if isinstance(value, list):
            value = [{copy_of(k, h): v for k, h, v in entry} for entry in value]
        result[copy_of(name, how)] = value
    for i in range(holes):
        del result[f"pad{i}"]
    return result


@given(spec=st.lists(fields, max_size=4), holes=st.integers(0, 3))
def test_result_fields_under_any_key_object_are_the_reference(
    spec: list[tuple[str, int, Any]], holes: int
) -> None:
    steps = [({"path": "/a"}, result_of(spec, holes))]
    expected = reference_records(steps)
    for twin in TWINS:
        assert guard_records(twin, steps) == expected, twin


def test_a_large_result_dict_is_read_by_the_dict_api() -> None:
    result: dict[str, Any] = {f"k{i}": i for i in range(20)}
    result["content"] = [{"type": "text", "text": "body"}]
    result["details"] = {"lines": 2}
    steps = [({"path": "/a"}, result)]
    expected = reference_records(steps)
    for twin in TWINS:
        assert guard_records(twin, steps) == expected, twin


def wrapped(body: str) -> str:
    nonce = "0123456789abcdef"
    return (
        f'<<<EXTERNAL_UNTRUSTED_CONTENT id="{nonce}">>>{body}'
        f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id="{nonce}">>>'
    )


common_texts = st.one_of(
    st.sampled_from(["body", "", " body", "body\n", "\tx\t", "é body", "ключ", wrapped("page")]),
    st.text(max_size=12),
    st.builds(Str, st.text(max_size=4)),
)
statuses = st.one_of(st.none(), st.sampled_from(["ok", "blocked", "failed"]), st.integers())
common_details = st.one_of(
    st.just(None),  # left out
    st.fixed_dictionaries({"lines": st.integers(0, 300), "truncated": st.booleans()}),
    st.fixed_dictionaries({"status": statuses}),
    # Values the one-pass writer declines: a wrapper (normalised), a wide int.
    st.fixed_dictionaries(
        {"note": st.sampled_from([wrapped("x"), "plain"]), "count": st.sampled_from([2**70, 1])}
    ),
    st.builds(lambda s: {"".join(["sta", "tus"]): s}, st.sampled_from(["ok", "blocked"])),
    st.builds(lambda v: {1: v}, st.text(max_size=3)),
    st.sampled_from(["plain", 3, [1], (2,)]),
)


@given(
    text=common_texts,
    kind=st.one_of(st.just("text"), st.just(Str("text")), st.none(), st.integers()),
    details=common_details,
    as_tuple=st.booleans(),
    entries=st.integers(1, 2),
)
def test_the_common_result_and_its_neighbours_are_the_reference(
    text: str, kind: Any, details: Any, as_tuple: bool, entries: int
) -> None:
    entry = {"type": kind, "text": text}
    content: Any = [entry] * entries
    result: dict[str, Any] = {"content": tuple(content) if as_tuple else content}
    if details is not None:
        result["details"] = details
    steps = [({"path": "/a"}, result)]
    expected = reference_records(steps)
    for twin in TWINS:
        assert guard_records(twin, steps) == expected, twin
    if COMPILED:
        from loopcore import _outcome_c

        assert _outcome_c.outcome_of("read", {}, result=result) == _outcome_py.outcome_of(
            "read", {}, result=result
        )


@pytest.mark.parametrize("size", [4096, 4097, 1 << 20, (1 << 20) + 65])
def test_long_args_and_texts_hash_as_the_reference(size: int) -> None:
    # Past the one-pass writers' bound and the streaming threshold: the
    # encoders the per-call path starts itself write and hash them.
    text = ("line of output\n" * (size // 15 + 1))[:size].strip() + "."
    args = {"path": "/a", "body": "x" * size}
    steps = [(args, {"content": [{"type": "text", "text": text}], "details": {"n": 1}})]
    steps.append((args, {"content": [{"type": "text", "text": text}]}))
    expected = reference_records(steps)
    for twin in TWINS:
        assert guard_records(twin, steps) == expected, twin
        with use_twin(twin):
            guard = ToolLoopGuard(CONFIG)
        guard.before_call("read", args, tool_call_id="c")
        guard.after_call("read", args, tool_call_id="c", result="ok")
        assert [r.args_hash for r in guard.detector.history()] == [
            _outcome_py.hash_call("read", args)
        ], twin

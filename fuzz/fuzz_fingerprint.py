"""Fuzz target: the fingerprint and outcome twins agree byte for byte and never raise.

Hypothesis generates *recipes* — plain nested tuples, printable and shrinkable
— and :func:`build` turns each into the value it describes: nested containers,
cycles, deep nesting, str/int/float/bytes subclasses whose methods raise,
objects whose ``__class__`` lies or raises, classes whose metaclass,
``__module__`` or ``__qualname__`` is hostile, exceptions whose ``__str__``
raises, dict keys that collide with the rule keys and raise on ``__eq__``,
mappings that raise on access, buffers (``array.array``, ``memoryview``,
``mmap``) and numpy arrays. Then (SPEC §2, §11):

- ``fuzz_encode``: every fingerprint twin's ``encode`` returns the same bytes
  and ``fingerprint`` is xxh3-64 of the domain and those bytes, plain and in
  the nonce-normalising mode (SPEC §8.5); none raises.
- ``fuzz_outcome``: ``hash_call``, ``hash_outcome`` and ``outcome_of`` of both
  outcome twins (``_outcome_py`` vs ``_outcome_c``, and the whole pure-Python
  stack vs the whole compiled one) agree and never raise, for random tool names
  and result/error shapes (tool-result dicts with content/details; exec,
  process, message, update_plan, write no-op, loop-veto and Code Mode receipt
  shapes; strings holding wrapper nonces, well-formed or not, at any depth and
  as mapping keys; a host normaliser).

Runs: ``python -m pytest tests/test_fuzz_fingerprint.py`` (a few seconds; part
of the normal suite), ``LOOPCORE_FUZZ_EXAMPLES=20000 python -m pytest
tests/test_fuzz_fingerprint.py`` for a long run, ``python
fuzz/fuzz_fingerprint.py [N]`` stand-alone, and ``python
fuzz/fuzz_fingerprint.py --atheris [libFuzzer flags]`` under atheris when it
is installed (coverage-guided, through Hypothesis's ``fuzz_one_input``).
"""

from __future__ import annotations

import array
import contextlib
import mmap
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopcore import _fingerprint_py, _outcome_py
from loopcore._twins import use_twin

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_values import (
    CLAIMS,
    CLASSES,
    ERRORS,
    SUBCLASSES,
    Boom,
    HashAs,
    HBytes,
    HDict,
    HList,
    HMapping,
    Hostile,
    Model,
    Point,
)

try:
    from loopcore import _fingerprint_c, _outcome_c
except ImportError:  # a pure-Python install: only "never raises" is checked
    ENCODERS: tuple[Any, ...] = (_fingerprint_py,)
    OUTCOMES: tuple[Any, ...] = (_outcome_py,)
    STACKS: tuple[str, ...] = ("python",)
else:
    ENCODERS = (_fingerprint_py, _fingerprint_c)
    OUTCOMES = (_outcome_py, _outcome_c)
    STACKS = ("python", "cython")

# Stand-alone, ``python fuzz/fuzz_fingerprint.py N`` sets the count too.
_CLI_COUNT = (
    sys.argv[1] if __name__ == "__main__" and sys.argv[1:2] not in ([], ["--atheris"]) else ""
)
EXAMPLES = int(os.environ.get("LOOPCORE_FUZZ_EXAMPLES") or _CLI_COUNT or "150")
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
DOMAIN = b"loopcore:fuzz\x00"


# ---- recipes -------------------------------------------------------------------


def _wrapped(nonce: str, body: str, run: int, close: str) -> str:
    b = "\\" * run
    return (
        f'<<<EXTERNAL_UNTRUSTED_CONTENT id={b}"{nonce}{b}">>>{body}'
        f'<<<END_EXTERNAL_UNTRUSTED_CONTENT id={b}"{close}{b}">>>'
    )


# Texts holding SPEC §8.5 wrappers: fresh or zero nonces, backslash runs of one
# JSON depth or not, quotes escaped to the depth or not, ids that differ, halves.
NONCES = st.sampled_from(["9f3a0c1d2b4e5f60", "0" * 16, "0123456789abcdef", "ABCDEF0123456789"])
WRAPPED = st.builds(
    _wrapped,
    NONCES,
    st.sampled_from(["", 'a "q"', 'a \\"q\\"', "\n<<<", "took 5ms, pid 7"]),
    st.sampled_from([0, 1, 2, 3, 7]),
    NONCES,
) | st.sampled_from(
    [
        '<<<EXTERNAL_UNTRUSTED_CONTENT id="9f3a0c1d2b4e5f60">>>half',
        '<<<END_EXTERNAL_UNTRUSTED_CONTENT id="9f3a0c1d2b4e5f60">>>',
        "(Command exited with code 1)",
        "2026-03-01T10:00:00Z attempt 3 failed after 12ms",
    ]
)
TEXT = st.text(st.characters(codec=None) | st.characters(categories=["Cs"]), max_size=12) | WRAPPED
SCALAR = st.one_of(
    st.tuples(st.just("none")),
    st.tuples(st.just("bool"), st.booleans()),
    st.tuples(st.just("int"), st.integers() | st.integers(-(2**80), 2**80)),
    st.tuples(st.just("float"), st.floats()),
    st.tuples(st.just("str"), TEXT | st.sampled_from(["content", "details", "action", "status"])),
    st.tuples(st.just("bytes"), st.binary(max_size=12)),
)
COLLIDING = st.tuples(
    st.just("hashas"), st.sampled_from(["content", "details", "action", "status", "type", "text"])
)
HASHABLE = (
    SCALAR
    | COLLIDING
    | st.one_of(
        st.tuples(st.just("sub"), st.sampled_from(sorted(SUBCLASSES)), st.integers(0, 300)),
        st.tuples(
            st.just("hostile"),
            st.frozensets(st.sampled_from(["class-raises", "repr-raises", "repr-hstr"])),
            st.sampled_from(sorted(CLAIMS)),
            st.integers(0, 2**16),
        ),
    )
)
NUMPY_DTYPES = ["u1", "i2", "<i4", ">i4", "f4", "f8", "c16", "?", "U3", "S2", "M8[s]", "O"]
LEAF = HASHABLE | st.one_of(
    st.tuples(st.just("bytearray"), st.binary(max_size=12)),
    st.tuples(st.just("class"), st.sampled_from(sorted(CLASSES))),
    st.tuples(st.just("error"), st.sampled_from(sorted(ERRORS)), TEXT),
    st.tuples(st.just("hostile-as-error"), st.sampled_from(sorted(CLAIMS))),
    st.tuples(
        st.just("array"),
        st.sampled_from("bBhHiIlLqQfd"),
        st.lists(st.integers(0, 120), max_size=8),
    ),
    st.tuples(st.just("memoryview"), st.binary(max_size=16), st.sampled_from(["", "B", "slice"])),
    st.tuples(st.just("mmap"), st.binary(min_size=1, max_size=32), st.booleans()),
    st.tuples(
        st.just("ndarray"),
        st.sampled_from(NUMPY_DTYPES),
        st.lists(st.integers(0, 3), max_size=3),
        st.integers(0, 2**32 - 1),
        st.sampled_from(["c", "T", "step", "scalar"]),
    ),
    st.tuples(st.just("hmapping")),
)


def _containers(
    children: st.SearchStrategy[Any], keys: st.SearchStrategy[Any]
) -> st.SearchStrategy[Any]:
    items = st.lists(children, max_size=5)
    return st.one_of(
        st.tuples(st.sampled_from(["list", "tuple", "hlist"]), items),
        st.tuples(
            st.sampled_from(["dict", "hdict"]), st.lists(st.tuples(keys, children), max_size=5)
        ),
        st.tuples(st.sampled_from(["set", "frozenset"]), st.lists(keys, max_size=5)),
        st.tuples(st.just("dataclass"), children, children),
        st.tuples(st.just("model"), st.sampled_from(["ok", "raise", "hostile"]), children),
        st.tuples(st.just("cycle"), st.sampled_from(["list", "dict", "dataclass"]), children),
        st.tuples(
            st.just("deep"), st.integers(250, 300), st.sampled_from(["list", "dict"]), children
        ),
    )


def _values(keys: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(LEAF, lambda children: _containers(children, keys), max_leaves=25)


VALUE = _values(HASHABLE)


def _ndarray(dtype: str, shape: list[int], seed: int, view: str) -> Any:
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=max(1, int(np.prod(shape or [1]))) * 16, dtype=np.uint8)
    if dtype == "O":
        objects = np.empty(2, dtype=object)
        objects[0] = Hostile(frozenset(), None, seed)
        objects[1] = seed
        return objects
    if dtype.startswith("M8"):
        base = (raw.view("<i8")[: int(np.prod(shape or [1]))] % 10**9).astype(dtype)
    else:
        count = int(np.prod(shape or [1]))
        base = np.frombuffer(raw.tobytes(), dtype=np.dtype(dtype), count=count)
        if base.dtype.kind == "f" or base.dtype.kind == "c":
            base = np.nan_to_num(base)
    base = base.reshape(shape)
    if view == "T":
        return base.T
    if view == "step" and base.ndim:
        return base[::2]
    if view == "scalar":
        return base.reshape(-1)[0] if base.size else base
    return base


def build(recipe: Any) -> Any:
    """The value a recipe describes."""
    kind = recipe[0]
    args = recipe[1:]
    if kind == "none":
        return None
    if kind in ("bool", "int", "float", "str", "bytes"):
        return args[0]
    if kind == "sub":
        cls = SUBCLASSES[args[0]]
        return cls(args[1]) if cls is not HBytes else HBytes(bytes([args[1] % 256]))
    if kind == "hashas":
        return HashAs(args[0])
    if kind == "hostile":
        return Hostile(args[0], CLAIMS[args[1]], args[2])
    if kind == "bytearray":
        return bytearray(args[0])
    if kind == "class":
        return CLASSES[args[0]]()
    if kind == "error":
        return ERRORS[args[0]](args[1], Hostile(frozenset(), None, 7))
    if kind == "hostile-as-error":
        return Hostile(frozenset(["repr-hstr"]), CLAIMS[args[0]] or BaseException, 3)
    if kind == "array":
        code, values = args
        return array.array(code, values)
    if kind == "memoryview":
        data, how = args
        view = memoryview(bytearray(data))
        if how == "slice":
            return view[::2]
        return view.cast(how) if how else view
    if kind == "mmap":
        data, closed = args
        region = mmap.mmap(-1, len(data))
        region.write(data)
        if closed:
            region.close()
        return region
    if kind == "ndarray":
        return _ndarray(*args)
    if kind == "hmapping":
        return HMapping()
    if kind in ("list", "tuple", "hlist"):
        items = [build(r) for r in args[0]]
        return {"list": list, "tuple": tuple, "hlist": HList}[kind](items)
    if kind in ("dict", "hdict"):
        pairs: dict[Any, Any] = {}
        for key, value in args[0]:
            _insert(pairs, build(key), build(value))
        return pairs if kind == "dict" else HDict(pairs)
    if kind in ("set", "frozenset"):
        elements: dict[Any, Any] = {}
        for element in args[0]:
            _insert(elements, build(element), None)
        return (set if kind == "set" else frozenset)(elements)
    if kind == "dataclass":
        return Point(build(args[0]), build(args[1]))
    if kind == "model":
        return Model({"inner": build(args[1])}, args[0])
    if kind == "cycle":
        how, inner = args
        value = build(inner)
        if how == "list":
            loop: list[Any] = [value]
            loop.append(loop)
            return loop
        if how == "dict":
            node: dict[str, Any] = {"v": value}
            node["self"] = node
            return node
        point = Point(value)
        point.y = [point]
        return point
    if kind == "deep":
        levels, how, inner = args
        value = build(inner)
        for _ in range(levels):
            value = [value] if how == "list" else {"k": value}
        return value
    raise AssertionError(f"unknown recipe {kind!r}")


def _insert(target: dict[Any, Any], key: Any, value: Any) -> None:
    # A key whose __hash__ raises, or that collides with one whose __eq__
    # raises, cannot be a key at all: the recipe simply loses it.
    with contextlib.suppress(Boom):
        target[key] = value


# ---- properties -----------------------------------------------------------------


def check_encoders(value: Any) -> None:
    encodings = [encoder.encode(value) for encoder in ENCODERS]
    assert all(type(e) is bytes for e in encodings)
    assert all(e == encodings[0] for e in encodings), "fingerprint twins disagree"
    expected = xxhash.xxh3_64_intdigest(DOMAIN + encodings[0])
    for encoder in ENCODERS:
        assert encoder.fingerprint(value, DOMAIN) == expected
    normalised = [encoder.encode(value, nonces=True) for encoder in ENCODERS]
    assert all(e == normalised[0] for e in normalised), "nonce-mode encodings disagree"
    expected = xxhash.xxh3_64_intdigest(DOMAIN + normalised[0])
    for encoder in ENCODERS:
        assert encoder.fingerprint(value, DOMAIN, nonces=True) == expected


TOOL_NAMES = [
    "exec",
    "process",
    "message",
    "update_plan",
    "sessions_send",
    "read",
    "notify",
    "write",
    "wait",
    "shaped",
]
TOOLS = st.sampled_from([*TOOL_NAMES, "command_status"]) | st.text(max_size=8)
STATUSES = st.sampled_from(
    ["running", "completed", "failed", "approval-pending", "blocked", "sent", "other"]
)
EXIT_CODES = st.tuples(
    st.just("float"), st.sampled_from([1.0, 2.5, -1.0, 0.0, float("nan"), float("inf"), 1e21])
) | st.tuples(st.just("int"), st.sampled_from([1, 0, -3, 2**70, 10**400]))


def _details(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    exec_like = st.fixed_dictionaries(
        {"status": st.tuples(st.just("str"), STATUSES)},
        optional={
            "exitCode": values | EXIT_CODES,
            "changed": values | st.just(("bool", False)),
            "aggregated": values,
            "tail": values,
            "timedOut": values,
            "deniedReason": st.just(("str", "tool-loop")),
            "messageId": values,
            "plan": st.tuples(st.just("list"), st.lists(values, max_size=3)),
            "explanation": values,
        },
    )
    return exec_like.map(lambda d: ("dict", [(("str", k), v) for k, v in d.items()])) | values


def _content(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    entry = st.fixed_dictionaries(
        {"type": st.just(("str", "text")), "text": st.tuples(st.just("str"), TEXT) | values}
    ).map(lambda d: ("dict", [(("str", k), v) for k, v in d.items()]))
    return st.tuples(st.sampled_from(["list", "tuple"]), st.lists(entry | values, max_size=3))


_PENDING_CALL = st.fixed_dictionaries(
    {},
    optional={
        "method": st.tuples(st.just("str"), st.sampled_from(["read", "grep"])),
        "args": VALUE,
        "settled": st.tuples(st.just("bool"), st.booleans()) | VALUE,
        "id": VALUE,
    },
).map(lambda d: ("dict", [(("str", k), v) for k, v in d.items()]))
RECEIPT = st.fixed_dictionaries(
    {"status": st.tuples(st.just("str"), TEXT) | VALUE},
    optional={
        "value": VALUE,
        "telemetry": VALUE,
        "runId": VALUE,
        "pending": VALUE,
        "pendingToolCalls": st.tuples(
            st.sampled_from(["list", "tuple"]), st.lists(_PENDING_CALL | VALUE, max_size=3)
        )
        | VALUE,
    },
).map(lambda d: ("dict", [(("str", k), v) for k, v in d.items()]))
VETO_RESULT = st.just(
    (
        "dict",
        [
            (
                ("str", "details"),
                (
                    "dict",
                    [
                        (("str", "status"), ("str", "blocked")),
                        (("str", "deniedReason"), ("str", "tool-loop")),
                    ],
                ),
            )
        ],
    )
)
RESULT = st.one_of(
    VALUE,
    RECEIPT,
    VETO_RESULT,
    st.tuples(
        st.sampled_from(["dict", "hdict"]),
        st.lists(
            st.tuples(st.just("str"), st.sampled_from(["content", "details"])).flatmap(
                lambda key: st.tuples(
                    st.just(key),
                    _content(VALUE) if key[1] == "content" else _details(VALUE),
                )
            )
            | st.tuples(HASHABLE, VALUE),
            max_size=3,
        ),
    ),
)
ARGS = VALUE | st.tuples(
    st.just("dict"),
    st.lists(
        st.tuples(
            st.just(("str", "action")),
            st.tuples(st.just("str"), st.sampled_from(["poll", "log", "send", "reply", "x"])),
        )
        | st.tuples(HASHABLE, VALUE),
        max_size=3,
    ),
)
ERROR = (
    st.none()
    | VALUE
    | st.tuples(
        st.just("str"), st.sampled_from(["unknown tool: Ghost", "tool `x.y` not found", "boom"])
    )
)


def _as_is(args: Any, result: Any) -> Any:
    # A host normaliser that hands back the result itself: its output is hashed
    # through the nonce-normalising encoder, hostile values and all.
    return result


def _tool_result(details: Any, content: Any) -> Any:
    return ("dict", [(("str", "details"), details), (("str", "content"), content)])


def _fields(**fields: Any) -> st.SearchStrategy[Any]:
    return st.fixed_dictionaries({}, optional=fields).map(
        lambda d: ("dict", [(("str", k), v) for k, v in d.items()])
    )


_OUT = st.tuples(st.just("str"), TEXT | st.sampled_from(["  boom\n", "", "   "])) | VALUE
#: Tool and result drawn together: the rules that need both (terminal exec
#: failures, write no-ops, receipts) are reached often, not by chance.
SPECIAL = st.one_of(
    st.tuples(
        st.just("exec"),
        st.builds(
            _tool_result,
            _fields(
                status=st.tuples(st.just("str"), st.sampled_from(["completed", "failed"])),
                exitCode=EXIT_CODES | VALUE,
                timedOut=st.tuples(st.just("bool"), st.booleans()) | VALUE,
                aggregated=_OUT,
                pid=VALUE,
            ),
            _content(VALUE),
        ),
    ),
    st.tuples(
        st.just("write"),
        st.builds(
            _tool_result,
            _fields(changed=st.tuples(st.just("bool"), st.booleans()) | VALUE, path=VALUE),
            _content(VALUE),
        ),
    ),
    st.tuples(st.sampled_from(["exec", "wait"]), RECEIPT),
)


def _outcomes(twin: str, module: Any, tool: str, args: Any, result: Any, error: Any) -> Any:
    with use_twin(twin):
        call = module.hash_call(tool, args)
        kwargs: dict[str, Any] = {"send_tools": ("notify",), "normalizers": {"shaped": _as_is}}
        outcome = module.hash_outcome(tool, args, result=result, **kwargs)
        failed = module.hash_outcome(tool, args, error=error, **kwargs)
        both = module.hash_outcome(tool, args, result=result, error=error, **kwargs)
        full = module.outcome_of(tool, args, result=result, **kwargs)
        full_failed = module.outcome_of(tool, args, error=error, **kwargs)
    assert type(call) is int
    assert 0 <= call < 2**64
    assert (full[0], full[1]) == outcome
    assert (full_failed[0], full_failed[1]) == failed
    assert full[2] in (0, 1, 2)
    assert (full[3] is None) == (full[2] != 2)
    return call, outcome, failed, both, full, full_failed


def check_outcomes(tool: str, args: Any, result: Any, error: Any) -> None:
    seen = {
        (twin, module.IMPLEMENTATION): _outcomes(twin, module, tool, args, result, error)
        for twin in STACKS
        for module in OUTCOMES
    }
    first = next(iter(seen.values()))
    assert all(v == first for v in seen.values()), f"outcome twins disagree: {seen}"


@FUZZ_SETTINGS
@given(VALUE)
def fuzz_encode(recipe: Any) -> None:
    value = build(recipe)
    _reported(check_encoders, value)
    _reported(check_encoders, [value, {"wrapped": (value,)}])


@FUZZ_SETTINGS
@given(TOOLS, ARGS, RESULT, ERROR)
def fuzz_outcome(tool: str, args: Any, result: Any, error: Any) -> None:
    values = (build(args), build(result), None if error is None else build(error))
    _reported(check_outcomes, tool, *values)


@FUZZ_SETTINGS
@given(SPECIAL, ARGS, ERROR)
def fuzz_special_outcome(special: Any, args: Any, error: Any) -> None:
    tool, result = special
    values = (build(args), build(result), None if error is None else build(error))
    _reported(check_outcomes, tool, *values)


def _reported(check: Any, *values: Any) -> None:
    """``check(*values)``, any failure re-raised with a plain-text traceback.

    A test runner that renders the failing frames' arguments would call the
    hostile values' own ``repr``/``__format__`` and fail to report at all;
    the recipe, which Hypothesis prints, is what reproduces the failure.
    """
    try:
        check(*values)
    except Exception as exc:
        try:
            text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        except Exception:
            text = type(exc).__name__
        raise AssertionError(f"{check.__name__} failed:\n{text}") from None


def main(argv: list[str]) -> None:
    if argv[1:2] == ["--atheris"]:
        import atheris  # type: ignore[import-not-found]

        def one_input(data: bytes) -> None:
            fuzz_encode.hypothesis.fuzz_one_input(data)
            fuzz_outcome.hypothesis.fuzz_one_input(data)
            fuzz_special_outcome.hypothesis.fuzz_one_input(data)

        atheris.Setup([argv[0], *argv[2:]], one_input)
        atheris.Fuzz()
        return
    fuzz_encode()
    fuzz_outcome()
    fuzz_special_outcome()
    print(
        f"fuzz_fingerprint: {EXAMPLES} examples each, twins {[e.IMPLEMENTATION for e in ENCODERS]}"
    )


if __name__ == "__main__":
    main(sys.argv)

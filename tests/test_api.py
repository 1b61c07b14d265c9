"""The public API of issue 2's table: names, signatures and the implementation switch."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

import loopcore
from loopcore import UNSET
from loopcore._percall_py import UNSCOPED

from .conftest import EXTENSIONS_DISABLED, EXTENSIONS_EXPECTED, compiled_present

# Runs on both twins (see conftest).
pytestmark = pytest.mark.usefixtures("twin")

P = inspect.Parameter
KW = P.KEYWORD_ONLY
POS = P.POSITIONAL_OR_KEYWORD
EMPTY = P.empty

SCOPE = [("session", KW, None), ("run_id", KW, None)]
# A guard's scope keywords default to the active scope() (SPEC §9.2).
ACTIVE = [("session", KW, UNSCOPED), ("run_id", KW, UNSCOPED)]
# record_outcome and after_call take the same arguments (and a validation flag).
OUTCOME_ARGS = [
    ("self", POS, EMPTY),
    ("tool_name", POS, EMPTY),
    ("args", POS, EMPTY),
    ("result", KW, UNSET),
    ("error", KW, UNSET),
    ("tool_call_id", KW, None),
]
OUTCOME = [*OUTCOME_ARGS, *SCOPE, ("validation_failure", KW, False)]

# (callable, [(name, kind, default), ...]) exactly as issue 2's table gives them.
SIGNATURES: list[tuple[Callable[..., Any], list[tuple[str, Any, Any]]]] = [
    (loopcore.hash_call, [("tool_name", POS, EMPTY), ("args", POS, EMPTY)]),
    (
        loopcore.hash_outcome,
        [
            ("tool_name", POS, EMPTY),
            ("args", POS, EMPTY),
            ("result", KW, UNSET),
            ("error", KW, UNSET),
            ("normalizers", KW, None),
            ("send_tools", KW, ()),
        ],
    ),
    (
        loopcore.LoopDetector,
        [
            ("config", POS, None),
            ("normalizers", KW, None),
            ("send_tools", KW, ()),
            ("max_scopes", KW, 100_000),
            ("store", KW, None),
        ],
    ),
    (
        loopcore.LoopDetector.check,
        [("self", POS, EMPTY), ("tool_name", POS, EMPTY), ("args", POS, EMPTY), *SCOPE],
    ),
    (
        loopcore.LoopDetector.record_call,
        [
            ("self", POS, EMPTY),
            ("tool_name", POS, EMPTY),
            ("args", POS, EMPTY),
            ("tool_call_id", POS, None),
            *SCOPE,
        ],
    ),
    (
        loopcore.LoopDetector.record_outcome,
        OUTCOME,
    ),
    (loopcore.LoopDetector.history, [("self", POS, EMPTY), *SCOPE]),
    (loopcore.LoopDetector.end_run, [("self", POS, EMPTY), *SCOPE]),
    (loopcore.LoopDetector.end_session, [("self", POS, EMPTY), ("session", POS, EMPTY)]),
    (
        loopcore.ToolLoopGuard,
        [
            ("config", POS, None),
            ("normalizers", KW, None),
            ("send_tools", KW, ()),
            ("on_event", KW, None),
            ("max_scopes", KW, 100_000),
            ("store", KW, None),
            ("mode", KW, None),
        ],
    ),
    (
        loopcore.ToolLoopGuard.before_call,
        [
            ("self", POS, EMPTY),
            ("tool_name", POS, EMPTY),
            ("args", POS, EMPTY),
            ("tool_call_id", KW, None),
            *ACTIVE,
        ],
    ),
    (
        loopcore.ToolLoopGuard.after_call,
        [*OUTCOME_ARGS, *ACTIVE],
    ),
    (loopcore.ToolLoopGuard.arm_post_compaction, [("self", POS, EMPTY), *ACTIVE]),
    (loopcore.ToolLoopGuard.end_run, [("self", POS, EMPTY), *ACTIVE]),
    (loopcore.ToolLoopGuard.end_session, [("self", POS, EMPTY), ("session", POS, EMPTY)]),
    (loopcore.ToolLoopGuard.wrap, [("self", POS, EMPTY), ("fn", POS, None), ("name", KW, None)]),
    (
        loopcore.PostCompactionGuard,
        [("window_size", POS, 3), ("enabled", POS, True)],
    ),
    (
        loopcore.PostCompactionGuard.observe,
        [
            ("self", POS, EMPTY),
            ("tool_name", POS, EMPTY),
            ("args_hash", POS, EMPTY),
            ("result_hash", POS, EMPTY),
        ],
    ),
    (loopcore.resolve_config, [("global_block", POS, None), ("agent_block", POS, None)]),
    (loopcore.load_config, [("source", POS, EMPTY), ("agent_id", POS, None)]),
]


@pytest.mark.parametrize(
    ("fn", "expected"), SIGNATURES, ids=[fn.__qualname__ for fn, _ in SIGNATURES]
)
def test_signature_matches_the_contract(
    fn: Callable[..., Any], expected: list[tuple[str, Any, Any]]
) -> None:
    params = [
        (p.name, p.kind, p.default)
        for p in inspect.signature(fn).parameters.values()
        if not p.name.startswith("_")
    ]
    assert params == expected


@pytest.mark.parametrize(
    ("make", "names"),
    [
        (loopcore.LoopDetector, ["check", "record_call", "record_outcome"]),
        (loopcore.ToolLoopGuard, ["before_call", "after_call"]),
    ],
)
def test_per_call_methods_of_instances_keep_the_signatures(
    make: Callable[..., Any], names: list[str]
) -> None:
    # The compiled twin binds these on the instance; callers must not notice.
    instance = make({"enabled": True})
    for name in names:
        bound = getattr(instance, name)
        unbound = inspect.signature(getattr(type(instance), name))
        expected = [
            (p.name, p.kind, p.default) for p in unbound.parameters.values() if p.name != "self"
        ]
        got = [(p.name, p.kind, p.default) for p in inspect.signature(bound).parameters.values()]
        assert got == expected, name


@pytest.mark.parametrize(
    ("cls", "fields"),
    [
        (
            loopcore.CallRecord,
            [
                "tool_name",
                "args_hash",
                "tool_call_id",
                "session",
                "run_id",
                "timestamp",
                "result_hash",
                "unknown_tool_name",
                "outcome_kind",
                "failure_identity_hash",
                "no_progress",
            ],
        ),
        (
            loopcore.Verdict,
            [
                "stuck",
                "level",
                "detector",
                "count",
                "message",
                "paired_tool_name",
                "warning_key",
                "liveness_signal",
            ],
        ),
        (
            loopcore.LoopEvent,
            [
                "kind",
                "session",
                "run_id",
                "tool_name",
                "detector",
                "level",
                "count",
                "message",
                "paired_tool_name",
                "terminal",
                "tool_call_id",
                "shadow",
            ],
        ),
        (
            loopcore.GuardVerdict,
            [
                "should_abort",
                "armed",
                "remaining_attempts",
                "detector",
                "count",
                "tool_name",
                "message",
            ],
        ),
        (
            loopcore.LoopDetectionConfig,
            [
                "enabled",
                "history_size",
                "warning_threshold",
                "critical_threshold",
                "unknown_tool_threshold",
                "global_circuit_breaker_threshold",
                "detectors",
                "post_compaction_guard",
                "turn_limit",
                "max_consecutive_error_batches",
                "max_idle_repeat_calls",
                "mode",
            ],
        ),
        (
            loopcore.DetectorSwitches,
            ["generic_repeat", "known_poll_no_progress", "ping_pong", "argument_churn"],
        ),
        (loopcore.PostCompactionGuardConfig, ["window_size"]),
    ],
)
def test_record_types_have_the_contract_fields(cls: type, fields: list[str]) -> None:
    import dataclasses

    if dataclasses.is_dataclass(cls):
        assert [f.name for f in dataclasses.fields(cls)] == fields
    else:  # a NamedTuple (cheap to build on the per-call path)
        assert list(cls._fields) == fields  # type: ignore[attr-defined]


def test_decision_has_the_contract_fields() -> None:
    assert list(loopcore.Decision._fields) == [
        "blocked",
        "reason",
        "verdict",
        "warning",
        "terminal",
        "result_text",
        "model_note",
        "liveness_signal",
        "would_block",
        "tool_name",
        "tool_call_id",
        "args_hash",
    ]


def test_every_public_name_is_exported() -> None:
    for name in loopcore.__all__:
        assert getattr(loopcore, name) is not None, name
    assert issubclass(loopcore.ConfigError, ValueError)
    assert issubclass(loopcore.ToolLoopBlocked, Exception)
    assert issubclass(loopcore.CompactionLoopPersisted, Exception)
    assert loopcore.CompactionLoopPersisted.detector == "compaction_loop_persisted"
    assert repr(loopcore.UNSET) == "UNSET"


def test_implementation_reports_the_loaded_core() -> None:
    if EXTENSIONS_DISABLED:
        expected = "python"
    elif EXTENSIONS_EXPECTED:
        expected = "cython"  # a build that silently lost its extension fails here
    else:
        expected = "cython" if compiled_present() else "python"
    assert expected == loopcore.IMPLEMENTATION


def test_no_extensions_variable_selects_the_python_twins() -> None:
    code = (
        "import loopcore, loopcore._fingerprint as f, loopcore._ring as r, loopcore._outcome as o;"
        "print(loopcore.IMPLEMENTATION, f.fingerprint.__module__, r.RingStore.__module__,"
        " o.hash_outcome.__module__, type(loopcore.LoopDetector()).__mro__[1].__module__)"
    )
    env = {**os.environ, "LOOPCORE_NO_EXTENSIONS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [
        "python",
        "loopcore._fingerprint_py",
        "loopcore._ring_py",
        "loopcore._outcome_py",
        "loopcore._percall_py",
    ]

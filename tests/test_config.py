"""SPEC §1: the ``tools.loopDetection`` block, its validation, repair, overlay and loading."""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore import (
    ConfigError,
    DetectorSwitches,
    LoopDetectionConfig,
    LoopDetector,
    PostCompactionGuardConfig,
    ToolLoopGuard,
    load_config,
    resolve_config,
)
from loopcore._config import load_block, overlay, with_setting, with_settings

from .conftest import loopcore_records

ROOT = "tools.loopDetection"

# (snake_case attribute, camelCase key as users write it)
THRESHOLDS = [
    ("history_size", "historySize"),
    ("warning_threshold", "warningThreshold"),
    ("critical_threshold", "criticalThreshold"),
    ("unknown_tool_threshold", "unknownToolThreshold"),
    ("global_circuit_breaker_threshold", "globalCircuitBreakerThreshold"),
]
SWITCHES = [
    ("generic_repeat", "genericRepeat"),
    ("known_poll_no_progress", "knownPollNoProgress"),
    ("ping_pong", "pingPong"),
    ("argument_churn", "argumentChurn"),
]
# The run-loop cutoffs of SPEC §8.11: optional positive integers.
CUTOFFS = [
    ("turn_limit", "turnLimit"),
    ("max_consecutive_error_batches", "maxConsecutiveErrorBatches"),
    ("max_idle_repeat_calls", "maxIdleRepeatCalls"),
]
# Values that are not positive integers; bool is excluded on purpose even though it is an int.
BAD_THRESHOLDS = [0, -3, True, False, 1.5, 10.0, "10", None, [10]]
BAD_SWITCHES = ["yes", 1, 0, None, "true"]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name.split(".")[0] == "loopcore" and r.levelno == logging.WARNING
    ]


def _config_error(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as info:
        fn(*args, **kwargs)
    return str(info.value)


def _assert_names_value(message: str, bad: object) -> None:
    # Scalars must appear as written; a container may be described by its type instead of
    # being dumped whole into the message.
    if bad is None or isinstance(bad, (str, int, float)):
        assert str(bad) in message or repr(bad) in message, message
    else:
        assert type(bad).__name__ in message or repr(bad) in message, message


def _write(tmp_path: Path, text: str, name: str = "openclaw.json5") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------
# Defaults and shape


def test_defaults_match_spec_table() -> None:
    cfg = LoopDetectionConfig()
    assert cfg.enabled is None
    assert cfg.history_size == 30
    assert cfg.warning_threshold == 10
    assert cfg.critical_threshold == 20
    assert cfg.unknown_tool_threshold == 10
    assert cfg.global_circuit_breaker_threshold == 30
    assert cfg.detectors == DetectorSwitches()
    assert cfg.detectors.generic_repeat is True
    assert cfg.detectors.known_poll_no_progress is True
    assert cfg.detectors.ping_pong is True
    assert cfg.post_compaction_guard == PostCompactionGuardConfig()
    assert cfg.post_compaction_guard.window_size == 3


def test_dataclass_fields_are_snake_case() -> None:
    assert {f.name for f in dataclasses.fields(LoopDetectionConfig)} == {
        "enabled",
        *(snake for snake, _ in THRESHOLDS),
        "detectors",
        "post_compaction_guard",
        *(snake for snake, _ in CUTOFFS),
        "mode",
    }
    assert {f.name for f in dataclasses.fields(DetectorSwitches)} == {s for s, _ in SWITCHES}
    assert {f.name for f in dataclasses.fields(PostCompactionGuardConfig)} == {"window_size"}


def test_default_construction_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        LoopDetectionConfig()
        LoopDetectionConfig.from_mapping({})
    assert _warnings(caplog) == []


@pytest.mark.parametrize(
    "instance",
    [LoopDetectionConfig(), DetectorSwitches(), PostCompactionGuardConfig()],
    ids=["LoopDetectionConfig", "DetectorSwitches", "PostCompactionGuardConfig"],
)
def test_config_dataclasses_are_frozen(instance: object) -> None:
    name = dataclasses.fields(instance)[0].name  # type: ignore[arg-type]
    before = getattr(instance, name)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(instance, name, before)
    assert getattr(instance, name) == before


def test_config_error_is_value_error() -> None:
    assert issubclass(ConfigError, ValueError)
    with pytest.raises(ValueError, match="historySize"):
        LoopDetectionConfig.from_mapping({"historySize": 0})


def test_explicit_values_are_kept() -> None:
    cfg = LoopDetectionConfig(
        enabled=True,
        history_size=50,
        warning_threshold=4,
        critical_threshold=9,
        unknown_tool_threshold=2,
        global_circuit_breaker_threshold=40,
        detectors=DetectorSwitches(
            generic_repeat=False, known_poll_no_progress=True, ping_pong=False
        ),
        post_compaction_guard=PostCompactionGuardConfig(window_size=5),
    )
    assert cfg.enabled is True
    assert (cfg.history_size, cfg.warning_threshold, cfg.critical_threshold) == (50, 4, 9)
    assert (cfg.unknown_tool_threshold, cfg.global_circuit_breaker_threshold) == (2, 40)
    assert cfg.detectors.generic_repeat is False
    assert cfg.detectors.known_poll_no_progress is True
    assert cfg.detectors.ping_pong is False
    assert cfg.post_compaction_guard.window_size == 5


# ---------------------------------------------------------------------------
# from_mapping


FULL_CAMEL: dict[str, Any] = {
    "enabled": False,
    "historySize": 60,
    "warningThreshold": 5,
    "criticalThreshold": 15,
    "unknownToolThreshold": 4,
    "globalCircuitBreakerThreshold": 45,
    "detectors": {"genericRepeat": False, "knownPollNoProgress": False, "pingPong": True},
    "postCompactionGuard": {"windowSize": 7},
}
FULL_SNAKE: dict[str, Any] = {
    "enabled": False,
    "history_size": 60,
    "warning_threshold": 5,
    "critical_threshold": 15,
    "unknown_tool_threshold": 4,
    "global_circuit_breaker_threshold": 45,
    "detectors": {"generic_repeat": False, "known_poll_no_progress": False, "ping_pong": True},
    "post_compaction_guard": {"window_size": 7},
}
FULL_EXPECTED = LoopDetectionConfig(
    enabled=False,
    history_size=60,
    warning_threshold=5,
    critical_threshold=15,
    unknown_tool_threshold=4,
    global_circuit_breaker_threshold=45,
    detectors=DetectorSwitches(generic_repeat=False, known_poll_no_progress=False, ping_pong=True),
    post_compaction_guard=PostCompactionGuardConfig(window_size=7),
)


@pytest.mark.parametrize("block", [FULL_CAMEL, FULL_SNAKE], ids=["camelCase", "snake_case"])
def test_from_mapping_reads_every_field(block: dict[str, Any]) -> None:
    assert LoopDetectionConfig.from_mapping(block) == FULL_EXPECTED


def test_from_mapping_empty_block_is_defaults() -> None:
    assert LoopDetectionConfig.from_mapping({}) == LoopDetectionConfig()


def test_from_mapping_partial_nested_blocks_keep_other_defaults() -> None:
    cfg = LoopDetectionConfig.from_mapping({"detectors": {"pingPong": False}})
    assert cfg.detectors == DetectorSwitches(ping_pong=False)
    assert cfg.detectors.generic_repeat is True
    assert cfg.detectors.known_poll_no_progress is True
    assert cfg.post_compaction_guard.window_size == 3
    assert cfg.history_size == 30


def test_from_mapping_accepts_any_mapping_type() -> None:
    class Block(Mapping[str, Any]):
        def __init__(self, data: dict[str, Any]) -> None:
            self._data = data

        def __getitem__(self, key: str) -> Any:
            return self._data[key]

        def __iter__(self) -> Any:
            return iter(self._data)

        def __len__(self) -> int:
            return len(self._data)

    cfg = LoopDetectionConfig.from_mapping(Block({"historySize": 44}))
    assert cfg.history_size == 44


def test_from_mapping_rejects_camel_and_snake_of_same_key() -> None:
    message = _config_error(
        LoopDetectionConfig.from_mapping, {"historySize": 40, "history_size": 40}
    )
    assert "historySize" in message or "history_size" in message


@pytest.mark.parametrize("bad", [[1, 2], "historySize: 3", 7, (("historySize", 3),)], ids=repr)
def test_from_mapping_rejects_non_mapping_block(bad: object) -> None:
    message = _config_error(LoopDetectionConfig.from_mapping, bad)
    assert ROOT in message


@pytest.mark.parametrize("enabled", [True, False, None])
def test_enabled_accepts_bool_and_none(enabled: bool | None) -> None:
    assert LoopDetectionConfig(enabled=enabled).enabled is enabled
    assert LoopDetectionConfig.from_mapping({"enabled": enabled}).enabled is enabled


# ---------------------------------------------------------------------------
# Validation


@pytest.mark.parametrize(("snake", "camel"), THRESHOLDS, ids=[c for _, c in THRESHOLDS])
@pytest.mark.parametrize("bad", BAD_THRESHOLDS, ids=repr)
def test_bad_threshold_in_mapping(snake: str, camel: str, bad: object) -> None:
    message = _config_error(LoopDetectionConfig.from_mapping, {camel: bad})
    assert f"{ROOT}.{camel}" in message
    assert "positive integer" in message
    _assert_names_value(message, bad)


@pytest.mark.parametrize(("snake", "camel"), THRESHOLDS, ids=[c for _, c in THRESHOLDS])
@pytest.mark.parametrize("bad", BAD_THRESHOLDS, ids=repr)
def test_bad_threshold_in_direct_construction(snake: str, camel: str, bad: object) -> None:
    message = _config_error(LoopDetectionConfig, **{snake: bad})
    assert f"{ROOT}.{camel}" in message
    assert "positive integer" in message
    _assert_names_value(message, bad)


def test_error_message_matches_spec_example() -> None:
    message = _config_error(LoopDetectionConfig.from_mapping, {"historySize": -3})
    assert "tools.loopDetection.historySize" in message
    assert "positive integer" in message
    assert "-3" in message
    # The wording of SPEC §11, which names the bound.
    assert (
        message
        == "tools.loopDetection.historySize: expected a positive integer up to 1000000, got -3"
    )


@pytest.mark.parametrize("bad", BAD_THRESHOLDS, ids=repr)
def test_bad_window_size_in_mapping(bad: object) -> None:
    message = _config_error(
        LoopDetectionConfig.from_mapping, {"postCompactionGuard": {"windowSize": bad}}
    )
    assert f"{ROOT}.postCompactionGuard.windowSize" in message
    assert "positive integer" in message
    _assert_names_value(message, bad)


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "3", None], ids=repr)
def test_bad_window_size_in_direct_construction(bad: object) -> None:
    message = _config_error(PostCompactionGuardConfig, window_size=bad)
    assert "windowSize" in message
    assert "positive integer" in message


@pytest.mark.parametrize(("snake", "camel"), SWITCHES, ids=[c for _, c in SWITCHES])
@pytest.mark.parametrize("bad", BAD_SWITCHES, ids=repr)
def test_detector_switch_must_be_bool(snake: str, camel: str, bad: object) -> None:
    message = _config_error(LoopDetectionConfig.from_mapping, {"detectors": {camel: bad}})
    assert f"{ROOT}.detectors.{camel}" in message
    _assert_names_value(message, bad)
    message = _config_error(DetectorSwitches, **{snake: bad})
    assert camel in message


@pytest.mark.parametrize("bad", ["yes", 1, 0, "true", 1.0], ids=repr)
def test_enabled_must_be_bool_or_none(bad: object) -> None:
    message = _config_error(LoopDetectionConfig.from_mapping, {"enabled": bad})
    assert f"{ROOT}.enabled" in message
    _assert_names_value(message, bad)
    message = _config_error(LoopDetectionConfig, enabled=bad)
    assert "enabled" in message


def test_large_thresholds_are_accepted() -> None:
    cfg = LoopDetectionConfig.from_mapping(
        {
            "historySize": 10**6,
            "warningThreshold": 1,
            "criticalThreshold": 2,
            "globalCircuitBreakerThreshold": 3,
            "unknownToolThreshold": 1,
        }
    )
    assert cfg.history_size == 10**6
    assert (cfg.warning_threshold, cfg.critical_threshold) == (1, 2)
    assert cfg.global_circuit_breaker_threshold == 3
    assert cfg.unknown_tool_threshold == 1


@pytest.mark.parametrize(
    ("block", "typo", "suggestion"),
    [
        ({"historySise": 40}, "historySise", "historySize"),
        ({"warningTreshold": 5}, "warningTreshold", "warningThreshold"),
        ({"globalCircuitBreaker": 50}, "globalCircuitBreaker", "globalCircuitBreakerThreshold"),
        ({"detector": {}}, "detector", "detectors"),
        ({"detectors": {"pingPog": False}}, "pingPog", "pingPong"),
        ({"detectors": {"genericRepeats": True}}, "genericRepeats", "genericRepeat"),
        ({"postCompactionGuard": {"windowSise": 2}}, "windowSise", "windowSize"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_unknown_key_suggests_closest(block: dict[str, Any], typo: str, suggestion: str) -> None:
    message = _config_error(LoopDetectionConfig.from_mapping, block)
    assert typo in message
    assert suggestion in message


def test_unknown_nested_key_names_its_block() -> None:
    message = _config_error(LoopDetectionConfig.from_mapping, {"detectors": {"pingPog": False}})
    assert "detectors" in message
    message = _config_error(LoopDetectionConfig.from_mapping, {"postCompactionGuard": {"size": 2}})
    assert "postCompactionGuard" in message


@pytest.mark.parametrize(
    ("block", "path"),
    [
        ({"detectors": "all"}, f"{ROOT}.detectors"),
        ({"detectors": [True, True, True]}, f"{ROOT}.detectors"),
        ({"postCompactionGuard": 3}, f"{ROOT}.postCompactionGuard"),
    ],
    ids=["detectors-str", "detectors-list", "guard-int"],
)
def test_nested_block_of_wrong_type(block: dict[str, Any], path: str) -> None:
    assert path in _config_error(LoopDetectionConfig.from_mapping, block)


# ---------------------------------------------------------------------------
# Bounds (SPEC §11, §12.6)

BOUND = 1_000_000
# Every bounded field: its dotted path, and the mapping that sets it as written.
BOUNDED = [
    *((f"{ROOT}.{camel}", (lambda v, c=camel: {c: v})) for _, camel in [*THRESHOLDS, *CUTOFFS]),
    (
        f"{ROOT}.postCompactionGuard.windowSize",
        lambda v: {"postCompactionGuard": {"windowSize": v}},
    ),
]
BOUNDED_IDS = [path.rsplit(".", 1)[1] for path, _ in BOUNDED]


def _bound_message(path: str, shown: str) -> str:
    return f"{path}: expected a positive integer up to 1000000, got {shown}"


@pytest.mark.parametrize(("path", "block"), BOUNDED, ids=BOUNDED_IDS)
def test_values_past_the_bound_are_rejected(path: str, block: Callable[[object], Any]) -> None:
    for value in (BOUND + 1, 2**63, 10**30):
        message = _config_error(LoopDetectionConfig.from_mapping, block(value))
        assert message == _bound_message(path, str(value))
    for value in (0, -3):  # the same wording below the bound
        message = _config_error(LoopDetectionConfig.from_mapping, block(value))
        assert message == _bound_message(path, str(value))


@pytest.mark.parametrize(
    ("snake", "camel"), [*THRESHOLDS, *CUTOFFS], ids=[c for _, c in [*THRESHOLDS, *CUTOFFS]]
)
def test_direct_construction_past_the_bound_is_rejected(snake: str, camel: str) -> None:
    message = _config_error(LoopDetectionConfig, **{snake: BOUND + 1})
    assert message == _bound_message(f"{ROOT}.{camel}", "1000001")
    message = _config_error(PostCompactionGuardConfig, window_size=BOUND + 1)
    assert message == _bound_message(f"{ROOT}.postCompactionGuard.windowSize", "1000001")


@pytest.mark.parametrize(("path", "block"), BOUNDED, ids=BOUNDED_IDS)
def test_values_at_the_bound_are_accepted(path: str, block: Callable[[object], Any]) -> None:
    cfg = LoopDetectionConfig.from_mapping(block(BOUND))
    assert BOUND in (*dataclasses.astuple(cfg), cfg.post_compaction_guard.window_size)


@pytest.mark.parametrize(("path", "block"), BOUNDED, ids=BOUNDED_IDS)
def test_a_huge_int_is_only_ever_a_config_error(path: str, block: Callable[[object], Any]) -> None:
    huge = 10**4999  # 5000 digits: past int-to-str's digit limit, repr() would raise
    message = _config_error(LoopDetectionConfig.from_mapping, block(huge))
    assert message == _bound_message(path, "an integer of 5000 digits")
    message = _config_error(LoopDetectionConfig.from_mapping, block(-huge))
    assert message == _bound_message(path, "a negative integer of 5000 digits")
    # The same through every entry point that validates a block.
    _config_error(resolve_config, None, block(huge))
    _config_error(load_config, {"tools": {"loopDetection": block(huge)}})
    _config_error(ToolLoopGuard, block(huge))


def test_a_huge_int_in_a_setting_is_a_config_error() -> None:
    huge = 10**4999
    message = _config_error(with_setting, None, "historySize", huge)
    assert message == _bound_message(f"{ROOT}.historySize", "an integer of 5000 digits")
    _config_error(overlay, {}, {"postCompactionGuard.windowSize": huge})
    _config_error(LoopDetectionConfig, warning_threshold=huge)


def test_a_huge_int_in_a_config_file_is_a_config_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "{tools: {loopDetection: {historySize: " + "9" * 5000 + "}}}")
    with pytest.raises(ConfigError):
        load_config(path)


def test_a_long_bad_value_is_shortened_past_40_characters() -> None:
    message = _config_error(LoopDetectionConfig.from_mapping, {"historySize": "x" * 100})
    shown = "'" + "x" * 36 + "..."
    assert message == _bound_message(f"{ROOT}.historySize", shown)
    assert len(shown) == 40
    # 39 digits are shown as written; 40 and more by their count.
    message = _config_error(LoopDetectionConfig.from_mapping, {"historySize": 10**39 - 1})
    assert message == _bound_message(f"{ROOT}.historySize", "9" * 39)
    message = _config_error(LoopDetectionConfig.from_mapping, {"historySize": 10**39})
    assert message == _bound_message(f"{ROOT}.historySize", "an integer of 40 digits")


def test_bad_values_with_lying_methods_are_described_safely() -> None:
    class Weird(int):
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

        def __lt__(self, other: object) -> bool:
            raise RuntimeError("no comparison")

    message = _config_error(LoopDetectionConfig.from_mapping, {"historySize": Weird(0)})
    assert message == _bound_message(f"{ROOT}.historySize", "0")

    class ClaimsInt:
        @property  # type: ignore[misc]
        def __class__(self) -> type:
            return int

    assert isinstance(ClaimsInt(), int)
    message = _config_error(LoopDetectionConfig.from_mapping, {"historySize": ClaimsInt()})
    assert message == _bound_message(f"{ROOT}.historySize", "ClaimsInt")


def test_an_int_subclass_setting_is_stored_as_a_plain_int() -> None:
    class Five(int):
        pass

    cfg = LoopDetectionConfig(history_size=Five(40), post_compaction_guard={"windowSize": Five(5)})
    assert type(cfg.history_size) is int
    assert cfg.history_size == 40
    assert type(cfg.post_compaction_guard.window_size) is int


def test_repaired_values_may_exceed_the_bound(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="loopcore")
    cfg = LoopDetectionConfig.from_mapping({"historySize": BOUND, "warningThreshold": BOUND})
    assert cfg.critical_threshold == BOUND + 1
    assert cfg.global_circuit_breaker_threshold == BOUND + 2
    lines = [r.getMessage() for r in _warnings(caplog)]
    assert lines == [
        f"{ROOT}.criticalThreshold (20) must exceed warningThreshold (1000000); using 1000001",
        f"{ROOT}.globalCircuitBreakerThreshold (30) must exceed criticalThreshold (1000001); "
        "using 1000002",
        f"{ROOT}.criticalThreshold (1000001) exceeds historySize (1000000): "
        "that detector can never fire",
        f"{ROOT}.globalCircuitBreakerThreshold (1000002) exceeds historySize (1000000): "
        "that detector can never fire",
    ]


def test_settings_over_a_repaired_config_keep_its_values_past_the_bound() -> None:
    cfg = LoopDetectionConfig.from_mapping({"warningThreshold": BOUND})
    # Carried over from an accepted config, a repaired value is not "as written".
    smaller = with_setting(cfg, "historySize", 50)
    assert smaller.history_size == 50
    assert smaller.critical_threshold == BOUND + 1
    assert smaller.global_circuit_breaker_threshold == BOUND + 2
    assert with_setting(cfg, "warningThreshold", 3).critical_threshold == BOUND + 1
    # A value the settings give is as written, and bounded.
    message = _config_error(with_setting, cfg, "criticalThreshold", BOUND + 1)
    assert message == _bound_message(f"{ROOT}.criticalThreshold", "1000001")
    # A mapping is as written: its values are bounded.
    block = {"warningThreshold": BOUND, "criticalThreshold": BOUND + 1}
    message = _config_error(with_setting, block, "historySize", 50)
    assert message == _bound_message(f"{ROOT}.criticalThreshold", "1000001")


AT_THE_BOUNDS = {
    "enabled": True,
    "historySize": BOUND,
    "warningThreshold": BOUND,
    "criticalThreshold": BOUND,
    "unknownToolThreshold": BOUND,
    "globalCircuitBreakerThreshold": BOUND,
    "postCompactionGuard": {"windowSize": BOUND},
    "turnLimit": BOUND,
    "maxConsecutiveErrorBatches": BOUND,
    "maxIdleRepeatCalls": BOUND,
}


def test_a_config_at_the_bounds_builds_a_working_guard(
    twin: str, caplog: pytest.LogCaptureFixture
) -> None:
    # A ring costs memory in proportion to the records it holds (SPEC §11), so a store
    # at historySize 1,000,000 holding one call is small on both twins.
    caplog.set_level(logging.WARNING, logger="loopcore")
    cfg = LoopDetectionConfig.from_mapping(AT_THE_BOUNDS)
    assert (cfg.critical_threshold, cfg.global_circuit_breaker_threshold) == (BOUND + 1, BOUND + 2)
    guard = ToolLoopGuard(cfg)
    detector = guard.detector
    assert isinstance(detector, LoopDetector)
    assert not detector.check("read", {"path": "a"}).stuck
    decision = guard.before_call("read", {"path": "a"})
    assert not decision.blocked
    assert decision.warning is None
    guard.arm_post_compaction()
    guard.after_call("read", {"path": "a"}, result="contents")
    [stored] = detector.history()
    assert stored.result_hash is not None
    assert not detector.check("read", {"path": "a"}).stuck
    assert len(_warnings(caplog)) == 4  # two repairs, two unreachable thresholds
    guard.end_run()
    assert detector.history() == []

    alone = LoopDetector(AT_THE_BOUNDS)
    assert not alone.check("read", {"path": "a"}).stuck
    alone.record_call("read", {"path": "a"})
    alone.record_outcome("read", {"path": "a"}, result="contents")
    [alone_stored] = alone.history()
    assert alone_stored.result_hash == stored.result_hash
    assert not alone.check("read", {"path": "a"}).stuck


# ---------------------------------------------------------------------------
# Ordering repair


def test_critical_not_above_warning_is_repaired(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = LoopDetectionConfig(warning_threshold=10, critical_threshold=10)
    assert cfg.warning_threshold == 10
    assert cfg.critical_threshold == 11
    assert cfg.global_circuit_breaker_threshold == 30
    records = _warnings(caplog)
    assert len(records) == 1
    assert "critical" in records[0].getMessage().lower()


def test_critical_below_warning_is_repaired_from_mapping(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = LoopDetectionConfig.from_mapping({"warningThreshold": 12, "criticalThreshold": 3})
    assert (cfg.warning_threshold, cfg.critical_threshold) == (12, 13)
    assert cfg.global_circuit_breaker_threshold == 30
    assert len(_warnings(caplog)) == 1


def test_global_not_above_critical_is_repaired(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = LoopDetectionConfig(critical_threshold=20, global_circuit_breaker_threshold=15)
    assert (cfg.warning_threshold, cfg.critical_threshold) == (10, 20)
    assert cfg.global_circuit_breaker_threshold == 21
    records = _warnings(caplog)
    assert len(records) == 1
    assert "global" in records[0].getMessage().lower()


def test_chained_repair_uses_repaired_critical(caplog: pytest.LogCaptureFixture) -> None:
    # global (8) is above the configured critical (5) but not above the repaired one (11).
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = LoopDetectionConfig(
            warning_threshold=10, critical_threshold=5, global_circuit_breaker_threshold=8
        )
    assert (cfg.warning_threshold, cfg.critical_threshold) == (10, 11)
    assert cfg.global_circuit_breaker_threshold == 12
    assert len(_warnings(caplog)) == 2


def test_chained_repair_when_global_equals_repaired_critical() -> None:
    cfg = LoopDetectionConfig(
        warning_threshold=10, critical_threshold=5, global_circuit_breaker_threshold=11
    )
    assert (cfg.critical_threshold, cfg.global_circuit_breaker_threshold) == (11, 12)


def test_all_equal_thresholds_are_spread() -> None:
    cfg = LoopDetectionConfig(
        warning_threshold=5, critical_threshold=5, global_circuit_breaker_threshold=5
    )
    assert (cfg.warning_threshold, cfg.critical_threshold) == (5, 6)
    assert cfg.global_circuit_breaker_threshold == 7


def test_ordered_thresholds_are_untouched(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = LoopDetectionConfig(
            warning_threshold=1, critical_threshold=2, global_circuit_breaker_threshold=3
        )
    assert (cfg.warning_threshold, cfg.critical_threshold) == (1, 2)
    assert cfg.global_circuit_breaker_threshold == 3
    assert _warnings(caplog) == []


def test_repair_is_not_applied_to_unknown_tool_threshold() -> None:
    # unknownToolThreshold is independent of the no-progress ladder.
    cfg = LoopDetectionConfig(unknown_tool_threshold=50, history_size=60)
    assert cfg.unknown_tool_threshold == 50
    assert (cfg.warning_threshold, cfg.critical_threshold) == (10, 20)
    assert cfg.global_circuit_breaker_threshold == 30


@given(
    warning=st.integers(min_value=1, max_value=10_000),
    critical=st.integers(min_value=1, max_value=10_000),
    breaker=st.integers(min_value=1, max_value=10_000),
)
def test_repair_always_orders_thresholds(warning: int, critical: int, breaker: int) -> None:
    cfg = LoopDetectionConfig(
        history_size=100_000,
        warning_threshold=warning,
        critical_threshold=critical,
        global_circuit_breaker_threshold=breaker,
    )
    assert cfg.warning_threshold < cfg.critical_threshold < cfg.global_circuit_breaker_threshold
    expected_critical = critical if critical > warning else warning + 1
    expected_breaker = breaker if breaker > expected_critical else expected_critical + 1
    assert cfg.warning_threshold == warning
    assert cfg.critical_threshold == expected_critical
    assert cfg.global_circuit_breaker_threshold == expected_breaker


# ---------------------------------------------------------------------------
# Unreachable thresholds


def test_threshold_above_history_size_warns_naming_field(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # warning (10) and critical (20) fit in 20 calls; only the breaker (30) cannot.
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = LoopDetectionConfig(history_size=20)
    assert cfg.global_circuit_breaker_threshold == 30
    records = _warnings(caplog)
    assert len(records) == 1
    message = records[0].getMessage()
    assert "globalCircuitBreakerThreshold" in message
    assert "warningThreshold" not in message


def test_each_unreachable_threshold_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        LoopDetectionConfig.from_mapping({"historySize": 5})
    messages = [r.getMessage() for r in _warnings(caplog)]
    assert len(messages) == 3
    for field in ("warningThreshold", "criticalThreshold", "globalCircuitBreakerThreshold"):
        assert sum(field in m for m in messages) == 1, (field, messages)


def test_threshold_equal_to_history_size_is_reachable(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        LoopDetectionConfig(history_size=30)
        LoopDetectionConfig(
            history_size=10,
            warning_threshold=8,
            critical_threshold=9,
            global_circuit_breaker_threshold=10,
        )
    assert _warnings(caplog) == []


def test_unreachable_check_runs_after_repair(caplog: pytest.LogCaptureFixture) -> None:
    # The configured critical (5) fits in 10 calls, the repaired one (11) does not.
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = LoopDetectionConfig(
            history_size=10,
            warning_threshold=10,
            critical_threshold=5,
            global_circuit_breaker_threshold=100,
        )
    assert cfg.critical_threshold == 11
    messages = [r.getMessage() for r in _warnings(caplog)]
    # Repair of critical, then unreachable critical (11 > 10) and unreachable breaker (100 > 10);
    # warning (10) is reachable, so a third warning can only be the repaired critical's.
    assert len(messages) == 3, messages
    assert sum("criticalThreshold" in m for m in messages) >= 1, messages
    assert any("globalCircuitBreakerThreshold" in m for m in messages)


# ---------------------------------------------------------------------------
# resolve_config overlay


def test_resolve_config_without_blocks_is_defaults() -> None:
    assert resolve_config() == LoopDetectionConfig()
    assert resolve_config(None, None) == LoopDetectionConfig()
    assert resolve_config({}, {}) == LoopDetectionConfig()


def test_resolve_config_global_only() -> None:
    assert resolve_config(FULL_CAMEL) == FULL_EXPECTED
    assert resolve_config(FULL_CAMEL, None) == FULL_EXPECTED
    assert resolve_config(FULL_CAMEL, {}) == FULL_EXPECTED


def test_resolve_config_agent_only_overlays_defaults() -> None:
    cfg = resolve_config(None, {"enabled": True, "historySize": 45})
    assert cfg == LoopDetectionConfig(enabled=True, history_size=45)


def test_agent_block_setting_one_field_keeps_the_rest() -> None:
    cfg = resolve_config(FULL_CAMEL, {"warningThreshold": 6})
    assert cfg == dataclasses.replace(FULL_EXPECTED, warning_threshold=6)


def test_agent_block_setting_only_enabled() -> None:
    cfg = resolve_config(FULL_CAMEL, {"enabled": True})
    assert cfg.enabled is True
    assert cfg.history_size == 60
    assert cfg.detectors == FULL_EXPECTED.detectors
    assert cfg.post_compaction_guard == FULL_EXPECTED.post_compaction_guard


def test_overlay_is_field_by_field_inside_detectors() -> None:
    cfg = resolve_config(
        {"detectors": {"pingPong": False, "knownPollNoProgress": False}},
        {"detectors": {"genericRepeat": False, "knownPollNoProgress": True}},
    )
    assert cfg.detectors == DetectorSwitches(
        generic_repeat=False, known_poll_no_progress=True, ping_pong=False
    )


def test_overlay_is_field_by_field_inside_post_compaction_guard() -> None:
    kept = resolve_config({"postCompactionGuard": {"windowSize": 5}}, {"historySize": 40})
    assert kept.post_compaction_guard.window_size == 5
    assert kept.history_size == 40
    replaced = resolve_config(
        {"postCompactionGuard": {"windowSize": 5}}, {"postCompactionGuard": {"windowSize": 2}}
    )
    assert replaced.post_compaction_guard.window_size == 2


def test_overlay_with_empty_nested_block_changes_nothing() -> None:
    cfg = resolve_config(FULL_CAMEL, {"detectors": {}, "postCompactionGuard": {}})
    assert cfg == FULL_EXPECTED


def test_overlay_mixes_camel_and_snake_case() -> None:
    cfg = resolve_config(
        {"historySize": 40}, {"warning_threshold": 4, "detectors": {"ping_pong": False}}
    )
    assert cfg.history_size == 40
    assert cfg.warning_threshold == 4
    assert cfg.detectors.ping_pong is False


def test_repair_applies_to_the_merged_block() -> None:
    # Neither block is out of order alone; the overlay is.
    cfg = resolve_config({"criticalThreshold": 12}, {"warningThreshold": 25})
    assert cfg.warning_threshold == 25
    assert cfg.critical_threshold == 26
    assert cfg.global_circuit_breaker_threshold == 30


def test_agent_block_can_undo_a_global_disable() -> None:
    cfg = resolve_config({"enabled": False}, {"enabled": True})
    assert cfg.enabled is True


def test_resolve_config_validates_both_blocks() -> None:
    assert "historySize" in _config_error(resolve_config, {"historySize": 0}, {})
    assert "historySize" in _config_error(resolve_config, {}, {"historySize": "x"})
    message = _config_error(resolve_config, {}, {"detectors": {"pingPog": True}})
    assert "pingPong" in message


# ---------------------------------------------------------------------------
# load_config

GATEWAY_JSON5 = """\
// OpenClaw gateway configuration
{
  /* global guardrails */
  tools: {
    loopDetection: {
      enabled: true,
      historySize: 40,   // keep a longer window
      warningThreshold: 8,
      detectors: { pingPong: false, },
      postCompactionGuard: { windowSize: 4 },
    },
  },
  agents: {
    list: [
      { id: 'main' },
      {
        id: "researcher",
        tools: {
          loopDetection: {
            criticalThreshold: 12,
            detectors: { genericRepeat: false },
          },
        },
      },
      { id: "coder", tools: { loopDetection: { enabled: false, }, }, },
    ],
  },
}
"""

GLOBAL_EXPECTED = LoopDetectionConfig(
    enabled=True,
    history_size=40,
    warning_threshold=8,
    detectors=DetectorSwitches(ping_pong=False),
    post_compaction_guard=PostCompactionGuardConfig(window_size=4),
)


def test_load_config_json5_global_block(tmp_path: Path) -> None:
    path = _write(tmp_path, GATEWAY_JSON5)
    assert load_config(path) == GLOBAL_EXPECTED
    assert load_config(str(path)) == GLOBAL_EXPECTED


def test_load_config_picks_agent_override_by_id(tmp_path: Path) -> None:
    path = _write(tmp_path, GATEWAY_JSON5)
    cfg = load_config(path, "researcher")
    assert cfg == dataclasses.replace(
        GLOBAL_EXPECTED,
        critical_threshold=12,
        detectors=DetectorSwitches(generic_repeat=False, ping_pong=False),
    )
    coder = load_config(path, agent_id="coder")
    assert coder == dataclasses.replace(GLOBAL_EXPECTED, enabled=False)


def test_agent_without_override_gets_global_block(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, GATEWAY_JSON5)
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = load_config(path, "main")
    assert cfg == GLOBAL_EXPECTED
    assert _warnings(caplog) == []


def test_unknown_agent_id_warns_and_uses_global(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, GATEWAY_JSON5)
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = load_config(path, "reseacher")
    assert cfg == GLOBAL_EXPECTED
    messages = [r.getMessage() for r in _warnings(caplog)]
    assert len(messages) == 1, messages
    assert "reseacher" in messages[0]
    assert "global" in messages[0].lower() or ROOT in messages[0]


def test_unknown_agent_id_without_agents_section(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = load_config({"tools": {"loopDetection": {"historySize": 44}}}, "ghost")
    assert cfg == LoopDetectionConfig(history_size=44)
    assert any("ghost" in r.getMessage() for r in _warnings(caplog))


def test_no_agent_id_does_not_warn(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        load_config(_write(tmp_path, GATEWAY_JSON5))
    assert _warnings(caplog) == []


def test_load_config_from_parsed_mapping() -> None:
    source = {
        "tools": {"loopDetection": {"historySize": 50, "detectors": {"pingPong": False}}},
        "agents": {
            "list": [
                {"id": "a", "tools": {"loopDetection": {"historySize": 70}}},
                {"id": "b", "tools": {"loopDetection": {"detectors": {"genericRepeat": False}}}},
            ]
        },
    }
    assert load_config(source) == LoopDetectionConfig(
        history_size=50, detectors=DetectorSwitches(ping_pong=False)
    )
    assert load_config(source, "a") == LoopDetectionConfig(
        history_size=70, detectors=DetectorSwitches(ping_pong=False)
    )
    assert load_config(source, "b") == LoopDetectionConfig(
        history_size=50, detectors=DetectorSwitches(generic_repeat=False, ping_pong=False)
    )


@pytest.mark.parametrize(
    "source",
    [{}, {"tools": {}}, {"agents": {"list": []}}, {"tools": {"exec": {"host": "sandbox"}}}],
    ids=["empty", "no-loopDetection", "agents-only", "other-tools"],
)
def test_missing_block_gives_defaults(source: dict[str, Any]) -> None:
    assert load_config(source) == LoopDetectionConfig()


def test_missing_block_in_file_gives_defaults(tmp_path: Path) -> None:
    assert load_config(_write(tmp_path, "// nothing configured\n{ gateway: { port: 1, }, }\n")) == (
        LoopDetectionConfig()
    )


def test_agent_override_without_global_block(tmp_path: Path) -> None:
    text = "{ agents: { list: [ { id: 'x', tools: { loopDetection: { historySize: 9, } } } ] } }"
    cfg = load_config(_write(tmp_path, text), "x")
    assert cfg.history_size == 9
    assert cfg.warning_threshold == 10


def test_missing_file_raises_config_error_naming_file(tmp_path: Path) -> None:
    path = tmp_path / "nope" / "openclaw.json5"
    message = _config_error(load_config, path)
    assert str(path) in message or "openclaw.json5" in message
    message = _config_error(load_config, str(path))
    assert str(path) in message or "openclaw.json5" in message


def test_directory_raises_config_error_naming_it(tmp_path: Path) -> None:
    directory = tmp_path / "confdir"
    directory.mkdir()
    message = _config_error(load_config, directory)
    assert "confdir" in message


def test_json5_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    text = (
        "// header\n"  # 1
        "{\n"  # 2
        "  tools: {\n"  # 3
        "    loopDetection: {\n"  # 4
        "      historySize: 40,\n"  # 5
        "      warningThreshold: 8,\n"  # 6
        "      // comment\n"  # 7
        "      criticalThreshold: 12,\n"  # 8
        "      detectors: { pingPong: @ },\n"  # 9
        "    },\n"
        "  },\n"
        "}\n"
    )
    path = _write(tmp_path, text, name="broken.json5")
    message = _config_error(load_config, path)
    assert "broken.json5" in message
    rest = message.replace(str(path), "")
    assert re.search(r"(?<![\d.])9(?!\d)", rest), message


def test_json5_without_trailing_commas_or_comments_also_loads(tmp_path: Path) -> None:
    path = _write(tmp_path, '{"tools": {"loopDetection": {"historySize": 33}}}', name="c.json")
    assert load_config(path).history_size == 33


@pytest.mark.parametrize(
    ("source", "path"),
    [
        ({"tools": {"loopDetection": [1, 2]}}, "tools.loopDetection"),
        ({"tools": {"loopDetection": "on"}}, "tools.loopDetection"),
        ({"tools": ["loopDetection"]}, "tools"),
        ({"agents": {"list": {"id": "a"}}}, "agents.list"),
        ({"agents": {"list": "a"}}, "agents.list"),
        ({"tools": {"loopDetection": {"detectors": "all"}}}, "tools.loopDetection.detectors"),
        (
            {"tools": {"loopDetection": {"postCompactionGuard": [3]}}},
            "tools.loopDetection.postCompactionGuard",
        ),
    ],
    ids=[
        "loopDetection-list",
        "loopDetection-str",
        "tools-list",
        "agents.list-dict",
        "agents.list-str",
        "detectors-str",
        "guard-list",
    ],
)
def test_wrong_typed_blocks_name_the_path(source: dict[str, Any], path: str) -> None:
    assert path in _config_error(load_config, source, "a")


def test_wrong_typed_block_in_file_names_the_path(tmp_path: Path) -> None:
    path = _write(tmp_path, "{ tools: { loopDetection: [ 'historySize', 3, ], }, }")
    assert "tools.loopDetection" in _config_error(load_config, path)


def test_root_of_wrong_type_raises_config_error(tmp_path: Path) -> None:
    _config_error(load_config, _write(tmp_path, "[1, 2, 3]"))


def test_bad_value_in_agent_block_names_agent_path() -> None:
    source = {
        "tools": {"loopDetection": {}},
        "agents": {
            "list": [
                {"id": "a"},
                {"id": "b", "tools": {"loopDetection": {"historySize": -3}}},
            ]
        },
    }
    message = _config_error(load_config, source, "b")
    assert "agents.list[1].tools.loopDetection.historySize" in message
    assert "positive integer" in message
    assert "-3" in message


def test_bad_value_in_global_block_of_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "{ tools: { loopDetection: { warningThreshold: 0, }, }, }")
    message = _config_error(load_config, path)
    assert "tools.loopDetection.warningThreshold" in message
    assert "positive integer" in message


def test_unknown_key_in_file_suggests_closest(tmp_path: Path) -> None:
    path = _write(tmp_path, "{ tools: { loopDetection: { historySise: 40 } } }")
    message = _config_error(load_config, path)
    assert "historySize" in message


def test_load_config_repairs_and_warns_once_for_agent(caplog: pytest.LogCaptureFixture) -> None:
    source = {
        "tools": {"loopDetection": {"historySize": 100}},
        "agents": {"list": [{"id": "a", "tools": {"loopDetection": {"criticalThreshold": 4}}}]},
    }
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = load_config(source, "a")
    assert (cfg.warning_threshold, cfg.critical_threshold) == (10, 11)
    assert cfg.global_circuit_breaker_threshold == 30
    assert len(_warnings(caplog)) == 1


# ---------------------------------------------------------------------------
# Consumers accept a tools.loopDetection mapping


def test_loop_detector_accepts_mapping() -> None:
    block = {"enabled": True, "historySize": 40, "detectors": {"pingPong": False}}
    detector = LoopDetector(config=block)
    assert isinstance(detector.config, LoopDetectionConfig)
    assert detector.config == LoopDetectionConfig.from_mapping(block)
    assert detector.config.history_size == 40
    assert detector.config.detectors.ping_pong is False


def test_loop_detector_accepts_config_and_none() -> None:
    cfg = LoopDetectionConfig(history_size=12)
    assert LoopDetector(config=cfg).config == cfg
    assert LoopDetector().config == LoopDetectionConfig()
    assert LoopDetector(config=None).config == LoopDetectionConfig()


@pytest.mark.parametrize(
    ("block", "fragment"),
    [
        ({"historySize": 0}, "historySize"),
        ({"historySise": 40}, "historySize"),
        ({"detectors": {"pingPong": "no"}}, "pingPong"),
        ({"enabled": "yes"}, "enabled"),
    ],
    ids=["zero", "typo", "switch", "enabled"],
)
def test_loop_detector_rejects_bad_mapping(block: dict[str, Any], fragment: str) -> None:
    assert fragment in _config_error(LoopDetector, config=block)


def test_tool_loop_guard_accepts_mapping_and_rejects_bad_one() -> None:
    guard = ToolLoopGuard(config={"warningThreshold": 3, "criticalThreshold": 6})
    assert guard.detector.config.warning_threshold == 3
    assert guard.detector.config.critical_threshold == 6
    assert "criticalThreshold" in _config_error(ToolLoopGuard, config={"criticalThreshold": -1})


def test_mapping_driven_history_size_is_used() -> None:
    detector = LoopDetector(config={"historySize": 3})
    for i in range(5):
        detector.record_call("read", {"path": f"f{i}"})
    assert len(detector.history()) == 3


# ---------------------------------------------------------------------------
# Property: any invalid threshold value is rejected with its path


_invalid_threshold = st.one_of(
    st.integers(max_value=0),
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.none(),
    st.lists(st.integers(), max_size=2),
)


@given(field=st.sampled_from(THRESHOLDS), bad=_invalid_threshold)
def test_any_invalid_threshold_is_rejected(field: tuple[str, str], bad: object) -> None:
    _, camel = field
    with pytest.raises(ConfigError) as info:
        LoopDetectionConfig.from_mapping({camel: bad})
    assert f"{ROOT}.{camel}" in str(info.value)
    assert "positive integer" in str(info.value)


def test_resolve_config_logs_each_repair_once(caplog: pytest.LogCaptureFixture) -> None:
    # A global block needing repair is resolved through an overlay; the user should still see
    # the repair reported once, not once per intermediate block.
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = resolve_config({"criticalThreshold": 4}, {"historySize": 40})
    assert (cfg.critical_threshold, cfg.history_size) == (11, 40)
    assert len(_warnings(caplog)) == 1


def test_overrides_apply_to_the_settings_as_given_in_any_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    block = {"warningThreshold": 10, "criticalThreshold": 5}  # alone, repaired to 11
    caplog.clear()
    one_way = with_settings(block, {"warningThreshold": 3, "historySize": 60})
    other_way = with_settings(block, {"historySize": 60, "warningThreshold": 3})
    assert (
        one_way
        == other_way
        == LoopDetectionConfig(warning_threshold=3, critical_threshold=5, history_size=60)
    )
    assert loopcore_records(caplog) == []  # a valid final config logs no repair
    assert overlay(block, {"detectors.pingPong": False}) == block | {
        "detectors": {"pingPong": False}
    }
    # A config object is already repaired: settings apply to its effective values.
    repaired = LoopDetectionConfig.from_mapping(block)
    assert with_setting(repaired, "warningThreshold", 3).critical_threshold == 11
    assert with_setting(None, "detectors.pingPong", False).detectors.ping_pong is False
    with pytest.raises(ConfigError, match=r"^tools\.loopDetection\.warningTreshold: unknown key"):
        with_setting(block, "warningTreshold", 3)
    with pytest.raises(ConfigError, match=r"^tools\.loopDetection\.detectors: name one setting"):
        with_setting(block, "detectors", False)
    with pytest.raises(ConfigError, match=r"^tools\.loopDetection\.historySize: has no nested"):
        with_setting(block, "historySize.x", 3)
    with pytest.raises(ConfigError, match=r"^tools\.loopDetection\.historySize: expected a pos"):
        with_setting(block, "historySize", 0)


def test_load_block_is_the_file_before_repairs(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json5"
    path.write_text(
        "{tools: {loopDetection: {warningThreshold: 10, criticalThreshold: 5}},"
        " agents: {list: [{id: 'main', tools: {loopDetection: {detectors: {pingPong: false}}}}]}}"
    )
    block = load_block(path, agent_id="main")
    assert block == {
        "warningThreshold": 10,
        "criticalThreshold": 5,
        "detectors": {"pingPong": False},
    }
    assert LoopDetectionConfig.from_mapping(block) == load_config(path, agent_id="main")
    assert with_setting(block, "warningThreshold", 3).critical_threshold == 5


# ---------------------------------------------------------------------------
# Run-loop cutoffs, mode and argumentChurn (SPEC §8.3, §8.11, §8.14, §9.5)

BAD_CUTOFFS = [v for v in BAD_THRESHOLDS if v is not None]  # null means unset here


def test_new_fields_default_to_unset_enforce_and_churn_on() -> None:
    cfg = LoopDetectionConfig()
    assert (cfg.turn_limit, cfg.max_consecutive_error_batches, cfg.max_idle_repeat_calls) == (
        None,
        None,
        None,
    )
    assert cfg.mode == "enforce"
    assert cfg.detectors.argument_churn is True
    assert cfg.run_loop_guards() == (None, None, None)


@pytest.mark.parametrize(("snake", "camel"), CUTOFFS, ids=[c for _, c in CUTOFFS])
def test_each_cutoff_reads_in_both_spellings(snake: str, camel: str) -> None:
    assert getattr(LoopDetectionConfig.from_mapping({camel: 7}), snake) == 7
    assert getattr(LoopDetectionConfig.from_mapping({snake: 8}), snake) == 8
    assert getattr(LoopDetectionConfig(**{snake: 9}), snake) == 9
    # null in a file is the same as leaving the key out
    assert getattr(LoopDetectionConfig.from_mapping({camel: None}), snake) is None
    message = _config_error(LoopDetectionConfig.from_mapping, {camel: 1, snake: 1})
    assert "given twice" in message


@pytest.mark.parametrize(("snake", "camel"), CUTOFFS, ids=[c for _, c in CUTOFFS])
@pytest.mark.parametrize("bad", BAD_CUTOFFS, ids=repr)
def test_bad_cutoff_is_rejected_naming_its_path(snake: str, camel: str, bad: object) -> None:
    message = _config_error(LoopDetectionConfig.from_mapping, {camel: bad})
    assert message.startswith(f"{ROOT}.{camel}: expected a positive integer up to 1000000, got ")
    _assert_names_value(message, bad)
    message = _config_error(LoopDetectionConfig, **{snake: bad})
    assert message.startswith(f"{ROOT}.{camel}: expected a positive integer")


@pytest.mark.parametrize(("snake", "camel"), CUTOFFS, ids=[c for _, c in CUTOFFS])
def test_cutoffs_at_below_and_above_the_bound(snake: str, camel: str) -> None:
    assert getattr(LoopDetectionConfig.from_mapping({camel: BOUND - 1}), snake) == BOUND - 1
    assert getattr(LoopDetectionConfig.from_mapping({camel: BOUND}), snake) == BOUND
    assert getattr(LoopDetectionConfig.from_mapping({camel: 1}), snake) == 1
    message = _config_error(LoopDetectionConfig.from_mapping, {camel: BOUND + 1})
    assert message == _bound_message(f"{ROOT}.{camel}", "1000001")


def test_cutoffs_are_never_repaired_and_never_warn(caplog: pytest.LogCaptureFixture) -> None:
    # A cutoff far above historySize is meaningful (it counts turns, not history).
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        cfg = LoopDetectionConfig.from_mapping(
            {"historySize": 5, "warningThreshold": 2, "criticalThreshold": 3,
             "globalCircuitBreakerThreshold": 4, "turnLimit": 900, "maxIdleRepeatCalls": 1}
        )  # fmt: skip
    assert cfg.run_loop_guards() == (900, None, 1)
    assert _warnings(caplog) == []


def test_a_cutoff_subclass_of_int_is_stored_as_a_plain_int() -> None:
    class Three(int):
        pass

    cfg = LoopDetectionConfig.from_mapping({"turnLimit": Three(3)})
    assert type(cfg.turn_limit) is int
    assert cfg.turn_limit == 3


def test_run_loop_guards_spec_example_agent_overlay() -> None:
    # SPEC §8.11: global {enabled, turnLimit 300, maxConsecutiveErrorBatches 4} + agent
    # {turnLimit 25} → 25 / 4 / None.
    source = {
        "tools": {
            "loopDetection": {"enabled": True, "turnLimit": 300, "maxConsecutiveErrorBatches": 4}
        },
        "agents": {"list": [{"id": "a", "tools": {"loopDetection": {"turnLimit": 25}}}]},
    }
    cfg = load_config(source, "a")
    assert (cfg.turn_limit, cfg.max_consecutive_error_batches, cfg.max_idle_repeat_calls) == (
        25,
        4,
        None,
    )
    assert cfg.run_loop_guards() == (25, 4, None)
    assert load_config(source).run_loop_guards() == (300, 4, None)


@pytest.mark.parametrize(
    ("enabled", "expected"),
    [(None, (5, 6, 7)), (True, (5, 6, 7)), (False, (None, None, None))],
    ids=["unset", "true", "false"],
)
def test_run_loop_guards_follow_enabled(
    enabled: bool | None, expected: tuple[int | None, ...]
) -> None:
    cfg = LoopDetectionConfig(
        enabled=enabled, turn_limit=5, max_consecutive_error_batches=6, max_idle_repeat_calls=7
    )
    assert cfg.run_loop_guards() == expected
    # the fields keep their values; only the active set is switched off
    assert (cfg.turn_limit, cfg.max_consecutive_error_batches, cfg.max_idle_repeat_calls) == (
        5,
        6,
        7,
    )


def test_enabled_true_alone_activates_no_cutoff() -> None:
    assert LoopDetectionConfig.from_mapping({"enabled": True}).run_loop_guards() == (
        None,
        None,
        None,
    )


def test_each_cutoff_is_active_on_its_own() -> None:
    assert LoopDetectionConfig(turn_limit=3).run_loop_guards() == (3, None, None)
    assert LoopDetectionConfig(max_consecutive_error_batches=3).run_loop_guards() == (
        None,
        3,
        None,
    )
    assert LoopDetectionConfig(max_idle_repeat_calls=3).run_loop_guards() == (None, None, 3)


def test_agent_enabled_false_turns_off_global_cutoffs_and_null_unsets_one() -> None:
    global_block = {"turnLimit": 10, "maxIdleRepeatCalls": 3}
    assert resolve_config(global_block, {"enabled": False}).run_loop_guards() == (
        None,
        None,
        None,
    )
    cfg = resolve_config(global_block, {"turnLimit": None})
    assert cfg.run_loop_guards() == (None, None, 3)


@pytest.mark.parametrize("mode", ["enforce", "observe"])
def test_mode_accepts_its_two_values(mode: str) -> None:
    assert LoopDetectionConfig.from_mapping({"mode": mode}).mode == mode
    assert LoopDetectionConfig(mode=mode).mode == mode  # type: ignore[arg-type]
    assert resolve_config({"mode": "observe"}, {"mode": mode}).mode == mode


@pytest.mark.parametrize("bad", ["block", "Enforce", "OBSERVE", "", None, True, 1, ["observe"]])
def test_bad_mode_is_a_config_error_naming_the_path(bad: object) -> None:
    message = _config_error(LoopDetectionConfig.from_mapping, {"mode": bad})
    assert message.startswith(f"{ROOT}.mode: expected 'enforce' or 'observe', got ")
    _assert_names_value(message, bad)
    message = _config_error(LoopDetectionConfig, mode=bad)
    assert message.startswith(f"{ROOT}.mode: ")


def test_bad_mode_message_is_exact() -> None:
    message = _config_error(LoopDetectionConfig.from_mapping, {"mode": "block"})
    assert message == "tools.loopDetection.mode: expected 'enforce' or 'observe', got 'block'"


def test_mode_a_str_subclass_is_stored_as_a_plain_str() -> None:
    class Lying(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

    assert type(LoopDetectionConfig.from_mapping({"mode": Lying("observe")}).mode) is str
    _config_error(LoopDetectionConfig.from_mapping, {"mode": Lying("nonsense")})


def test_agent_mode_overlays_the_global_mode() -> None:
    source = {
        "tools": {"loopDetection": {"mode": "observe"}},
        "agents": {"list": [{"id": "a", "tools": {"loopDetection": {"mode": "enforce"}}}]},
    }
    assert load_config(source).mode == "observe"
    assert load_config(source, "a").mode == "enforce"


def test_argument_churn_switch_overlays_field_by_field() -> None:
    cfg = resolve_config(
        {"detectors": {"argumentChurn": False}}, {"detectors": {"pingPong": False}}
    )
    assert cfg.detectors == DetectorSwitches(argument_churn=False, ping_pong=False)
    cfg = resolve_config(
        {"detectors": {"argumentChurn": False}}, {"detectors": {"argument_churn": True}}
    )
    assert cfg.detectors.argument_churn is True


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("turnLimt", "turnLimit"),
        ("maxTurns", "turnLimit"),
        ("maxConsecutiveErrorBatch", "maxConsecutiveErrorBatches"),
        ("maxIdleRepeatCall", "maxIdleRepeatCalls"),
        ("mod", "mode"),
    ],
)
def test_unknown_new_key_suggests_closest(typo: str, suggestion: str) -> None:
    message = _config_error(LoopDetectionConfig.from_mapping, {typo: 3})
    assert message.startswith(f"{ROOT}.{typo}: unknown key; did you mean {suggestion!r}?")


def test_unknown_detector_suggests_argument_churn() -> None:
    message = _config_error(
        LoopDetectionConfig.from_mapping, {"detectors": {"argumentChrun": False}}
    )
    assert "did you mean 'argumentChurn'?" in message


def test_config_mapping_carries_the_new_keys_and_round_trips() -> None:
    from loopcore._config import config_mapping

    cfg = LoopDetectionConfig.from_mapping(
        {
            "mode": "observe",
            "turnLimit": 40,
            "maxIdleRepeatCalls": 3,
            "detectors": {"argumentChurn": False},
        }
    )
    block = config_mapping(cfg)
    assert block["mode"] == "observe"
    assert (block["turnLimit"], block["maxConsecutiveErrorBatches"]) == (40, None)
    assert block["maxIdleRepeatCalls"] == 3
    assert block["detectors"]["argumentChurn"] is False
    assert LoopDetectionConfig.from_mapping(block) == cfg


def test_settings_reach_the_new_keys() -> None:
    base = LoopDetectionConfig.from_mapping({"turnLimit": 40})
    assert with_setting(base, "turnLimit", 5).turn_limit == 5
    assert with_setting(base, "maxIdleRepeatCalls", 2).run_loop_guards() == (40, None, 2)
    assert with_setting(base, "mode", "observe").mode == "observe"
    assert with_setting(base, "detectors.argumentChurn", False).detectors.argument_churn is False
    assert with_setting({}, "max_consecutive_error_batches", 4).max_consecutive_error_batches == 4
    assert overlay({"turnLimit": 40}, {"mode": "observe"}) == {"turnLimit": 40, "mode": "observe"}
    message = _config_error(with_setting, base, "mode", "shadow")
    assert message == "tools.loopDetection.mode: expected 'enforce' or 'observe', got 'shadow'"
    message = _config_error(with_setting, base, "turnLimit", 0)
    assert message == _bound_message(f"{ROOT}.turnLimit", "0")
    message = _config_error(with_setting, base, "turnLimit.x", 1)
    assert message.startswith(f"{ROOT}.turnLimit: has no nested settings")


# ---------------------------------------------------------------------------
# agents.entries and default: true (SPEC §8.14, §12.12)

ENTRIES_JSON5 = """\
{
  tools: { loopDetection: { enabled: true, historySize: 40, turnLimit: 300 } },
  agents: {
    list: [
      { id: "main", default: true },
      { id: "both", tools: { loopDetection: { historySize: 11, warningThreshold: 3 } } },
    ],
    entries: {
      worker: {
        model: "some/model",          // not ours: ignored
        workspace: "~/work",
        tools: { exec: { host: "sandbox" }, loopDetection: { turnLimit: 25 } },
      },
      both: { tools: { loopDetection: { historySize: 32 } } },
      quiet: {},
    },
  },
}
"""


def test_entries_supply_an_agent_override(tmp_path: Path) -> None:
    path = _write(tmp_path, ENTRIES_JSON5)
    worker = load_config(path, "worker")
    assert worker == LoopDetectionConfig(enabled=True, history_size=40, turn_limit=25)
    assert load_config(path, "quiet") == LoopDetectionConfig(
        enabled=True, history_size=40, turn_limit=300
    )


def test_an_id_in_list_and_entries_takes_the_entries_block_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, ENTRIES_JSON5)
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        both = load_config(path, "both")
    # the list's warningThreshold is not merged in: the entries block replaces it
    assert both == LoopDetectionConfig(enabled=True, history_size=32, turn_limit=300)
    messages = [r.getMessage() for r in _warnings(caplog)]
    assert len(messages) == 1, messages
    assert "'both'" in messages[0]
    assert "agents.entries" in messages[0]


def test_an_entries_entry_without_a_block_still_replaces_the_list_entry() -> None:
    source = {
        "agents": {
            "list": [{"id": "x", "tools": {"loopDetection": {"historySize": 9}}}],
            "entries": {"x": {"model": "m"}},
        }
    }
    assert load_config(source, "x") == LoopDetectionConfig()


def test_the_default_agent_supplies_the_override_without_an_id() -> None:
    source: dict[str, Any] = {
        "tools": {"loopDetection": {"historySize": 40}},
        "agents": {
            "list": [{"id": "a", "default": True, "tools": {"loopDetection": {"turnLimit": 8}}}],
            "entries": {"b": {"tools": {"loopDetection": {"historySize": 12}}}},
        },
    }
    assert load_config(source) == LoopDetectionConfig(history_size=40, turn_limit=8)
    # a named id wins over the default
    assert load_config(source, "b") == LoopDetectionConfig(history_size=12)
    # the default may also sit in entries
    source["agents"]["list"][0]["default"] = False
    source["agents"]["entries"]["b"]["default"] = True
    assert load_config(source) == LoopDetectionConfig(history_size=12)


def test_the_default_mark_in_a_replaced_list_entry_does_not_count() -> None:
    source = {
        "agents": {
            "list": [{"id": "a", "default": True, "tools": {"loopDetection": {"turnLimit": 8}}}],
            "entries": {"a": {"tools": {"loopDetection": {"turnLimit": 9}}}},
        }
    }
    assert load_config(source) == LoopDetectionConfig()
    assert load_config(source, "a").turn_limit == 9


def test_no_default_agent_means_the_global_block(caplog: pytest.LogCaptureFixture) -> None:
    source = {
        "tools": {"loopDetection": {"historySize": 40}},
        "agents": {"entries": {"b": {"tools": {"loopDetection": {"historySize": 12}}}}},
    }
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        assert load_config(source) == LoopDetectionConfig(history_size=40)
    assert _warnings(caplog) == []


def test_several_default_agents_mean_the_global_block_and_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = {
        "tools": {"loopDetection": {"historySize": 40}},
        "agents": {
            "list": [{"id": "a", "default": True, "tools": {"loopDetection": {"turnLimit": 8}}}],
            "entries": {"b": {"default": True, "tools": {"loopDetection": {"turnLimit": 9}}}},
        },
    }
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        assert load_config(source) == LoopDetectionConfig(history_size=40)
    [message] = [r.getMessage() for r in _warnings(caplog)]
    assert "'a'" in message
    assert "'b'" in message
    assert "default" in message


@pytest.mark.parametrize("bad", ["yes", 1, [True]], ids=repr)
def test_a_default_mark_that_is_not_a_bool_is_rejected(bad: object) -> None:
    source = {"agents": {"entries": {"w": {"default": bad}}}}
    message = _config_error(load_config, source)
    assert message.startswith("agents.entries.w.default: expected true or false, got ")
    source = {"agents": {"list": [{"id": "w", "default": bad}]}}
    assert _config_error(load_config, source).startswith("agents.list[0].default: expected")


def test_the_default_mark_in_a_file(tmp_path: Path) -> None:
    assert load_config(_write(tmp_path, ENTRIES_JSON5)) == LoopDetectionConfig(
        enabled=True, history_size=40, turn_limit=300
    )
    text = ENTRIES_JSON5.replace("worker: {\n", "worker: {\n        default: true,\n")
    text = text.replace('{ id: "main", default: true }', '{ id: "main" }')
    assert load_config(_write(tmp_path, text, "second.json5")).turn_limit == 25


def test_an_unknown_id_with_entries_warns_and_uses_global(
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = {
        "tools": {"loopDetection": {"historySize": 40}},
        "agents": {"entries": {"worker": {"tools": {"loopDetection": {"historySize": 12}}}}},
    }
    with caplog.at_level(logging.DEBUG, logger="loopcore"):
        assert load_config(source, "wokrer") == LoopDetectionConfig(history_size=40)
    [message] = [r.getMessage() for r in _warnings(caplog)]
    assert "'wokrer'" in message
    assert "global" in message


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"agents": ["worker"]}, "agents: expected a mapping, got list"),
        ({"agents": {"entries": ["worker"]}}, "agents.entries: expected a mapping, got list"),
        (
            {"agents": {"entries": {"worker": []}}},
            "agents.entries.worker: expected a mapping, got list",
        ),
        (
            {"agents": {"entries": {"a b": "x"}}},
            "agents.entries['a b']: expected a mapping, got 'x'",
        ),
        (
            {"agents": {"entries": {"worker": {"tools": [1]}}}},
            "agents.entries.worker.tools: expected a mapping, got list",
        ),
        (
            {"agents": {"entries": {"worker": {"tools": {"loopDetection": 3}}}}},
            "agents.entries.worker.tools.loopDetection: expected a mapping, got 3",
        ),
    ],
    ids=["agents", "entries", "entry", "odd-id", "tools", "loopDetection"],
)
def test_wrong_typed_agent_entries_name_the_path(source: dict[str, Any], message: str) -> None:
    assert _config_error(load_config, source, "worker") == message


def test_malformed_agents_are_rejected_also_without_an_id() -> None:
    # The default agent is looked for, so the agents section is always read.
    message = _config_error(load_config, {"agents": {"entries": {"worker": []}}})
    assert message == "agents.entries.worker: expected a mapping, got list"


def test_a_bad_value_in_an_entries_block_names_its_path() -> None:
    source = {"agents": {"entries": {"worker": {"tools": {"loopDetection": {"turnLimit": 0}}}}}}
    message = _config_error(load_config, source, "worker")
    assert message == _bound_message("agents.entries.worker.tools.loopDetection.turnLimit", "0")


def test_other_agents_blocks_are_not_validated() -> None:
    # Only the chosen agent's block is read; another agent's typo is its own problem.
    source = {
        "agents": {
            "entries": {
                "good": {"tools": {"loopDetection": {"historySize": 12}}},
                "bad": {"tools": {"loopDetection": {"historySise": 12}}},
            }
        }
    }
    assert load_config(source, "good").history_size == 12
    assert "historySize" in _config_error(load_config, source, "bad")

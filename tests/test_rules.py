"""Does the one verdict table answer the same for one scan and for numpy columns of scans?

``_rules.verdict`` (the per-call path: first row that holds) and
``_rules.select`` (the batch path: ``np.select`` over the same rows) must give
the same level, detector and count for every scan and config; the texts and
keys the per-call path builds are checked against the SPEC §4 wording.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from loopcore import LoopDetectionConfig
from loopcore._records import ScanStats
from loopcore._rules import DETECTORS, LEVELS, ROWS, select, verdict

counts = st.integers(0, 40)


@st.composite
def configs(draw: st.DrawFn) -> LoopDetectionConfig:
    warning = draw(st.integers(1, 12))
    critical = draw(st.integers(1, 25))
    breaker = draw(st.integers(1, 35))
    switches = draw(st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()))
    return LoopDetectionConfig.from_mapping(
        {
            "enabled": True,
            "warningThreshold": warning,
            "criticalThreshold": critical,
            "globalCircuitBreakerThreshold": breaker,
            "unknownToolThreshold": draw(st.integers(1, 12)),
            "detectors": dict(
                zip(
                    ["genericRepeat", "knownPollNoProgress", "pingPong", "argumentChurn"],
                    switches,
                    strict=True,
                )
            ),
        }
    )


@st.composite
def scans(draw: st.DrawFn) -> tuple[ScanStats, bool]:
    pingpong = draw(st.sampled_from([0, 0, draw(st.integers(3, 40))]))
    stats = ScanStats(
        recent=draw(counts),
        streak=draw(counts),
        reference=draw(st.none() | st.integers(0, 2**64 - 1)),
        unknown_streak=draw(counts),
        unknown_name="frob",
        pingpong=pingpong,
        paired_tool="read" if pingpong else None,
        paired_hash=draw(st.integers(0, 2**64 - 1)),
        pingpong_no_progress=bool(pingpong) and draw(st.booleans()),
        churn=draw(st.sampled_from([0, 0, draw(st.integers(6, 40))])),
        churn_variants=2,
    )
    return stats, draw(st.booleans()), draw(st.sampled_from(["read", "wait"]))


@given(config=configs(), cases=st.lists(scans(), min_size=1, max_size=20))
def test_scalar_and_vectorised_paths_read_the_same_rows(
    config: LoopDetectionConfig, cases: list[tuple[ScanStats, bool, str]]
) -> None:
    columns = SimpleNamespace(
        recent=np.array([s.recent for s, _, _ in cases], np.int32),
        streak=np.array([s.streak for s, _, _ in cases], np.int32),
        unknown_streak=np.array([s.unknown_streak for s, _, _ in cases], np.int32),
        pingpong=np.array([s.pingpong for s, _, _ in cases], np.int32),
        pingpong_no_progress=np.array([s.pingpong_no_progress for s, _, _ in cases]),
        churn=np.array([s.churn for s, _, _ in cases], np.int32),
        known_poll=np.array([poll for _, poll, _ in cases]),
        wait=np.array([tool == "wait" for _, _, tool in cases]),
    )
    level, detector, count = select(columns, config)
    for i, (stats, poll, tool) in enumerate(cases):
        one = verdict(stats, config, tool, 0xABC, poll)
        assert (one.level, one.detector, one.count if one.stuck else 0) == (
            LEVELS[level[i]],
            DETECTORS[detector[i]],
            int(count[i]),
        )


def test_first_matching_row_wins() -> None:
    config = LoopDetectionConfig(enabled=True)
    # Both the global breaker (streak 30) and the generic critical hold: row 2 comes first.
    stats = ScanStats(recent=30, streak=30, reference=7)
    got = verdict(stats, config, "read", 1, False)
    assert (got.level, got.detector, got.count) == ("critical", "global_circuit_breaker", 30)
    assert [row.detector for row in ROWS][:2] == ["unknown_tool_repeat", "global_circuit_breaker"]


def test_below_every_threshold_is_not_stuck() -> None:
    config = LoopDetectionConfig(enabled=True)
    got = verdict(ScanStats(recent=9, streak=9), config, "read", 1, False)
    assert not got.stuck
    assert got.level is None


def test_texts_and_keys_follow_the_spec_wording() -> None:
    config = LoopDetectionConfig(enabled=True)
    generic = verdict(ScanStats(recent=20, streak=20, reference=5), config, "read", 0x1F, False)
    assert generic.message == (
        "CRITICAL: Called read with identical outcomes 20 times. Session execution blocked to "
        "prevent runaway loops."
    )
    assert "identical outcomes" in generic.message  # type: ignore[operator]
    assert generic.warning_key == f"generic_repeat:critical:read:{0x1F:016x}:{5:016x}"
    warned = verdict(ScanStats(recent=10, streak=3), config, "read", 0x1F, False)
    assert warned.message.startswith("WARNING:")  # type: ignore[union-attr]
    assert warned.warning_key == f"generic_repeat:read:{0x1F:016x}"
    poll = verdict(ScanStats(recent=10, streak=10, reference=2), config, "process", 3, True)
    assert (poll.detector, poll.level) == ("known_poll_no_progress", "warning")
    assert "no progress" in poll.message  # type: ignore[operator]
    pong = verdict(
        ScanStats(pingpong=10, paired_tool="grep", paired_hash=9), config, "read", 4, False
    )
    assert pong.detector == "ping_pong"
    assert pong.paired_tool_name == "grep"
    assert "ping-pong loop" in pong.message  # type: ignore[operator]
    assert pong.warning_key == f"ping_pong:{4:016x}:{9:016x}"
    unknown = verdict(ScanStats(unknown_streak=10, unknown_name="frob"), config, "call", 4, False)
    assert unknown.detector == "unknown_tool_repeat"
    assert "'frob'" in unknown.message  # type: ignore[operator]

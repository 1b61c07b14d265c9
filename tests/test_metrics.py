"""The Prometheus collector: guard stats read at scrape time (SPEC §9.6).

Its whole contract is "an object whose ``stats()`` returns ``GuardStats``", so the
guards here are small holders of a real ``Counters`` tally. The tests need
``prometheus_client`` (the ``[prometheus]`` extra) and fail without it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.openmetrics import parser as openmetrics_parser
from prometheus_client.parser import text_string_to_metric_families

from loopcore._stats import Counters, GuardStats
from loopcore.metrics import PrometheusCollector

GENERIC = "generic_repeat"
NAMES = {
    "loopcore_tool_calls": "counter",
    "loopcore_detections": "counter",
    "loopcore_live_scopes": "gauge",
    "loopcore_scope_evictions": "counter",
    "loopcore_store_errors": "counter",
}


class FakeGuard:
    """A guard as the collector sees it: ``stats()`` and nothing else."""

    def __init__(self) -> None:
        self.counters = Counters()
        self.calls = 0
        self.live = 0
        self.scrapes = 0

    def stats(self) -> GuardStats:
        self.scrapes += 1
        return self.counters.snapshot(calls=self.calls, live_scopes=self.live)


def busy_guard() -> FakeGuard:
    guard = FakeGuard()
    guard.calls, guard.live = 41, 3
    counters = guard.counters
    counters.warned(GENERIC, "warning")
    counters.warned(GENERIC, "warning")
    counters.blocked(GENERIC, "critical", terminal=False)
    counters.blocked(GENERIC, "critical", terminal=True)
    counters.aborted()
    counters.run_stopped("turnLimit")
    counters.shadow("ping_pong", "critical", "block")
    counters.evicted(5)
    counters.store_error()
    return guard


def scrape(registry: CollectorRegistry) -> dict[str, Any]:
    """The classic text exposition, parsed: family name -> (type, {(sample, labels): value})."""
    text = generate_latest(registry).decode()
    out: dict[str, Any] = {}
    for family in text_string_to_metric_families(text):
        assert family.name not in out, f"family {family.name} written twice"
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in family.samples}
        out[family.name] = (family.type, samples)
    return out


def registry_with(*collectors: PrometheusCollector) -> CollectorRegistry:
    registry = CollectorRegistry()
    for collector in collectors:
        registry.register(collector)
    return registry


def test_the_four_metrics_and_store_errors_with_their_values() -> None:
    families = scrape(registry_with(PrometheusCollector(busy_guard())))
    assert {name: kind for name, (kind, _) in families.items()} == NAMES
    assert families["loopcore_tool_calls"][1] == {("loopcore_tool_calls_total", ()): 41.0}
    assert families["loopcore_live_scopes"][1] == {("loopcore_live_scopes", ()): 3.0}
    assert families["loopcore_scope_evictions"][1] == {("loopcore_scope_evictions_total", ()): 5.0}
    assert families["loopcore_store_errors"][1] == {("loopcore_store_errors_total", ()): 1.0}

    def key(detector: str, level: str, action: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        labels = {"detector": detector, "level": level, "action": action}
        return ("loopcore_detections_total", tuple(sorted(labels.items())))

    assert families["loopcore_detections"][1] == {
        key(GENERIC, "warning", "warned"): 2.0,
        key(GENERIC, "critical", "blocked"): 1.0,
        key(GENERIC, "critical", "terminated"): 1.0,
        key("compaction_loop_persisted", "critical", "aborted"): 1.0,
        key("turnLimit", "critical", "terminated"): 1.0,
        key("ping_pong", "critical", "shadow"): 1.0,
    }


def test_stats_are_read_at_scrape_time() -> None:
    guard = FakeGuard()
    registry = registry_with(PrometheusCollector(guard))
    assert guard.scrapes == 0  # registering describes; it does not read the guard
    first = scrape(registry)
    assert first["loopcore_detections"][1] == {}
    guard.calls = 7
    guard.counters.warned(GENERIC, "warning")
    second = scrape(registry)
    assert guard.scrapes == 2
    assert second["loopcore_tool_calls"][1] == {("loopcore_tool_calls_total", ()): 7.0}
    assert list(second["loopcore_detections"][1].values()) == [1.0]


def test_a_namespace_prefixes_every_name() -> None:
    families = scrape(registry_with(PrometheusCollector(busy_guard(), namespace="gw_agent")))
    assert set(families) == {name.replace("loopcore", "gw_agent", 1) for name in NAMES}


def test_a_guard_label_is_on_every_sample() -> None:
    families = scrape(registry_with(PrometheusCollector(busy_guard(), guard_label="planner")))
    samples = [labels for _, (_, values) in families.items() for (_, labels) in values]
    assert len(samples) == 10
    assert all(dict(labels)["guard"] == "planner" for labels in samples)


def test_a_guard_label_with_quotes_and_newlines_survives_the_exposition() -> None:
    label = 'team "a"\nline\\two'
    families = scrape(registry_with(PrometheusCollector(busy_guard(), guard_label=label)))
    ((_, labels),) = families["loopcore_tool_calls"][1]
    assert dict(labels) == {"guard": label}


def test_two_labelled_collectors_on_one_registry() -> None:
    a, b = busy_guard(), FakeGuard()
    b.calls = 2
    registry = CollectorRegistry()
    registry.register(PrometheusCollector(a, guard_label="a"))
    registry.register(PrometheusCollector(b, guard_label="b"))
    calls: dict[str, float] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        if family.name == "loopcore_tool_calls":
            calls.update({s.labels["guard"]: s.value for s in family.samples})
    assert calls == {"a": 41.0, "b": 2.0}
    # Each collector writes its own families, so OpenMetrics (one family per name)
    # refuses the page: the reason add() exists.
    with pytest.raises(ValueError, match="loopcore_tool_calls"):
        list(
            openmetrics_parser.text_string_to_metric_families(
                openmetrics.generate_latest(registry).decode()
            )
        )


def test_add_writes_each_family_once_for_several_guards() -> None:
    a, b = busy_guard(), FakeGuard()
    b.calls, b.live = 2, 9
    collector = PrometheusCollector(a, guard_label="a").add(b, guard_label="b")
    assert collector.guard_labels == ("a", "b")
    registry = registry_with(collector)
    families = scrape(registry)
    assert families["loopcore_tool_calls"][1] == {
        ("loopcore_tool_calls_total", (("guard", "a"),)): 41.0,
        ("loopcore_tool_calls_total", (("guard", "b"),)): 2.0,
    }
    assert families["loopcore_live_scopes"][1] == {
        ("loopcore_live_scopes", (("guard", "a"),)): 3.0,
        ("loopcore_live_scopes", (("guard", "b"),)): 9.0,
    }
    parsed = list(
        openmetrics_parser.text_string_to_metric_families(
            openmetrics.generate_latest(registry).decode()
        )
    )
    assert sorted(f.name for f in parsed) == sorted(NAMES)


def test_two_unlabelled_collectors_on_one_registry_are_refused() -> None:
    registry = registry_with(PrometheusCollector(FakeGuard()))
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(PrometheusCollector(FakeGuard()))
    # Another namespace is another set of names.
    registry.register(PrometheusCollector(FakeGuard(), namespace="other"))
    assert "other_tool_calls" in scrape(registry)


def test_the_default_registry_takes_and_gives_back_a_collector() -> None:
    collector = PrometheusCollector(busy_guard(), namespace="loopcore_test_default")
    REGISTRY.register(collector)
    try:
        assert REGISTRY.get_sample_value("loopcore_test_default_tool_calls_total") == 41.0
        assert (
            REGISTRY.get_sample_value(
                "loopcore_test_default_detections_total",
                {"detector": GENERIC, "level": "warning", "action": "warned"},
            )
            == 2.0
        )
    finally:
        REGISTRY.unregister(collector)


def test_a_detector_like_object_with_scope_fields_only() -> None:
    class Detector:
        def stats(self) -> GuardStats:
            return GuardStats(live_scopes=4, evicted_scopes=2)

    families = scrape(registry_with(PrometheusCollector(Detector())))
    assert families["loopcore_live_scopes"][1] == {("loopcore_live_scopes", ()): 4.0}
    assert families["loopcore_scope_evictions"][1] == {("loopcore_scope_evictions_total", ()): 2.0}
    assert families["loopcore_detections"][1] == {}


OUTCOME_KEYS = st.tuples(
    st.sampled_from([GENERIC, "ping_pong", "turnLimit", "compaction_loop_persisted"]),
    st.sampled_from(["warning", "critical"]),
    st.sampled_from(["warned", "blocked", "terminated", "aborted", "shadow"]),
)


@given(st.dictionaries(OUTCOME_KEYS, st.integers(0, 2**40)))
def test_detections_mirror_by_outcome(by_outcome: dict[tuple[str, str, str], int]) -> None:
    class Guard:
        def stats(self) -> GuardStats:
            return GuardStats(by_outcome=by_outcome)

    families = scrape(registry_with(PrometheusCollector(Guard(), guard_label="g")))
    seen = {
        (labels["detector"], labels["level"], labels["action"]): value
        for (_, pairs), value in families["loopcore_detections"][1].items()
        for labels in [dict(pairs)]
    }
    assert seen == {key: float(count) for key, count in by_outcome.items()}


# --- arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", ["", "1loop", "loop-core", "loop:core", "loop core", "é"])
def test_a_bad_namespace_is_refused(namespace: str) -> None:
    with pytest.raises(ValueError, match=r"^namespace: expected a metric name prefix .*got "):
        PrometheusCollector(FakeGuard(), namespace=namespace)


@pytest.mark.parametrize("namespace", [None, 3, b"loopcore"])
def test_a_namespace_must_be_a_string(namespace: Any) -> None:
    with pytest.raises(TypeError, match=r"^namespace: expected a string, got "):
        PrometheusCollector(FakeGuard(), namespace=namespace)


def test_guard_label_must_be_a_non_empty_string_or_none() -> None:
    with pytest.raises(TypeError, match=r"^guard_label: expected a string or None, got 3$"):
        PrometheusCollector(FakeGuard(), guard_label=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^guard_label: expected a non-empty string or None"):
        PrometheusCollector(FakeGuard(), guard_label="")
    assert PrometheusCollector(FakeGuard()).guard_label is None


def test_the_guard_needs_a_stats_method() -> None:
    with pytest.raises(TypeError, match=r"^guard: expected an object with a stats\(\) method, got"):
        PrometheusCollector(object())


def test_stats_of_the_wrong_type_fail_the_scrape() -> None:
    class Liar:
        def stats(self) -> dict[str, int]:
            return {"calls": 1}

    registry = registry_with(PrometheusCollector(Liar()))
    with pytest.raises(TypeError, match=r"^guard.stats\(\): expected GuardStats, got dict$"):
        generate_latest(registry)


def test_add_needs_labels_on_both_sides_and_distinct() -> None:
    with pytest.raises(ValueError, match=r"^guard_label: add\(\) needs a collector made with"):
        PrometheusCollector(FakeGuard()).add(FakeGuard(), guard_label="b")
    collector = PrometheusCollector(FakeGuard(), guard_label="a")
    with pytest.raises(ValueError, match=r"^guard_label: 'a' is already exposed"):
        collector.add(FakeGuard(), guard_label="a")
    with pytest.raises(TypeError, match=r"^guard_label: expected a string, got None$"):
        collector.add(FakeGuard(), guard_label=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^guard: expected an object with a stats"):
        collector.add(object(), guard_label="c")
    assert collector.guard_labels == ("a",)


# --- imports ---------------------------------------------------------------------------------


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True
    )


def test_import_loopcore_does_not_import_prometheus_client() -> None:
    done = run_python(
        "import sys, loopcore; print(sorted(m for m in sys.modules if m.startswith('prometheus')))"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_loopcore_metrics_without_prometheus_client_names_the_extra() -> None:
    done = run_python(
        "import sys; sys.modules['prometheus_client'] = None\n"
        "try:\n"
        "    import loopcore.metrics\n"
        "except ImportError as exc:\n"
        "    print(exc.name, '|', exc)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "prometheus_client | loopcore.metrics needs prometheus_client: "
        "pip install 'loopcore[prometheus]'"
    )

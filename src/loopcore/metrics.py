"""How does a guard's activity reach Prometheus? (SPEC §9.6: ``stats()`` at scrape time)

``PrometheusCollector`` is a ``prometheus_client`` custom collector: it holds no
counters of its own, and each scrape takes one ``stats()`` snapshot of each guard
it exposes and turns them into metric families. So the per-call path pays nothing for
metrics, and a scrape sees one consistent moment of the guard.

This is the only module that imports ``prometheus_client`` (the
``loopcore[prometheus]`` extra); ``import loopcore`` never loads it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from ._names import describe, type_name
from ._stats import GuardStats

try:
    from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
    from prometheus_client.registry import Collector
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "loopcore.metrics needs prometheus_client: pip install 'loopcore[prometheus]'",
        name="prometheus_client",
    ) from exc

__all__ = ["PrometheusCollector"]

# A metric name's first part. Colons are valid in metric names but reserved for
# recording rules, so an exporter's prefix leaves them out.
_NAMESPACE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_DETECTION_LABELS = ("detector", "level", "action")


def _check_namespace(namespace: object) -> str:
    if not isinstance(namespace, str):
        raise TypeError(f"namespace: expected a string, got {describe(namespace)}")
    namespace = str.__str__(namespace)
    if not _NAMESPACE.fullmatch(namespace):
        raise ValueError(
            "namespace: expected a metric name prefix (a letter or '_', then letters, "
            f"digits or '_'), got {describe(namespace)}"
        )
    return namespace


def _check_guard(guard: object) -> object:
    if not callable(getattr(guard, "stats", None)):
        raise TypeError(
            f"guard: expected an object with a stats() method, got {type_name(type(guard))}"
        )
    return guard


def _check_label(guard_label: object) -> str | None:
    if guard_label is None:
        return None
    if not isinstance(guard_label, str):
        raise TypeError(f"guard_label: expected a string or None, got {describe(guard_label)}")
    if str.__len__(guard_label) == 0:
        # Prometheus treats an empty label value as no label at all.
        raise ValueError("guard_label: expected a non-empty string or None, got ''")
    return str.__str__(guard_label)


class PrometheusCollector(Collector):
    """Exposes a guard's ``stats()`` as Prometheus metrics, read at scrape time.

    ``guard`` is anything with a ``stats()`` method returning ``GuardStats`` (a
    ``ToolLoopGuard`` or a ``LoopDetector``). Metric names start with
    ``namespace``; with ``guard_label`` every sample carries ``guard="<label>"``.
    ``add`` puts more labelled guards in the same collector, so that one registry
    shows several guards with each metric family written once.
    """

    def __init__(
        self, guard: object, *, namespace: str = "loopcore", guard_label: str | None = None
    ) -> None:
        self._namespace = _check_namespace(namespace)
        self._label = _check_label(guard_label)
        # Replaced whole by add(), never changed in place: a scrape running
        # meanwhile reads the tuple it started with.
        self._guards: tuple[tuple[str | None, object], ...] = ((self._label, _check_guard(guard)),)

    @property
    def namespace(self) -> str:
        return self._namespace

    @property
    def guard_label(self) -> str | None:
        """The label of the guard the collector was made with."""
        return self._label

    @property
    def guard_labels(self) -> tuple[str | None, ...]:
        """The label of every guard the collector exposes, in the order they were added."""
        return tuple(label for label, _ in self._guards)

    def __repr__(self) -> str:
        return f"PrometheusCollector(namespace={self._namespace!r}, guards={self.guard_labels!r})"

    def add(self, guard: object, *, guard_label: str) -> PrometheusCollector:
        """Expose one more guard, under its own ``guard_label``; returns the collector.

        Only a labelled collector takes more guards, and each label once: the
        samples of two guards must differ by their ``guard`` label.
        """
        label = _check_label(guard_label)
        if label is None:
            raise TypeError("guard_label: expected a string, got None")
        if self._label is None:
            raise ValueError(
                "guard_label: add() needs a collector made with a guard_label of its own"
            )
        if label in self.guard_labels:
            raise ValueError(f"guard_label: {describe(label)} is already exposed by this collector")
        self._guards = (*self._guards, (label, _check_guard(guard)))
        return self

    def describe(self) -> Iterator[Metric]:
        """The families without samples, which a registry checks for duplicate names.

        Without a label, a second collector of the same namespace on one registry is
        refused (``ValueError``: duplicated timeseries). A labelled collector
        describes nothing, so collectors of distinct labels can be registered side
        by side; the registry cannot check their labels (keeping them distinct is
        the caller's part), and ``add`` is the way to write each family once.
        """
        if self._label is None:
            yield from self._families(())

    def collect(self) -> Iterator[Metric]:
        """One ``stats()`` snapshot of each guard, as metric families."""
        snapshots = []
        for label, guard in self._guards:
            stats = guard.stats()  # type: ignore[attr-defined]
            if not isinstance(stats, GuardStats):
                raise TypeError(f"guard.stats(): expected GuardStats, got {type_name(type(stats))}")
            snapshots.append((label, stats))
        yield from self._families(snapshots)

    def _families(self, snapshots: Iterable[tuple[str | None, GuardStats]]) -> Iterator[Metric]:
        """The metric families, one sample set per ``(label, stats)`` snapshot."""
        ns = self._namespace
        extra = [] if self._label is None else ["guard"]
        calls = CounterMetricFamily(
            f"{ns}_tool_calls", "Tool calls the guard checked, blocked ones included.", labels=extra
        )
        detections = CounterMetricFamily(
            f"{ns}_detections",
            "What the guard did about a detected loop, by detector, level and action "
            "(warned, blocked, terminated, aborted, shadow).",
            labels=[*extra, *_DETECTION_LABELS],
        )
        live = GaugeMetricFamily(
            f"{ns}_live_scopes", "Scopes (session, run) the guard holds state for.", labels=extra
        )
        evictions = CounterMetricFamily(
            f"{ns}_scope_evictions",
            "Scopes dropped because the live-scope cap was reached.",
            labels=extra,
        )
        store_errors = CounterMetricFamily(
            f"{ns}_store_errors", "Operations of the history store that failed.", labels=extra
        )
        for label, stats in snapshots:
            head = [] if label is None else [label]
            calls.add_metric(head, stats.calls)
            # Sorted, so the output keeps its order from one scrape to the next.
            for (detector, level, action), count in sorted(stats.by_outcome.items()):
                detections.add_metric([*head, detector, level, action], count)
            live.add_metric(head, stats.live_scopes)
            evictions.add_metric(head, stats.evicted_scopes)
            store_errors.add_metric(head, stats.store_errors)
        yield from (calls, detections, live, evictions, store_errors)

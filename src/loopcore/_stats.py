"""What has a guard done so far? (SPEC §9.6: the counters behind ``stats()``)

A guard keeps one ``Counters`` tally and bumps it as it acts: a warning, a block
(terminal or not), a post-compaction abort, a run-loop stop, a would-be action of
observe mode, a scope ended, evicted or lost to a store error. ``stats()`` turns
the tally into a ``GuardStats``: a frozen snapshot whose mappings are copies, so
it never changes after it is taken, whatever the guard does next.

Each outcome lands in ``by_outcome`` under ``(detector, level, action)`` exactly
once; the action says what the guard did:

``warned``      a warning was emitted (``warnings``)
``blocked``     a call was blocked and the run may go on (``blocks``)
``terminated``  the run was ended: by a terminal block (``blocks`` and
                ``terminations``; §12.14 counts it once here, as ``terminated``),
                or by a run-loop cutoff (``run_stops``; the detector is the
                cutoff's name, e.g. ``turnLimit``, and the level ``critical``)
``aborted``     the post-compaction guard aborted the run (``aborts``; detector
                ``compaction_loop_persisted``, level ``critical``)
``shadow``      observe mode would have blocked, aborted or stopped the run
                (``shadow_blocks``, ``shadow_aborts``; a would-be run stop has
                no counter of its own)

``by_detector`` counts warnings and blocks (terminal ones included) per detector,
as SPEC §9.6 defines it: aborts, run stops and would-be actions are only in
``by_outcome`` and their own counters.

``calls`` (one per call checked: the per-call hot path keeps it natively) and
``live_scopes`` (the size of the scope table) are not kept here; the guard
passes them to ``snapshot``, along with any scope count its store keeps natively.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal

from ._names import describe
from ._records import Level
from ._rules import COMPACTION_LOOP_PERSISTED

__all__ = ["ACTIONS", "Action", "Counters", "GuardStats", "ShadowKind"]

Action = Literal["warned", "blocked", "terminated", "aborted", "shadow"]
#: Every action a ``by_outcome`` key can name, in the order the module docstring explains them.
ACTIONS: tuple[Action, ...] = ("warned", "blocked", "terminated", "aborted", "shadow")
ShadowKind = Literal["block", "abort", "run_stop"]
OutcomeKey = tuple[str, str, str]

#: The level a run-loop stop is counted under: it ends the run, as a critical does.
RUN_STOP_LEVEL: Level = "critical"

_INT_FIELDS = (
    "calls",
    "warnings",
    "blocks",
    "terminations",
    "aborts",
    "run_stops",
    "shadow_blocks",
    "shadow_aborts",
    "live_scopes",
    "evicted_scopes",
    "ended_scopes",
    "store_errors",
)


def _empty() -> Mapping[Any, int]:
    return MappingProxyType({})


def _count(name: str, value: object) -> int:
    """``value`` as a count: an exact non-negative int (bool is not a count)."""
    if type(value) is not int or value < 0:
        raise ValueError(f"{name}: expected a non-negative integer, got {describe(value)}")
    return value


@dataclass(frozen=True, slots=True)
class GuardStats:
    """A guard's counters at one moment (SPEC §9.6); every field defaults to zero / empty.

    ``by_detector`` maps a detector to its warnings plus blocks; ``by_outcome`` maps
    ``(detector, level, action)`` to a count, action one of ``ACTIONS``. Both are
    read-only copies taken at construction, so a snapshot never changes. A
    ``LoopDetector`` fills only the scope fields.
    """

    calls: int = 0
    warnings: int = 0
    blocks: int = 0
    terminations: int = 0
    aborts: int = 0
    run_stops: int = 0
    shadow_blocks: int = 0
    shadow_aborts: int = 0
    by_detector: Mapping[str, int] = field(default_factory=_empty)
    by_outcome: Mapping[OutcomeKey, int] = field(default_factory=_empty)
    live_scopes: int = 0
    evicted_scopes: int = 0
    ended_scopes: int = 0
    store_errors: int = 0

    def __post_init__(self) -> None:
        for name in _INT_FIELDS:
            _count(name, getattr(self, name))
        # A copy behind a read-only view: neither the caller's dict nor the guard's
        # live tally can change the snapshot afterwards.
        object.__setattr__(self, "by_detector", MappingProxyType(dict(self.by_detector)))
        object.__setattr__(self, "by_outcome", MappingProxyType(dict(self.by_outcome)))

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict, the mappings as plain dicts (new copies)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["by_detector"] = dict(self.by_detector)
        out["by_outcome"] = dict(self.by_outcome)
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        # A mappingproxy cannot be pickled or deep-copied; the plain dicts can, and
        # __post_init__ wraps them again on the way back.
        return (_rebuild, (self.as_dict(),))


def _rebuild(values: dict[str, Any]) -> GuardStats:
    return GuardStats(**values)


class Counters:
    """The mutable tally behind ``GuardStats``: increments only, and no lock of its own.

    The guard calls every method under its own lock. Detector and level are the
    verdict's own strings (a fixed, small set), so ``by_outcome`` stays small.
    """

    __slots__ = (
        "_blocked",
        "_other",
        "_warned",
        "aborts",
        "ended_scopes",
        "evicted_scopes",
        "run_stops",
        "shadow_aborts",
        "shadow_blocks",
        "store_errors",
    )

    def __init__(self) -> None:
        # A warning and a block cost one dict step each (they are counted on the
        # hot path of a loop storm); the totals are summed when a snapshot is taken.
        self._warned: dict[tuple[str, str], int] = {}
        self._blocked: dict[tuple[str, str, bool], int] = {}
        self._other: dict[OutcomeKey, int] = {}
        self.aborts = 0
        self.run_stops = 0
        self.shadow_blocks = 0
        self.shadow_aborts = 0
        self.ended_scopes = 0
        self.evicted_scopes = 0
        self.store_errors = 0

    def __repr__(self) -> str:
        return (
            f"Counters(warnings={self.warnings}, blocks={self.blocks}, "
            f"terminations={self.terminations}, aborts={self.aborts}, "
            f"run_stops={self.run_stops})"
        )

    @property
    def warnings(self) -> int:
        return sum(self._warned.values())

    @property
    def blocks(self) -> int:
        return sum(self._blocked.values())

    @property
    def terminations(self) -> int:
        return sum(n for (_, _, terminal), n in self._blocked.items() if terminal)

    @property
    def by_detector(self) -> dict[str, int]:
        """Warnings and blocks per detector."""
        out: dict[str, int] = {}
        for (detector, _), n in self._warned.items():
            out[detector] = out.get(detector, 0) + n
        for (detector, _, _), n in self._blocked.items():
            out[detector] = out.get(detector, 0) + n
        return out

    @property
    def by_outcome(self) -> dict[OutcomeKey, int]:
        out: dict[OutcomeKey, int] = {}
        for (detector, level), n in self._warned.items():
            out[(detector, level, "warned")] = n
        for (detector, level, terminal), n in self._blocked.items():
            key = (detector, level, "terminated" if terminal else "blocked")
            out[key] = out.get(key, 0) + n
        for key, n in self._other.items():
            out[key] = out.get(key, 0) + n
        return out

    def _outcome(self, detector: str, level: str, action: Action) -> None:
        key = (detector, level, action)
        self._other[key] = self._other.get(key, 0) + 1

    def warned(self, detector: str, level: str) -> None:
        """One warning emitted (a new §5 bucket), in either mode."""
        key = (detector, level)
        self._warned[key] = self._warned.get(key, 0) + 1

    def blocked(self, detector: str, level: str, terminal: bool) -> None:
        """One ``block`` event (one per batch, §12.14); a terminal one also ends the run."""
        key = (detector, level, terminal is True)
        self._blocked[key] = self._blocked.get(key, 0) + 1

    def block_tally(self) -> dict[tuple[str, str, bool], int]:
        """The tally ``blocked`` increments, for a caller's own hot loop.

        A guard in a loop storm counts each repeated block by adding 1 to its
        ``(detector, level, terminal)`` entry here directly, under its lock.
        """
        return self._blocked

    def aborted(self) -> None:
        """One post-compaction abort (``CompactionLoopPersisted``, enforce mode)."""
        self.aborts += 1
        self._outcome(COMPACTION_LOOP_PERSISTED, "critical", "aborted")

    def run_stopped(self, guard_name: str) -> None:
        """One run-loop stop (§8.11), counted under the cutoff's name at level critical."""
        self.run_stops += 1
        self._outcome(guard_name, RUN_STOP_LEVEL, "terminated")

    def shadow(self, detector: str, level: str, kind: ShadowKind) -> None:
        """One action observe mode did not take: a ``block``, an ``abort`` or a ``run_stop``.

        For a would-be run stop, ``detector`` is the cutoff's name and ``level``
        is ``RUN_STOP_LEVEL``, as ``run_stopped`` counts a real one.
        """
        if kind == "block":
            self.shadow_blocks += 1
        elif kind == "abort":
            self.shadow_aborts += 1
        elif kind != "run_stop":
            raise ValueError(f"kind: expected 'block', 'abort' or 'run_stop', got {describe(kind)}")
        self._outcome(detector, level, "shadow")

    def ended(self, n: int = 1) -> None:
        """``n`` scopes freed by ``end_run`` / ``end_session``."""
        self.ended_scopes += _count("n", n)

    def evicted(self, n: int = 1) -> None:
        """``n`` scopes dropped by the live-scope cap (LRU)."""
        self.evicted_scopes += _count("n", n)

    def store_error(self) -> None:
        """One store operation that failed (§10)."""
        self.store_errors += 1

    def snapshot(
        self,
        *,
        calls: int,
        live_scopes: int,
        evicted_scopes: int | None = None,
        ended_scopes: int | None = None,
        store_errors: int | None = None,
    ) -> GuardStats:
        """The tally now, with the numbers the guard keeps elsewhere.

        ``calls`` and ``live_scopes`` are always the caller's. ``evicted_scopes``,
        ``ended_scopes`` and ``store_errors`` replace the tally's own count when
        given (a store that counts them natively); left out (None), the tally's
        count is used. Negative or non-int numbers are a ``ValueError``.
        """
        return GuardStats(
            calls=calls,
            warnings=self.warnings,
            blocks=self.blocks,
            terminations=self.terminations,
            aborts=self.aborts,
            run_stops=self.run_stops,
            shadow_blocks=self.shadow_blocks,
            shadow_aborts=self.shadow_aborts,
            by_detector=self.by_detector,
            by_outcome=self.by_outcome,
            live_scopes=live_scopes,
            evicted_scopes=self.evicted_scopes if evicted_scopes is None else evicted_scopes,
            ended_scopes=self.ended_scopes if ended_scopes is None else ended_scopes,
            store_errors=self.store_errors if store_errors is None else store_errors,
        )

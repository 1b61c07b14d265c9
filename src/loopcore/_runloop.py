"""When should a run stop whatever its tool calls say? (SPEC §8.11, §12.13)

Three opt-in hard caps on a run's loop, counted per scope by ``RunLoop``: the
number of assistant turns, consecutive turns whose tool calls all failed, and
consecutive turns that repeat one identical call. They look at turns, not at
results, so they also catch a loop whose errors hide in success output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from . import _fingerprint
from ._names import type_name

__all__ = [
    "ERROR_BATCHES",
    "IDLE_REPEATS",
    "TURN_LIMIT",
    "RunLoop",
    "RunStop",
    "TurnCall",
    "TurnDigest",
    "digest_turn",
    "error_batches_message",
    "idle_repeats_message",
    "turn_limit_message",
]

#: ``RunStop.guard`` values: the config keys as users write them.
TURN_LIMIT = "turnLimit"
ERROR_BATCHES = "maxConsecutiveErrorBatches"
IDLE_REPEATS = "maxIdleRepeatCalls"


class TurnCall(NamedTuple):
    """One tool call of an assistant turn, as ``RunLoop.end_turn`` reads it."""

    tool: str
    args: Any
    tool_call_id: str | None = None
    is_error: bool = False
    #: Never ran: a queued user message pre-empted it.
    skipped: bool = False


@dataclass(frozen=True, slots=True)
class RunStop:
    """A run-loop cutoff was reached: end the run with ``message`` as its last text."""

    guard: str
    limit: int
    message: str


def turn_limit_message(limit: int) -> str:
    return (
        f"Stopped this run because it reached the configured maximum of {limit} "
        f"assistant turns ({TURN_LIMIT})."
    )


def error_batches_message(limit: int) -> str:
    return (
        f"Stopped this run because {limit} consecutive tool batches in a row ended in "
        f"errors ({ERROR_BATCHES})."
    )


def idle_repeats_message(limit: int) -> str:
    return (
        "Stopped this run because the same tool was called with identical arguments "
        f"{limit} times in a row without progress ({IDLE_REPEATS})."
    )


def _check_limit(name: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a positive integer or None, got {value!r}")
    return value


def _check_calls(calls: object) -> list[TurnCall]:
    """``calls`` as TurnCalls, or a TypeError naming the bad item (nothing counted yet)."""
    if isinstance(calls, TurnCall):
        raise TypeError("calls: expected a sequence of TurnCall, got a single TurnCall")
    if not isinstance(calls, Sequence) or isinstance(calls, (str, bytes, bytearray)):
        raise TypeError(f"calls: expected a sequence of TurnCall, got {type_name(type(calls))}")
    checked: list[TurnCall] = []
    for index, item in enumerate(calls):
        if not isinstance(item, tuple) or not 2 <= len(item) <= 5:
            raise TypeError(
                f"calls[{index}]: expected a TurnCall or a (tool, args, ...) tuple, "
                f"got {_describe(item)}"
            )
        call = item if type(item) is TurnCall else TurnCall(*item)
        if not isinstance(call.tool, str):
            got = type_name(type(call.tool))
            raise TypeError(f"calls[{index}].tool: expected a str, got {got}")
        # Exact bools only: an object's own __bool__ is host code that may lie or raise.
        for field in ("is_error", "skipped"):
            flag = getattr(call, field)
            if not isinstance(flag, bool):
                raise TypeError(
                    f"calls[{index}].{field}: expected a bool, got {type_name(type(flag))}"
                )
        checked.append(call)
    return checked


class TurnDigest(NamedTuple):
    """What counting a turn needs to know about its calls (see ``digest_turn``)."""

    #: At least one call ran (was not skipped).
    ran: bool
    #: At least one call ran and every call that ran is an error.
    all_errors: bool
    #: Distinct canonical (tool, args) fingerprints of the calls that ran, in first-seen
    #: order; None when made with ``signatures=False``.
    signatures: tuple[int, ...] | None


def digest_turn(
    calls: Sequence[TurnCall | tuple[Any, ...]], *, signatures: bool = True
) -> TurnDigest:
    """Check and hash one turn's calls, touching no counter.

    May run host code (a tuple subclass's methods, an args object's ``repr``), so a
    hook calls it before taking its lock. ``signatures=False`` skips hashing the args
    when no ``maxIdleRepeatCalls`` is set. Raises TypeError for malformed ``calls``;
    never on an args value.
    """
    ran = [call for call in _check_calls(calls) if not call.skipped]
    # The twin is looked up per call so tests can switch it (see _twins.use_twin).
    hashed = (
        tuple(dict.fromkeys(_fingerprint.fingerprint((call.tool, call.args)) for call in ran))
        if signatures
        else None
    )
    return TurnDigest(bool(ran), bool(ran) and all(call.is_error for call in ran), hashed)


def _describe(item: object) -> str:
    if isinstance(item, tuple):
        return f"a tuple of {len(item)}"
    return type_name(type(item))


class RunLoop:
    """One scope's run-loop counters; the limits are plain ints or None (not set).

    ``before_turn`` before each model request, ``end_turn`` after each assistant
    turn and its tool results. Not thread-safe by itself: the hook keeps one per
    scope under its lock, and a new run starts with a new ``RunLoop``.
    """

    __slots__ = (
        "_error_streak",
        "_idle",
        "_turns",
        "max_error_batches",
        "max_idle_repeats",
        "turn_limit",
    )

    def __init__(
        self,
        turn_limit: int | None = None,
        max_error_batches: int | None = None,
        max_idle_repeats: int | None = None,
    ) -> None:
        self.turn_limit = _check_limit("turn_limit", turn_limit)
        self.max_error_batches = _check_limit("max_error_batches", max_error_batches)
        self.max_idle_repeats = _check_limit("max_idle_repeats", max_idle_repeats)
        self._turns = 0
        self._error_streak = 0
        # Canonical (tool, args) fingerprint -> consecutive turns that made that call.
        self._idle: dict[int, int] = {}

    @property
    def active(self) -> bool:
        """Is any cutoff set? (With none, the hook may skip this scope's counting.)"""
        return (
            self.turn_limit is not None
            or self.max_error_batches is not None
            or self.max_idle_repeats is not None
        )

    @property
    def turns(self) -> int:
        """Assistant turns completed so far."""
        return self._turns

    @property
    def error_streak(self) -> int:
        """Consecutive all-error turns so far (counted only when that cutoff is set)."""
        return self._error_streak

    def __repr__(self) -> str:
        return (
            f"RunLoop(turn_limit={self.turn_limit}, max_error_batches={self.max_error_batches}, "
            f"max_idle_repeats={self.max_idle_repeats}, turns={self._turns})"
        )

    def before_turn(self) -> RunStop | None:
        """A stop if the turn limit is already used up; the next model request must not go."""
        limit = self.turn_limit
        if limit is not None and self._turns >= limit:
            return RunStop(TURN_LIMIT, limit, turn_limit_message(limit))
        return None

    def end_turn(self, calls: Sequence[TurnCall | tuple[Any, ...]]) -> RunStop | None:
        """Count one finished assistant turn and its tool calls; a stop if a cutoff is reached.

        ``count_turn(digest_turn(calls))``; a hook holding a lock digests first,
        without the lock (hashing args may run host code), then counts under it.
        """
        return self.count_turn(digest_turn(calls, signatures=self.max_idle_repeats is not None))

    def count_turn(self, digest: TurnDigest) -> RunStop | None:
        """Count one digested turn (runs no host code); a stop if a cutoff is reached.

        Every counter is brought up to date before the stop is chosen (errors first,
        then idle repeats), so a host that does not stop (observe mode) keeps exact
        counts.
        """
        idle_limit = self.max_idle_repeats
        if idle_limit is not None and digest.signatures is None:
            raise ValueError("digest: made with signatures=False, but max_idle_repeats is set")
        self._turns += 1
        stop: RunStop | None = None
        error_limit = self.max_error_batches
        if error_limit is not None:
            self._error_streak = self._error_streak + 1 if digest.all_errors else 0
            if self._error_streak >= error_limit:
                stop = RunStop(ERROR_BATCHES, error_limit, error_batches_message(error_limit))
        if idle_limit is not None and digest.signatures:
            # Counts of signatures this turn did not repeat are dropped with the old dict.
            previous = self._idle
            self._idle = counts = {sig: previous.get(sig, 0) + 1 for sig in digest.signatures}
            if stop is None and max(counts.values()) >= idle_limit:
                stop = RunStop(IDLE_REPEATS, idle_limit, idle_repeats_message(idle_limit))
        return stop

"""How is one assistant turn's batch of tool calls admitted together? (SPEC §8.2 batch admission)

Each call of the batch is checked against a projection of its scope: the
history followed by one veto placeholder per earlier call of the batch, so a
batch that repeats a call counts its own repeats (``_projection``: the
history counted once, O(history + batch) for the whole batch). The first critical call is
the trigger: nothing in the batch runs, and the trigger's call (and every call
of the batch identical to it) is recorded as a veto. Otherwise every call is
recorded, in order, and its warning emitted. A batch of one is ``before_call``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any

from ._decisions import BatchDecision, Decision, blocked_text
from ._outcome import check_call_id, check_tool_name, hash_call
from ._projection import Projection
from ._records import KIND_VETO, NOT_STUCK, Verdict
from ._scopes import ScopeKey, session_of

if TYPE_CHECKING:
    from ._hook import ToolLoopGuard

__all__ = ["admit", "admit_flow", "check_calls"]

_Call = tuple[str, Any, "str | None"]


def check_calls(calls: object) -> list[_Call]:
    if isinstance(calls, (str, bytes)) or not isinstance(calls, Sequence):
        raise TypeError(
            "calls: expected a sequence of (tool, args[, tool_call_id]), "
            f"got {type(calls).__name__}"
        )
    out: list[_Call] = []
    for index, call in enumerate(calls):
        if not isinstance(call, (tuple, list)) or len(call) not in (2, 3):
            raise TypeError(
                f"calls[{index}]: expected (tool, args) or (tool, args, tool_call_id), "
                f"got {type(call).__name__}"
            )
        tool = check_tool_name(call[0])
        call_id = check_call_id(call[2] if len(call) == 3 else None)
        out.append((tool, call[1], call_id))
    return out


class _Local:
    """The steps of ``admit_flow`` on the guard's own (in-process) store.

    The hook state lives in the guard here, so a step that a shared store
    answers (the veto's ``critical_seen``, a warning's bucket) answers None,
    and the policy methods decide from this process's state.
    """

    __slots__ = ("store",)

    def __init__(self, store: Any) -> None:
        self.store = store

    def run(self, step: str, key: ScopeKey, *args: Any) -> Any:
        if step == "read":
            return self.store.window(key), [], None
        if step == "admit":
            tool, h, call_id, kind, _ = args
            self.store.append(key, tool, h, call_id, kind)
        return None


def admit(guard: ToolLoopGuard, calls: object, key: ScopeKey) -> BatchDecision:
    """``guard.before_batch`` for ``key`` on the in-process store."""
    from ._fleet import drive

    batch = check_calls(calls)
    if len(batch) == 1:
        tool, args, call_id = batch[0]
        one = guard.before_call(
            tool, args, tool_call_id=call_id, session=session_of(key), run_id=key[1]
        )
        return _single(one)
    decision: BatchDecision = drive(_Local(guard._store), admit_flow(guard, batch, key))
    return decision


def _single(one: Decision) -> BatchDecision:
    return BatchDecision(
        one.blocked, one.terminal, 0 if one.would_block else None, one.verdict, (one,),
        one.would_block,
    )  # fmt: skip


def admit_flow(guard: Any, batch: list[_Call], key: ScopeKey) -> Generator[Any, Any, BatchDecision]:
    """The batch admission as store steps (``_fleet``): the in-process and shared guards' own.

    ``batch`` is ``check_calls``'s. A shared store answers ``critical``
    (``critical_seen`` tested and set) and
    ``warn`` (the bucket, the note, the liveness); on the in-process store they
    answer None and the guard's own state decides.
    """
    from ._fleet import StoreUnavailable

    shared = bool(getattr(guard._store, "shared", False))
    if len(batch) == 1 and shared:
        tool, args, call_id = batch[0]
        return _single((yield from guard._before_flow(tool, args, call_id, key)))
    hashes = [hash_call(tool, args) for tool, args, _ in batch]
    guard._calls += len(batch)
    if not batch:
        return BatchDecision(False, False, None, NOT_STUCK, ())
    if not guard._enabled:
        for (tool, _, call_id), h in zip(batch, hashes, strict=True):
            _failed(guard, (yield ("admit", key, tool, h, call_id, 0, False)), key, tool)
        return BatchDecision(False, False, None, NOT_STUCK, tuple(_allowed(batch, hashes)))
    window = yield ("read", key, False, shared)
    if isinstance(window, StoreUnavailable):  # SPEC §10: all proceed, or all are blocked
        tool, _, call_id = batch[0]
        first = guard._unguarded(window, tool, hashes[0], key, call_id)
        if not first.would_block:
            return BatchDecision(False, False, None, NOT_STUCK, tuple(_allowed(batch, hashes)))
        return _blocked(guard, batch, hashes, 0, first)
    records, _, live = window
    churning = shared and live is not None and live[0] is not None
    verdicts: list[Verdict] = []
    trigger = None
    try:
        # O(history + batch): the history is counted once, each placeholder updates it.
        projected = Projection(records)
        for index, ((tool, args, _), h) in enumerate(zip(batch, hashes, strict=True)):
            verdict = guard._verdict(projected.stats(tool, h), tool, args, h)
            verdicts.append(verdict)
            if verdict.stuck and verdict.level == "critical":
                trigger = index
                break
            projected.add(tool, h)
    except Exception as exc:  # SPEC §8.2: a check that fails blocks the whole batch
        tool, _, call_id = batch[0]
        first = guard._fail_closed(exc, tool, hashes[0], key, call_id)
        return _blocked(guard, batch, hashes, 0, first)
    if trigger is not None and not guard._shadow:
        return (yield from _triggered(guard, batch, hashes, verdicts, trigger, key))
    shadowed = None
    if trigger is not None:  # observe mode: counted and logged, then every call runs
        tool, _, call_id = batch[trigger]
        seen = yield ("critical", key, tool, hashes[trigger], call_id, False)
        shadowed = guard._critical(
            verdicts[trigger], tool, hashes[trigger], key, call_id, veto=False,
            seen=_seen(guard, seen, key, tool),
        )  # fmt: skip
        verdicts[trigger] = NOT_STUCK
        # The calls after the trigger were not checked: check them as run.
    decisions: list[Decision] = []
    afters: list[Callable[[], None]] = []
    for index, ((tool, _, call_id), h) in enumerate(zip(batch, hashes, strict=True)):
        _failed(guard, (yield ("admit", key, tool, h, call_id, 0, False)), key, tool)
        verdict = verdicts[index] if index < len(verdicts) else NOT_STUCK
        if verdict.stuck:
            answer = yield from _warn_step(guard, verdict, tool, h, call_id, key, True)
            decision, after = guard._warned(verdict, tool, h, key, call_id, shared=answer)
            decisions.append(decision)
            afters.append(after)
        else:
            decisions.append(
                Decision(
                    False, None, verdict, None, tool_name=tool, tool_call_id=call_id, args_hash=h
                )
            )
    for after in afters:
        after()
    if not any(d.liveness_signal for d in decisions):
        if shared and churning and guard._churn:  # the committed calls end the churn
            tool = batch[-1][0]
            moved = yield ("warn", key, "", 0, tool, hashes[-1], batch[-1][2], None, 0)
            if not isinstance(moved, StoreUnavailable) and moved[1] < 0:
                guard._emit(guard._churn_event(key, tool, False))
        elif not shared and guard._churning and key in guard._churning:
            guard._settle(key)
    if shadowed is not None:
        decisions[trigger] = shadowed  # type: ignore[index]
        return BatchDecision(
            False, shadowed.terminal, trigger, shadowed.verdict, tuple(decisions), True
        )
    return BatchDecision(False, False, None, NOT_STUCK, tuple(decisions))


def _failed(guard: Any, answer: Any, key: ScopeKey, tool: str) -> None:
    """A shared store's failed step, counted and logged (the in-process one never fails)."""
    from ._fleet import StoreUnavailable

    if isinstance(answer, StoreUnavailable):
        guard._store_failed(answer, key, tool)


def _seen(guard: Any, answer: Any, key: ScopeKey, tool: str) -> bool | None:
    """A shared store's ``critical_seen`` (None: this process's state decides)."""
    from ._fleet import StoreUnavailable

    if isinstance(answer, StoreUnavailable):
        guard._store_failed(answer, key, tool)
        return None
    return answer  # type: ignore[no-any-return]


def _warn_step(
    guard: Any, verdict: Verdict, tool: str, h: int, call_id: Any, key: ScopeKey, noted: bool
) -> Generator[Any, Any, tuple[bool, int] | None]:
    """A shared store's answer for a warning (None in-process: the guard's state decides)."""
    from ._decisions import model_note
    from ._fleet import StoreUnavailable

    if not getattr(guard._store, "shared", False):
        return None
    multiple = verdict.count // guard._warning_threshold
    note = model_note(verdict.count) if noted and not guard._shadow else None
    live = int(verdict.liveness_signal is not None) if guard._churn else -1
    answer = yield ("warn", key, verdict.warning_key or "", multiple, tool, h, call_id, note, live)
    if isinstance(answer, StoreUnavailable):
        guard._store_failed(answer, key, tool)
        return (False, 0)
    return answer  # type: ignore[no-any-return]


def _allowed(batch: list[_Call], hashes: list[int]) -> list[Decision]:
    return [
        Decision(False, None, NOT_STUCK, tool_name=tool, tool_call_id=call_id, args_hash=h)
        for (tool, _, call_id), h in zip(batch, hashes, strict=True)
    ]


def _triggered(
    guard: Any,
    batch: list[_Call],
    hashes: list[int],
    verdicts: list[Verdict],
    trigger: int,
    key: ScopeKey,
) -> Generator[Any, Any, BatchDecision]:
    """Block the batch on its trigger: vetoes for the trigger's call, sibling texts for the rest."""
    afters = []
    for index in range(trigger):  # warnings shown before the trigger keep their lines, no note
        tool, _, call_id = batch[index]
        if verdicts[index].stuck:
            answer = yield from _warn_step(
                guard, verdicts[index], tool, hashes[index], call_id, key, False
            )
            _, after = guard._warned(
                verdicts[index], tool, hashes[index], key, call_id, noted=False, shared=answer
            )
            afters.append(after)
    tool, _, call_id = batch[trigger]
    seen = yield ("critical", key, tool, hashes[trigger], call_id, False)
    first = guard._critical(
        verdicts[trigger], tool, hashes[trigger], key, call_id, veto=False, deferred=afters,
        seen=_seen(guard, seen, key, tool),
    )  # fmt: skip
    for (other, _, other_id), h in zip(batch, hashes, strict=True):
        if other == tool and h == hashes[trigger]:
            answer = yield ("admit", key, other, h, other_id, KIND_VETO, False)
            _failed(guard, answer, key, tool)
    for after in afters:
        after()
    return _blocked(guard, batch, hashes, trigger, first)


def _blocked(
    guard: Any, batch: list[_Call], hashes: list[int], trigger: int, first: Decision
) -> BatchDecision:
    decisions = []
    for index, ((tool, _, call_id), h) in enumerate(zip(batch, hashes, strict=True)):
        if index == trigger:
            decisions.append(first)
            continue
        decisions.append(
            first._replace(
                result_text=blocked_text(first.reason or "", first.terminal, sibling=True),
                tool_name=tool,
                tool_call_id=call_id,
                args_hash=h,
            )
        )
    return BatchDecision(
        first.blocked, first.terminal, trigger, first.verdict, tuple(decisions), first.would_block
    )

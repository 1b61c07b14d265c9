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

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._decisions import BatchDecision, Decision, blocked_text
from ._outcome import check_call_id, check_tool_name, hash_call
from ._projection import Projection
from ._records import KIND_VETO, NOT_STUCK, Verdict
from ._scopes import ScopeKey, session_of

if TYPE_CHECKING:
    from ._hook import ToolLoopGuard

__all__ = ["admit"]

_Call = tuple[str, Any, "str | None"]


def _calls(calls: object) -> list[_Call]:
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


def admit(guard: ToolLoopGuard, calls: object, key: ScopeKey) -> BatchDecision:
    """``guard.before_batch`` for ``key``."""
    batch = _calls(calls)
    if len(batch) == 1:
        tool, args, call_id = batch[0]
        one = guard.before_call(
            tool, args, tool_call_id=call_id, session=session_of(key), run_id=key[1]
        )
        return BatchDecision(
            one.blocked, one.terminal, 0 if one.would_block else None, one.verdict, (one,),
            one.would_block,
        )  # fmt: skip
    hashes = [hash_call(tool, args) for tool, args, _ in batch]
    guard._calls += len(batch)
    store = guard._store
    if not batch:
        return BatchDecision(False, False, None, NOT_STUCK, ())
    if not guard._enabled:
        for (tool, _, call_id), h in zip(batch, hashes, strict=True):
            store.append(key, tool, h, call_id)
        return BatchDecision(False, False, None, NOT_STUCK, tuple(_allowed(batch, hashes)))
    verdicts: list[Verdict] = []
    trigger = None
    try:
        # O(history + batch): the history is counted once, each placeholder updates it.
        projected = Projection(store.window(key))
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
        return _triggered(guard, batch, hashes, verdicts, trigger, key)
    shadowed = None
    if trigger is not None:  # observe mode: counted and logged, then every call runs
        shadowed = guard._critical(
            verdicts[trigger],
            batch[trigger][0],
            hashes[trigger],
            key,
            batch[trigger][2],
            veto=False,
        )
        verdicts[trigger] = NOT_STUCK
        # The calls after the trigger were not checked: check them as run.
    decisions: list[Decision] = []
    afters: list[Callable[[], None]] = []
    for index, ((tool, _, call_id), h) in enumerate(zip(batch, hashes, strict=True)):
        store.append(key, tool, h, call_id)
        verdict = verdicts[index] if index < len(verdicts) else NOT_STUCK
        if verdict.stuck:
            decision, after = guard._warned(verdict, tool, h, key, call_id)
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
    if guard._churning and key in guard._churning and not any(d.liveness_signal for d in decisions):
        guard._settle(key)
    if shadowed is not None:
        decisions[trigger] = shadowed  # type: ignore[index]
        return BatchDecision(
            False, shadowed.terminal, trigger, shadowed.verdict, tuple(decisions), True
        )
    return BatchDecision(False, False, None, NOT_STUCK, tuple(decisions))


def _allowed(batch: list[_Call], hashes: list[int]) -> list[Decision]:
    return [
        Decision(False, None, NOT_STUCK, tool_name=tool, tool_call_id=call_id, args_hash=h)
        for (tool, _, call_id), h in zip(batch, hashes, strict=True)
    ]


def _triggered(
    guard: ToolLoopGuard,
    batch: list[_Call],
    hashes: list[int],
    verdicts: list[Verdict],
    trigger: int,
    key: ScopeKey,
) -> BatchDecision:
    """Block the batch on its trigger: vetoes for the trigger's call, sibling texts for the rest."""
    afters = []
    for index in range(trigger):  # warnings shown before the trigger keep their lines, no note
        tool, _, call_id = batch[index]
        if verdicts[index].stuck:
            _, after = guard._warned(
                verdicts[index], tool, hashes[index], key, call_id, noted=False
            )
            afters.append(after)
    tool, _, call_id = batch[trigger]
    first = guard._critical(
        verdicts[trigger], tool, hashes[trigger], key, call_id, veto=False, deferred=afters
    )
    for (other, _, other_id), h in zip(batch, hashes, strict=True):
        if other == tool and h == hashes[trigger]:
            guard._store.append(key, other, h, other_id, KIND_VETO)
    for after in afters:
        after()
    return _blocked(guard, batch, hashes, trigger, first)


def _blocked(
    guard: ToolLoopGuard, batch: list[_Call], hashes: list[int], trigger: int, first: Decision
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

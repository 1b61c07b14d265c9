"""What does the gateway hook hand back to its host? (SPEC §5, §8.2, §8.3, §8.7, §8.12, §9.4)

The values ``ToolLoopGuard`` returns and raises — a call's ``Decision``, a tool
batch's ``BatchDecision``, ``LoopEvent``, ``Liveness``, ``Reconciliation`` and
the two exceptions — and the exact texts the model and the host read when a
call is blocked, a run must end, or a warning needs the model's attention.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ._records import NOT_STUCK, Verdict

__all__ = [
    "TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE",
    "BatchDecision",
    "Decision",
    "EventKind",
    "Liveness",
    "LoopEvent",
    "Reconciliation",
    "ToolLoopBlocked",
    "ToolLoopRunTerminated",
    "blocked_text",
    "model_note",
]

EventKind = Literal["warning", "block", "guard_armed", "compaction_abort", "churn", "run_stop"]

#: What a run ends with when recovery met a second critical loop (SPEC §8.2).
TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE = (
    "Stopped this run because tool-loop recovery encountered another critical loop. "
    "No blocked tool action was executed."
)
_RECOVERABLE = (
    "\n\nDo not repeat this exact tool action. Reassess the task. You may answer the user, ask "
    "for clarification, or continue with a different tool or different arguments."
)
_TERMINAL = (
    "\n\nCritical tool-loop recovery failed because another critical loop was detected. "
    "This run is stopping now."
)
_RECOVERABLE_SIBLING = (
    "This tool was not executed because another call in the batch triggered critical tool-loop "
    "recovery. Reassess the task before choosing the next action."
)
_TERMINAL_SIBLING = (
    "This tool was not executed because another call in the batch repeated a critical tool "
    "loop. This run is stopping now."
)


def blocked_text(message: str, terminal: bool, sibling: bool = False) -> str:
    """The tool result the model receives for a blocked call (SPEC §8.2)."""
    if sibling:
        return _TERMINAL_SIBLING if terminal else _RECOVERABLE_SIBLING
    return message + (_TERMINAL if terminal else _RECOVERABLE)


def model_note(count: int) -> str:
    """The note a warned call's result carries to the model (SPEC §8.12)."""
    return (
        f"[System note: Tool-loop warning after {count} repeated calls. Change your approach "
        "or stop if you are not making progress.]"
    )


class Decision(NamedTuple):
    """What ``before_call`` decided: run the call (maybe with a warning) or block it.

    ``blocked`` is what the host must do; ``would_block`` what enforce mode
    would do (the two differ only in shadow mode). ``result_text`` is the
    blocked call's tool result for the model, ``model_note`` the note a warned
    call's result gets (``after_call`` adds it), ``terminal`` says the run
    must end (a second critical in the run).
    """

    blocked: bool
    reason: str | None
    verdict: Verdict
    warning: Verdict | None = None
    terminal: bool = False
    result_text: str | None = None
    model_note: str | None = None
    liveness_signal: str | None = None
    would_block: bool = False
    tool_name: str | None = None
    tool_call_id: str | None = None
    args_hash: int | None = None

    def blocked_result(self) -> dict[str, Any]:
        """The blocked call's tool result, shaped as a loop veto (SPEC §8.2)."""
        verdict = self.verdict
        details: dict[str, Any] = {
            "status": "blocked",
            "deniedReason": "tool-loop",
            "intervention": {
                "kind": "critical-tool-loop",
                "toolCallId": self.tool_call_id,
                "toolName": self.tool_name,
                "actionKey": f"{(self.args_hash or 0) & 0xFFFFFFFFFFFFFFFF:016x}",
                "detector": verdict.detector,
                "count": verdict.count,
                "reason": self.reason if self.reason is not None else verdict.message,
            },
        }
        text = self.result_text if self.result_text is not None else (verdict.message or "")
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": text}],
            "details": details,
            "isError": True,
        }
        if self.terminal:
            result["terminate"] = True
        return result


ALLOWED = Decision(False, None, NOT_STUCK)


class BatchDecision(NamedTuple):
    """What ``before_batch`` decided for one assistant turn's tool calls (SPEC §8.2)."""

    blocked: bool
    terminal: bool
    trigger: int | None
    verdict: Verdict
    decisions: tuple[Decision, ...]
    would_block: bool = False


@dataclass(frozen=True, slots=True)
class LoopEvent:
    """What ``on_event`` receives. Never carries arguments or results."""

    kind: EventKind
    session: Hashable
    run_id: str | None
    tool_name: str
    detector: str | None
    level: str | None
    count: int
    message: str | None
    paired_tool_name: str | None = None
    terminal: bool = False
    tool_call_id: str | None = None
    shadow: bool = False


class Liveness(NamedTuple):
    """Is the scope's run churning through argument variants (SPEC §8.3)?

    ``churn_since`` is when the churn started, ``churn_observed_at`` when it
    was last seen (``time.monotonic()`` seconds), both None when not churning.
    """

    churning: bool = False
    churn_since: float | None = None
    churn_observed_at: float | None = None


@dataclass(frozen=True, slots=True)
class Reconciliation:
    """``reconcile_call``'s answer for a call a pre-call hook rewrote (SPEC §8.7)."""

    active: bool = False
    count: int = 0
    variant_count: int = 0
    matched_pending_call: bool = False
    execution_params_changed: bool = False


class ToolLoopBlocked(Exception):
    """Raised by a wrapped tool instead of running a call the detector blocked."""

    def __init__(
        self, verdict: Verdict, reason: str | None = None, result_text: str | None = None
    ) -> None:
        self.verdict = verdict
        self.reason = reason if reason is not None else verdict.message
        self.result_text = result_text
        super().__init__(self.reason)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.verdict, self.reason, self.result_text))


class ToolLoopRunTerminated(ToolLoopBlocked):
    """A second critical loop in the run: the host ends the run, with no further model request."""

    def __init__(
        self, verdict: Verdict, reason: str | None = None, result_text: str | None = None
    ) -> None:
        super().__init__(verdict, reason, result_text)
        self.message = TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE
        self.args = (self.message,)

    def __str__(self) -> str:
        return self.message


class StoreUnavailable(Exception):
    """A shared store's step failed or ran past its ``timeout_seconds`` (SPEC §10).

    ``step`` names the step, ``cause`` the type of the error behind it (never
    its text, which may hold a value).
    """

    def __init__(self, step: str, cause: BaseException) -> None:
        super().__init__(f"store step {step!r} failed: {type(cause).__name__}")
        self.step = step
        self.cause = type(cause).__name__

"""How does a guard decide a call when a fleet of workers shares its store? (SPEC §10, §12.3)

With a shared store (``loopcore.redis``) a call's step is: admit it (one
script: append it pending, read the window as it was), count and decide
here with the same scan and verdict table as in-process, then, only if it is
stuck, one more script: the veto with ``critical_seen`` tested and set, or the
warning's bucket with its note and the churn's liveness. An outcome is one
script (attach, with the note pending for it). The policy is ``StuckPolicy``'s.

Each flow is written once, as a generator of store steps: ``ToolLoopGuard``
runs it on a ``RedisStore``, ``AsyncToolLoopGuard`` awaits each step of an
``AsyncRedisStore``. A step that fails (``StoreUnavailable``) takes the store's
``on_store_error`` policy: the call proceeds unguarded (``"allow"``) or is
blocked with ``loop_store_unavailable`` (``"block"``); nothing escapes.

Shared: the ring, warning buckets, ``critical_seen``, pending notes, the
churn's liveness, the post-compaction guard and the run-loop counters (the
last two as versioned documents, ``_fleet_state``). Kept per worker: its
``stats()`` counters and the storm control of its log.
"""

from __future__ import annotations

from collections.abc import Collection, Generator, Hashable, Sequence
from typing import Any

from . import _outcome
from ._compaction import arm_with_baseline, observed
from ._counts import quiet, scan_records
from ._decisions import (
    ALLOWED,
    BatchDecision,
    Decision,
    Liveness,
    Reconciliation,
    StoreUnavailable,
    blocked_text,
)
from ._fleet_codec import record_of
from ._fleet_state import dump_guard, dump_runloop, load_guard, load_runloop
from ._guard import close_quietly, log_window_closed, observe_quietly
from ._hook import ToolLoopGuard
from ._logs import extra, logger, scope_suffix, storm_level
from ._outcome import check_call_id, hash_call, outcome_of
from ._percall_py import UNSCOPED
from ._records import KIND_VETO, Verdict
from ._rules import LOOP_STORE_UNAVAILABLE
from ._runloop import RunStop
from ._scopes import ScopeKey, scope_key, session_of
from ._stuck import _annotate

__all__ = ["FleetGuard", "Flow", "StoreUnavailable", "drive"]

_UNAVAILABLE_MESSAGE = "Tool execution was blocked because the loop-detection store is unavailable."

#: A store step: its name (``step_<name>`` of the store) and arguments.
Step = tuple[Any, ...]
Flow = Generator[Step, Any, Any]


def _failed(answer: object) -> bool:
    return isinstance(answer, StoreUnavailable)


def drive(store: Any, flow: Flow) -> Any:
    """Runs a flow on a sync store; a failed step is answered with its error."""
    try:
        step = next(flow)
        while True:
            try:
                answer = store.run(*step)
            except StoreUnavailable as exc:
                answer = exc
            step = flow.send(answer)
    except StopIteration as done:
        return done.value


class FleetFlows:
    """The shared-store flows of ``before_call``, ``after_call`` and their neighbours.

    Mixed into a ``ToolLoopGuard`` (whose policy and counters they use).
    """

    def _store_failed(self: Any, failure: Any, key: ScopeKey, tool_name: str | None) -> None:
        """Counted, and logged with storm control (the error's type only: never a value)."""
        with self._lock:
            self._counters.store_error()
            n = self._counters.store_errors
        level = storm_level(n)
        if not logger.isEnabledFor(level):
            return
        if failure.step != "admit":
            then = "the step is skipped"
        elif self._store.on_store_error == "block":
            then = "the call is blocked"
        else:
            then = "the call proceeds unguarded"
        logger.log(
            level,
            "loop-detection store unavailable (%s in %s, %d so far); %s%s",
            failure.cause,
            failure.step,
            n,
            then,
            scope_suffix(session_of(key), key[1]),
            extra=extra("store_error", session_of(key), key[1], tool_name, LOOP_STORE_UNAVAILABLE),
        )

    def _unguarded(
        self: Any, failure: Any, tool_name: str, args_hash: int, key: ScopeKey, call_id: Any
    ) -> Decision:
        """SPEC §10: a failed admission proceeds, or blocks without a veto or recover-once."""
        self._store_failed(failure, key, tool_name)
        if self._store.on_store_error != "block":
            return ALLOWED
        verdict = Verdict(True, "critical", LOOP_STORE_UNAVAILABLE, 1, _UNAVAILABLE_MESSAGE)
        enforce = not self._shadow
        with self._lock:
            if enforce:
                self._counters.blocked(LOOP_STORE_UNAVAILABLE, "critical", False)
            else:
                self._counters.shadow(LOOP_STORE_UNAVAILABLE, "critical", "block")
        text = blocked_text(_UNAVAILABLE_MESSAGE, False) if enforce else None
        decision = Decision(
            enforce, _UNAVAILABLE_MESSAGE, verdict, None, False, text, None, None, True,
            tool_name, call_id, args_hash,
        )  # fmt: skip
        if self._on_event is not None:
            self._blocked_event(decision, key)
        return decision

    def _before_flow(self: Any, tool_name: str, args: Any, call_id: Any, key: ScopeKey) -> Flow:
        args_hash = hash_call(tool_name, args)
        check_call_id(call_id)
        self._calls += 1
        if not self._enabled:
            answer = yield ("admit", key, tool_name, args_hash, call_id, 0, False)
            if _failed(answer):
                self._store_failed(answer, key, tool_name)
            return ALLOWED
        answer = yield ("admit", key, tool_name, args_hash, call_id, 0, True)
        if _failed(answer):
            return self._unguarded(answer, tool_name, args_hash, key, call_id)
        records, churning = answer
        try:
            stats = scan_records(records, tool_name, args_hash)
            verdict = (
                None
                if quiet(stats, self._alarm, self._unknown_alarm)
                else self._verdict(stats, tool_name, args, args_hash)
            )
        except Exception as exc:  # SPEC §8.2: a check that fails blocks
            return self._fail_closed(exc, tool_name, args_hash, key, call_id)
        if verdict is None or not verdict.stuck:
            if churning and self._churn:  # a committed call that is not churning ends it
                answer = yield ("warn", key, "", 0, tool_name, args_hash, call_id, None, 0)
                if _failed(answer):
                    self._store_failed(answer, key, tool_name)
                elif answer[1] < 0:
                    self._emit(self._churn_event(key, tool_name, False))
            return ALLOWED
        if verdict.level == "critical":
            seen = yield ("critical", key, tool_name, args_hash, call_id, not self._shadow)
            if _failed(seen):
                self._store_failed(seen, key, tool_name)
                seen = None  # this worker's own recover-once state decides
            return self._critical(verdict, tool_name, args_hash, key, call_id, False, seen=seen)
        multiple = verdict.count // self._warning_threshold
        note = None if self._shadow else _note(verdict.count)
        live = int(verdict.liveness_signal is not None) if self._churn else -1
        wkey = verdict.warning_key or ""
        answer = yield ("warn", key, wkey, multiple, tool_name, args_hash, call_id, note, live)
        if _failed(answer):
            self._store_failed(answer, key, tool_name)
            answer = (False, 0)
        decision, after = self._warned(verdict, tool_name, args_hash, key, call_id, shared=answer)
        after()
        return decision

    def _after_flow(
        self: Any,
        tool_name: str,
        args: Any,
        result: Any,
        error: Any,
        call_id: Any,
        key: ScopeKey,
    ) -> Flow:
        args_hash = hash_call(tool_name, args)
        check_call_id(call_id)
        result_hash, unknown, kind, identity, no_progress = outcome_of(
            tool_name,
            args,
            result=result,
            error=error,
            normalizers=self._normalizers,
            send_tools=self._send_tools,
        )
        record = note = None
        guard: Any = None
        # A blocked result passed back is not recorded (the veto is), nor is nothing.
        if kind != KIND_VETO and result_hash is not None:
            answer = yield (
                "attach", key, tool_name, args_hash, call_id, result_hash, unknown, kind,
                identity, no_progress, True,
            )  # fmt: skip
            if _failed(answer):
                self._store_failed(answer, key, tool_name)
            else:
                record, note, guard = answer
        else:
            # Nothing recorded, but an armed guard still counts the attempt.
            answer = yield ("state", key, "g")
            if _failed(answer):
                self._store_failed(answer, key, tool_name)
            else:
                guard = answer[:2]
        if guard is not None and guard[0]:
            observed_hashes = observed(record, tool_name, args)
            yield from self._observe_flow(key, tool_name, observed_hashes, *guard)
        given = result is not _outcome.UNSET
        if note is not None and given and not self._shadow:
            return _annotate(result, note)
        return result if given else None

    def _observe_flow(
        self: Any, key: ScopeKey, tool_name: str, hashes: tuple[int, int | None], blob: Any,
        version: Any,
    ) -> Flow:  # fmt: skip
        """One attempt for the armed guard, written back unless another worker wrote first."""
        window = self._detector.config.post_compaction_guard.window_size
        while True:
            guard = load_guard(blob, window)
            if not guard.armed:
                return None
            verdict, closed = observe_quietly(guard, tool_name, *hashes)
            answer = yield ("put_state", key, "g", version, dump_guard(guard))
            if _failed(answer):
                self._store_failed(answer, key, tool_name)
                break  # this worker's observation still stands
            written, blob, version = answer
            if written:
                break
        with self._lock:
            self._count_abort(verdict)
        self._observed(verdict, closed, key, tool_name, window)
        return None

    def _turn_flow(self: Any, key: ScopeKey, digest: Any) -> Flow:
        """``before_turn`` (``digest`` None) or ``end_turn`` on the shared run-loop counters."""
        answer = yield ("state", key, "l")
        while True:
            if _failed(answer):
                self._store_failed(answer, key, None)
                return None
            blob, version, stopped = answer
            if stopped:
                return None
            runs = load_runloop(blob, self._run_guards)
            if digest is None:
                return self._run_stop(runs.before_turn(), key)
            stop = runs.count_turn(digest)
            put = yield ("put_state", key, "l", version, dump_runloop(runs))
            if _failed(put):
                answer = put
                continue
            if put[0]:
                return self._run_stop(stop, key)
            answer = (put[1], put[2], False)

    def _reconcile_flow(
        self: Any, tool_name: str, args: Any, call_id: Any, key: ScopeKey, threshold: Any
    ) -> Flow:
        args_hash, threshold = self._detector._reconcile_args(tool_name, args, call_id, threshold)
        found = yield ("reconcile", key, tool_name, args_hash, call_id)
        if _failed(found):
            self._store_failed(found, key, tool_name)
            found = (False, False, 0, 0)
        reconciliation = self._detector._reconciled(found, threshold)
        if reconciliation.matched_pending_call and self._churn:
            live = int(reconciliation.active)
            moved = yield ("warn", key, "", 0, tool_name, args_hash, call_id, None, live)
            if _failed(moved):
                self._store_failed(moved, key, tool_name)
            elif moved[1]:
                self._emit(self._churn_event(key, tool_name, moved[1] > 0))
        return reconciliation

    def _liveness_flow(self: Any, key: ScopeKey) -> Flow:
        answer = yield ("read", key, False, True)
        if _failed(answer):
            self._store_failed(answer, key, None)
            return Liveness()
        since, observed = answer[2]
        if since is None:
            return Liveness()
        return Liveness(True, float(since), None if observed is None else float(observed))

    def _end_flow(self: Any, key: ScopeKey) -> Flow:
        answer = yield ("drop", key)
        if _failed(answer):
            self._store_failed(answer, key, None)
        elif answer[1]:
            window = self._detector.config.post_compaction_guard.window_size
            closed = close_quietly(load_guard(answer[1], window))
            if closed is not None:
                log_window_closed(closed, *self._scoped("guard_window_closed", key))
        self._end_local(key)

    def _end_session_flow(self: Any, session: Hashable) -> Flow:
        answer = yield ("drop_session", session)
        if _failed(answer):
            self._store_failed(answer, scope_key(session, None), None)
        self._end_session_local(session)

    def _arm_flow(self: Any, key: ScopeKey) -> Flow:
        config = self._detector.config
        if config.enabled is False:
            return None
        window = config.post_compaction_guard.window_size
        answer = yield ("read", key, True)
        if _failed(answer):
            self._store_failed(answer, key, None)
            return None
        records, ids, _ = answer
        history = [record_of(key, r, _text(i)) for r, i in zip(records, ids, strict=False)]
        state = yield ("state", key, "g")
        while True:
            if _failed(state):
                self._store_failed(state, key, None)
                return None
            guard = load_guard(state[0], window)
            armed, closed = arm_with_baseline(guard, history)
            put = yield ("put_state", key, "g", state[1], dump_guard(guard))
            if _failed(put) or put[0]:
                if _failed(put):
                    self._store_failed(put, key, None)
                break
            state = (put[1], put[2], False)
        self._log_arming(key, window, armed, closed)
        return None

    def _release_flow(self: Any, tool_call_ids: Any, key: ScopeKey) -> Flow:
        if isinstance(tool_call_ids, str) or not isinstance(tool_call_ids, Collection):
            raise TypeError(
                f"tool_call_ids: expected a collection of str, got {type(tool_call_ids).__name__}"
            )
        answer = yield ("release", key, [i for i in tool_call_ids if type(i) is str])
        if _failed(answer):
            self._store_failed(answer, key, None)
            return 0
        return answer


def _text(value: Any) -> str | None:
    return value.decode("utf-8", "surrogatepass") if value else None


def _note(count: int) -> str:
    from ._decisions import model_note

    return model_note(count)


class FleetGuard(FleetFlows, ToolLoopGuard):
    """``ToolLoopGuard`` on a shared sync store (``ToolLoopGuard(store=RedisStore(...))``)."""

    def before_call(
        self,
        tool_name: str,
        args: Any,
        *,
        tool_call_id: str | None = None,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> Decision:
        key = self._key(session, run_id)
        decision: Decision = drive(
            self._store, self._before_flow(tool_name, args, tool_call_id, key)
        )
        return decision

    def after_call(
        self,
        tool_name: str,
        args: Any,
        *,
        result: Any = _outcome.UNSET,
        error: Any = _outcome.UNSET,
        tool_call_id: str | None = None,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> Any:
        key = self._key(session, run_id)
        flow = self._after_flow(tool_name, args, result, error, tool_call_id, key)
        return drive(self._store, flow)

    def reconcile(
        self,
        tool_name: str,
        args: Any,
        *,
        tool_call_id: str | None = None,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
        warning_threshold: int | None = None,
    ) -> Reconciliation:
        key = self._key(session, run_id)
        flow = self._reconcile_flow(tool_name, args, tool_call_id, key, warning_threshold)
        answer: Reconciliation = drive(self._store, flow)
        return answer

    reconcile_call = reconcile

    def liveness(self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED) -> Liveness:
        key = self._key(session, run_id)
        return drive(self._store, self._liveness_flow(key))  # type: ignore[no-any-return]

    def end_run(self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED) -> None:
        key = self._key(session, run_id)
        drive(self._store, self._end_flow(key))

    def end_session(self, session: Hashable) -> None:
        drive(self._store, self._end_session_flow(session))

    def arm_post_compaction(
        self, *, session: Hashable = UNSCOPED, run_id: str | None = UNSCOPED
    ) -> None:
        key = self._key(session, run_id)
        drive(self._store, self._arm_flow(key))

    def release(
        self,
        tool_call_ids: Collection[str],
        *,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> int:
        key = self._key(session, run_id)
        removed: int = drive(self._store, self._release_flow(tool_call_ids, key))
        return removed

    def before_batch(
        self,
        calls: Sequence[Sequence[Any]],
        *,
        session: Hashable = UNSCOPED,
        run_id: str | None = UNSCOPED,
    ) -> BatchDecision:
        from ._batch_admission import admit_flow, check_calls

        key = self._key(session, run_id)
        decision: BatchDecision = drive(self._store, admit_flow(self, check_calls(calls), key))
        return decision

    def _turned(self, key: ScopeKey, digest: Any) -> RunStop | None:
        stop: RunStop | None = drive(self._store, self._turn_flow(key, digest))
        return stop

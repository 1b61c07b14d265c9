"""Does loopcore guard an OpenAI Agents SDK agent's tool loop as a gateway would?

Every test runs the real SDK (``Runner.run``) against a scripted ``Model``
that answers from a plan with no network: it records every input it is sent,
so the tests assert on what the model actually received.
"""

from __future__ import annotations

from .conftest import require

framework = require("agents", "openai-agents")

import asyncio  # noqa: E402
import copy  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from collections.abc import AsyncIterator, Callable  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from agents import (  # noqa: E402
    Agent,
    FunctionTool,
    ModelResponse,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    Runner,
    Tool,
    ToolInputGuardrailTripwireTriggered,
    Usage,
    UserError,
    WebSearchTool,
    function_tool,
    set_tracing_disabled,
)
from agents.models.interface import Model  # noqa: E402
from agents.run_config import ToolExecutionConfig  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from loopcore import CompactionLoopPersisted, Decision, ToolLoopGuard  # noqa: E402
from loopcore.integrations.openai_agents import (  # noqa: E402
    GuardedTools,
    LoopGuard,
    guard_tools,
    loop_stop,
)

os.environ.setdefault("OPENAI_API_KEY", "sk-test-not-used")
set_tracing_disabled(True)

SMALL = {
    "enabled": True,
    "warningThreshold": 3,
    "criticalThreshold": 5,
    "globalCircuitBreakerThreshold": 8,
}
#: The SDK's default failure_error_function text (the SDK's, not loopcore's).
SDK_ERROR_TEXT = "An error occurred while running the tool. Please try again."


def note(count: int) -> str:
    return (
        f"[System note: Tool-loop warning after {count} repeated calls. Change your approach "
        "or stop if you are not making progress.]"
    )


class Scripted(Model):
    """Calls the planned tools, one per turn, then answers "done"; keeps every input."""

    def __init__(self, plan: list[tuple[str, dict[str, Any]]], prefix: str = "call") -> None:
        self.plan = plan
        self.prefix = prefix  # call ids are unique within a run context
        self.inputs: list[list[Any]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> ModelResponse:
        self.inputs.append(json.loads(json.dumps(input, default=str)))
        turn = len(self.inputs)
        if turn <= len(self.plan):
            name, args_ = self.plan[turn - 1]
            item: Any = ResponseFunctionToolCall(
                type="function_call",
                call_id=f"{self.prefix}-{turn}",
                name=name,
                arguments=json.dumps(args_),
                id=f"fc-{turn}",
                status="completed",
            )
        else:
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            item = ResponseOutputMessage(
                id="msg", type="message", role="assistant", status="completed", content=[text]
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests do not stream")

    def outputs(self) -> list[Any]:
        """The tool outputs in the last input the model received, in order."""
        return [i["output"] for i in self.inputs[-1] if i.get("type") == "function_call_output"]


def status_tool(
    executions: list[str], result: Callable[[], str] = lambda: "pending"
) -> FunctionTool:
    @function_tool
    def status(job: str) -> str:
        """Report a job's status."""
        executions.append(job)
        return result()

    return status


def loop(n: int, tool: str = "status") -> list[tuple[str, dict[str, Any]]]:
    return [(tool, {"job": "j1"})] * n


def run(agent: Agent[Any], **kwargs: Any) -> Any:
    return asyncio.run(Runner.run(agent, "check the job", max_turns=50, **kwargs))


def agent_with(tools: list[Tool], model: Scripted) -> Agent[Any]:
    return Agent(name="worker", instructions="work", model=model, tools=tools)


def test_the_warning_reaches_the_model_at_the_default_thresholds() -> None:
    executions: list[str] = []
    model = Scripted(loop(11))
    tools = guard_tools([status_tool(executions)], config={"enabled": True})
    result = run(agent_with(tools, model))
    seen = model.outputs()
    assert seen[:10] == ["pending"] * 10
    assert seen[10] == "pending\n\n" + note(10)  # the 11th identical call is warned about
    assert len(executions) == 11
    assert result.final_output == "done"
    assert tools.guard.stats().warnings == 1


def test_a_blocked_call_does_not_run_and_the_model_gets_the_block_text() -> None:
    executions: list[str] = []
    model = Scripted(loop(6))
    tools = guard_tools([status_tool(executions)], config=SMALL)
    result = run(agent_with(tools, model))
    seen = model.outputs()
    assert seen[3] == "pending\n\n" + note(3)
    assert seen[5].startswith("CRITICAL: Called status with identical outcomes 5 times.")
    assert "Do not repeat this exact tool action" in seen[5]
    assert len(executions) == 5  # the 6th call never ran
    assert result.final_output == "done"  # a first critical is recoverable: the run goes on
    stats = tools.guard.stats()
    assert (stats.blocks, stats.terminations) == (1, 0)
    rejected = [
        r for r in result.tool_input_guardrail_results if r.output.behavior["type"] != "allow"
    ]
    assert [r.output.behavior["type"] for r in rejected] == ["reject_content"]


def test_the_second_critical_ends_the_run_without_another_model_request() -> None:
    executions: list[str] = []
    model = Scripted(loop(30))  # a model that never stops on its own
    tools = guard_tools([status_tool(executions)], config=SMALL)
    with pytest.raises(ToolInputGuardrailTripwireTriggered) as raised:
        run(agent_with(tools, model))
    decision = loop_stop(raised.value)
    assert isinstance(decision, Decision)
    assert decision.blocked
    assert decision.terminal
    assert decision.result_text is not None
    assert "This run is stopping now." in decision.result_text
    assert len(executions) == 5
    assert len(model.inputs) == 7  # asked for calls 1..7; the 7th ended the run
    assert "Do not repeat this exact tool action" in model.outputs()[5]
    stats = tools.guard.stats()
    assert (stats.blocks, stats.terminations) == (2, 1)


def test_shadow_mode_changes_nothing_the_model_sees() -> None:
    plain_runs: list[str] = []
    plain = Scripted(loop(12))
    run(agent_with([status_tool(plain_runs)], plain))

    observed_runs: list[str] = []
    observed = Scripted(loop(12))
    tools = guard_tools([status_tool(observed_runs)], config=SMALL, mode="observe")
    result = run(agent_with(tools, observed))

    assert observed.inputs == plain.inputs  # every request, turn by turn
    assert observed_runs == plain_runs
    assert len(plain_runs) == 12
    assert result.final_output == "done"
    stats = tools.guard.stats()
    assert stats.blocks == 0
    assert stats.shadow_blocks >= 2
    assert stats.warnings >= 1


def test_stats_count_what_the_guard_did() -> None:
    loop_guard = LoopGuard(config=SMALL)
    executions: list[str] = []
    model = Scripted(loop(6))
    tools = loop_guard.tools([status_tool(executions)])
    assert isinstance(tools, GuardedTools)
    assert tools.loop_guard is loop_guard
    assert tools.guard is loop_guard.guard
    run(agent_with(tools, model))
    stats = loop_guard.stats()
    assert stats.calls == 6  # the blocked call is checked too
    assert (stats.warnings, stats.blocks) == (1, 1)
    assert stats.by_detector["generic_repeat"] == 2


def test_tool_errors_are_recorded_as_errors_and_carry_the_note() -> None:
    executions: list[str] = []

    def fail() -> str:
        raise RuntimeError("backend down")

    loop_guard = LoopGuard(config=SMALL)
    model = Scripted(loop(4))
    result = run(agent_with(loop_guard.tools([status_tool(executions, fail)]), model))
    seen = model.outputs()
    assert seen[:3] == [SDK_ERROR_TEXT] * 3
    assert seen[3] == SDK_ERROR_TEXT + "\n\n" + note(3)
    session, run_id = loop_guard.scope_of(result.context_wrapper)
    history = loop_guard.guard.detector.history(session=session, run_id=run_id)
    assert len(history) == 4
    assert all(r.no_progress for r in history)  # errors, not results


def test_results_are_not_errors() -> None:
    loop_guard = LoopGuard(config=SMALL)
    result = run(agent_with(loop_guard.tools([status_tool([])]), Scripted(loop(2))))
    session, run_id = loop_guard.scope_of(result.context_wrapper)
    history = loop_guard.guard.detector.history(session=session, run_id=run_id)
    assert [r.no_progress for r in history] == [False, False]


def test_an_exception_the_sdk_does_not_catch_is_recorded_and_propagates() -> None:
    @function_tool(failure_error_function=None)
    def status(job: str) -> str:
        """Report a job's status."""
        raise RuntimeError("backend down")

    loop_guard = LoopGuard(config=SMALL)
    seen: list[RunContextWrapper[Any]] = []

    class Keep(RunHooks[Any]):
        async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
            seen.append(context)

    with pytest.raises(UserError) as raised:
        run(agent_with(loop_guard.tools([status]), Scripted(loop(1))), hooks=Keep())
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert loop_stop(raised.value) is None
    session, run_id = loop_guard.scope_of(seen[0])
    history = loop_guard.guard.detector.history(session=session, run_id=run_id)
    assert [r.no_progress for r in history] == [True]


async def _two_runs(tools: list[Tool]) -> tuple[Any, Any, Scripted, Scripted]:
    first, second = Scripted(loop(5)), Scripted(loop(5))
    one, two = await asyncio.gather(
        Runner.run(agent_with(tools, first), "go"),
        Runner.run(agent_with(tools, second), "go"),
    )
    return one, two, first, second


def test_concurrent_runs_have_their_own_scope() -> None:
    executions: list[str] = []
    loop_guard = LoopGuard(config=SMALL)
    tools = loop_guard.tools([status_tool(executions)])
    one, two, first, second = asyncio.run(_two_runs(tools))
    # One scope for both would block the 6th of their 10 calls.
    assert len(executions) == 10
    for model in (first, second):
        assert model.outputs()[3] == "pending\n\n" + note(3)
    assert loop_guard.guard.stats().blocks == 0
    scopes = {loop_guard.scope_of(one.context_wrapper), loop_guard.scope_of(two.context_wrapper)}
    assert len(scopes) == 2
    for session, run_id in scopes:
        assert session is None
        assert len(loop_guard.guard.detector.history(session=None, run_id=run_id)) == 5


def test_every_call_of_a_run_is_in_one_scope_and_the_session_comes_from_the_context() -> None:
    loop_guard = LoopGuard(config=SMALL)
    tools = loop_guard.tools([status_tool([])])
    result = run(agent_with(tools, Scripted(loop(4))), context={"session_id": "chat-1"})
    session, run_id = loop_guard.scope_of(result.context_wrapper)
    assert session == "chat-1"
    history = loop_guard.guard.detector.history(session="chat-1", run_id=run_id)
    assert [r.tool_call_id for r in history] == ["call-1", "call-2", "call-3", "call-4"]


def test_session_key_picks_the_session() -> None:
    class Ctx:
        def __init__(self, user: str) -> None:
            self.user = user

    loop_guard = LoopGuard(config=SMALL, session_key=lambda wrapper: ("user", wrapper.context.user))
    result = run(
        agent_with(loop_guard.tools([status_tool([])]), Scripted(loop(2))), context=Ctx("ada")
    )
    session, run_id = loop_guard.scope_of(result.context_wrapper)
    assert session == ("user", "ada")
    assert len(loop_guard.guard.detector.history(session=session, run_id=run_id)) == 2


def test_a_failing_session_key_does_not_take_the_run_down() -> None:
    def broken(wrapper: RunContextWrapper[Any]) -> str:
        raise KeyError("no session")

    loop_guard = LoopGuard(config=SMALL, session_key=broken)
    executions: list[str] = []
    result = run(agent_with(loop_guard.tools([status_tool(executions)]), Scripted(loop(6))))
    assert len(executions) == 5  # still guarded, in the run's own scope
    assert loop_guard.scope_of(result.context_wrapper)[0] is None


def test_each_runner_run_is_a_new_run_even_with_a_reused_context_wrapper() -> None:
    executions: list[str] = []
    loop_guard = LoopGuard(config=SMALL)
    tools = loop_guard.tools([status_tool(executions)])
    wrapper: RunContextWrapper[Any] = RunContextWrapper(context={"session_id": "chat-1"})
    first = run(agent_with(tools, Scripted(loop(4), "first")), context=wrapper)
    second = run(agent_with(tools, Scripted(loop(4), "second")), context=wrapper)
    assert len(executions) == 8  # one scope for both would block the 6th call
    assert loop_guard.guard.stats().blocks == 0
    assert first.context_wrapper is second.context_wrapper


def test_a_finished_run_is_forgotten_once_collected() -> None:
    loop_guard = LoopGuard(config=SMALL)
    tools = loop_guard.tools([status_tool([])])
    result = run(agent_with(tools, Scripted(loop(2))))
    session, run_id = loop_guard.scope_of(result.context_wrapper)
    assert len(loop_guard.guard.detector.history(session=session, run_id=run_id)) == 2
    del result
    gc.collect()
    later = run(agent_with(tools, Scripted(loop(1))))  # its first check ends the collected run
    assert loop_guard.guard.detector.history(session=session, run_id=run_id) == []
    assert loop_guard.guard.stats().live_scopes == 1
    assert loop_guard.scope_of(later.context_wrapper) != (session, run_id)


def test_a_loop_after_compaction_ends_the_run_with_compaction_loop_persisted() -> None:
    executions: list[str] = []
    loop_guard = LoopGuard()  # the post-compaction guard needs no configuration
    armed: list[bool] = []

    class ArmAfterFirstCall(RunHooks[Any]):
        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            if not armed:  # as if the history was compacted after the first call
                loop_guard.arm_post_compaction(context)
                armed.append(True)

    model = Scripted(loop(10))
    with pytest.raises(UserError) as raised:
        run(
            agent_with(loop_guard.tools([status_tool(executions)]), model),
            hooks=ArmAfterFirstCall(),
        )
    stop = loop_stop(raised.value)
    assert isinstance(stop, CompactionLoopPersisted)
    assert (stop.tool_name, stop.count) == ("status", 3)
    assert len(executions) == 4  # the first call, then three identical ones
    assert loop_guard.guard.stats().aborts == 1


def test_loop_stop_ignores_other_errors() -> None:
    assert loop_stop(RuntimeError("x")) is None
    assert loop_stop(UserError("x")) is None


def test_tools_are_copied_once_and_other_tools_pass_through() -> None:
    original = status_tool([])
    web = WebSearchTool()
    loop_guard = LoopGuard(config=SMALL)
    guarded = loop_guard.tools([original, web])
    assert guarded[1] is web
    assert guarded[0] is not original
    assert not original.tool_input_guardrails  # the caller's tool is untouched
    assert loop_guard.tool(guarded[0]) is guarded[0]  # not guarded twice
    again = LoopGuard(config=SMALL).tool(guarded[0])  # another guard stacks on top
    assert again is not guarded[0]


def test_agent_returns_a_guarded_clone() -> None:
    executions: list[str] = []
    loop_guard = LoopGuard(config=SMALL)
    plain = agent_with([status_tool(executions)], Scripted(loop(6)))
    guarded = loop_guard.agent(plain)
    assert guarded is not plain
    assert guarded.name == plain.name
    run(guarded)
    assert len(executions) == 5


def test_guard_arguments_are_checked() -> None:
    guard = ToolLoopGuard(SMALL)
    assert LoopGuard(guard).guard is guard
    with pytest.raises(TypeError, match="guard: pass either"):
        LoopGuard(guard, mode="observe")
    with pytest.raises(TypeError, match="guard: expected a ToolLoopGuard, got dict"):
        LoopGuard(SMALL)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="session_key: expected a callable"):
        LoopGuard(session_key="chat")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode"):
        LoopGuard(mode="block")
    with pytest.raises(TypeError, match="context: expected a RunContextWrapper"):
        LoopGuard().scope_of(object())  # type: ignore[arg-type]


def test_import_loopcore_does_not_import_the_sdk() -> None:
    code = "import sys, loopcore, loopcore.integrations; assert 'agents' not in sys.modules"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_run_key_keeps_one_history_across_approval_resumes() -> None:
    executions: list[str] = []

    @function_tool(needs_approval=True)
    def status(job: str) -> str:
        """Report a job's status."""
        executions.append(job)
        return "pending"

    loop_guard = LoopGuard(config=SMALL, run_key=lambda wrapper: wrapper.context["run"])
    model = Scripted(loop(6))
    agent = agent_with(loop_guard.tools([status]), model)
    # Guardrails run before the approval too: the same call must be checked once.
    config = RunConfig(tool_execution=ToolExecutionConfig(pre_approval_tool_input_guardrails=True))

    async def approve_everything() -> Any:
        result = await Runner.run(agent, "go", context={"run": "r-1"}, run_config=config)
        for _ in range(10):
            if not result.interruptions:
                break
            state = result.to_state()
            for item in result.interruptions:
                state.approve(item)
            result = await Runner.run(agent, state, run_config=config)
        return result

    result = asyncio.run(approve_everything())
    assert result.final_output == "done"
    assert len(executions) == 5
    assert loop_guard.stats().calls == 6
    assert "Do not repeat this exact tool action" in model.outputs()[5]
    assert loop_guard.scope_of(result.context_wrapper) == (None, "r-1")


def test_a_copy_of_a_guarded_tool_is_still_guarded() -> None:
    executions: list[str] = []

    def fail() -> str:
        raise RuntimeError("backend down")

    loop_guard = LoopGuard(config=SMALL)
    (guarded,) = loop_guard.tools([status_tool(executions, fail)])
    model = Scripted(loop(6))
    run(agent_with([copy.copy(guarded)], model))  # the SDK copies tools, e.g. for namespaces
    seen = model.outputs()
    assert seen[0] == SDK_ERROR_TEXT  # the copy's failure handling still formats the error
    assert seen[3] == SDK_ERROR_TEXT + "\n\n" + note(3)
    assert len(executions) == 5

"""Does LoopGuardMiddleware guard a real LangChain agent's tool calls?

Every test builds a real ``create_agent`` graph whose model is a scripted fake
chat model (``GenericFakeChatModel`` taught ``bind_tools``): it answers with
the tool calls of its script, in order, whatever it is told, and remembers the
messages it received, so the tests assert what the model actually saw.
"""

from __future__ import annotations

from .conftest import require

framework = require("langchain", "langchain")

import asyncio  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Annotated, Any  # noqa: E402

import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import AgentMiddleware, SummarizationMiddleware  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage  # noqa: E402
from langchain_core.tools import BaseTool, InjectedToolCallId, ToolException, tool  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

from loopcore import (  # noqa: E402
    TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE,
    CompactionLoopPersisted,
    LoopEvent,
    ToolLoopGuard,
)
from loopcore.integrations.langchain import (  # noqa: E402
    RUN_ID_KEY,
    LoopGuardMiddleware,
    run_terminated,
)

SMALL = {
    "enabled": True,
    "warningThreshold": 3,
    "criticalThreshold": 5,
    "globalCircuitBreakerThreshold": 8,
}
# SPEC §8.12's note and §8.2's instructions, as the model must read them.
NOTE_AT_10 = (
    "[System note: Tool-loop warning after 10 repeated calls. Change your approach "
    "or stop if you are not making progress.]"
)
NOTE_AT_3 = NOTE_AT_10.replace("after 10 repeated", "after 3 repeated")
RECOVERABLE = "Do not repeat this exact tool action. Reassess the task."
TERMINAL = "Critical tool-loop recovery failed because another critical loop was detected."


class ScriptedModel(GenericFakeChatModel):
    """Answers with its script's messages in order; records every input it gets."""

    seen: list[list[BaseMessage]] = []  # noqa: RUF012 (a pydantic field: copied per instance)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedModel:
        return self  # the script already knows which tools it calls

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def calls(tool_name: str, args: dict[str, Any], n: int, prefix: str = "call") -> list[AIMessage]:
    """``n`` assistant turns, each calling ``tool_name(**args)`` once."""
    return [
        AIMessage(content="", tool_calls=[{"name": tool_name, "args": args, "id": f"{prefix}-{i}"}])
        for i in range(n)
    ]


def model(script: list[AIMessage], answer: str = "done") -> ScriptedModel:
    return ScriptedModel(messages=iter([*script, AIMessage(content=answer)]))


class Counter:
    """A tool that counts its executions and always returns the same text."""

    def __init__(self, text: str = "42 files") -> None:
        self.runs = 0
        counter = self

        @tool
        def count_files(dir: str) -> str:
            """Count the files of a directory."""
            counter.runs += 1
            return text

        self.tool: BaseTool = count_files


def tool_results(messages: Sequence[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages if isinstance(m, ToolMessage)]


def user(text: str = "how many files are in src?") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_the_11th_identical_call_carries_the_note_at_the_defaults() -> None:
    counter = Counter()
    scripted = model(calls("count_files", {"dir": "src"}, 11))
    guard = LoopGuardMiddleware(config={"enabled": True})
    agent = create_agent(scripted, [counter.tool], middleware=[guard])

    result = agent.invoke(user())

    assert counter.runs == 11
    # The 12th model request holds the 11 results: only the 11th carries the note.
    received = tool_results(scripted.seen[11])
    assert received == ["42 files"] * 10 + ["42 files\n\n" + NOTE_AT_10]
    assert result["messages"][-1].content == "done"
    assert not run_terminated(result)
    assert guard.guard.stats().warnings == 1


def test_a_loop_is_blocked_then_the_run_ends_at_the_defaults() -> None:
    counter = Counter()
    scripted = model(calls("count_files", {"dir": "src"}, 40))
    guard = LoopGuardMiddleware(config={"enabled": True})
    agent = create_agent(scripted, [counter.tool], middleware=[guard])

    result = agent.invoke(user())

    assert counter.runs == 20  # the 21st call is blocked, the 22nd ends the run
    assert len(scripted.seen) == 22  # no model request after the terminal block
    blocked = [m for m in scripted.seen[21] if isinstance(m, ToolMessage)][-1]
    assert blocked.status == "error"
    assert blocked.content.startswith("CRITICAL: Called count_files with identical outcomes 20")
    assert RECOVERABLE in blocked.content
    final_tool, final = result["messages"][-2:]
    assert isinstance(final_tool, ToolMessage)
    assert final_tool.status == "error"
    assert TERMINAL in final_tool.content
    assert isinstance(final, AIMessage)
    assert final.content == TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE
    assert run_terminated(result)
    assert run_terminated(result["messages"])
    stats = guard.guard.stats()
    assert (stats.blocks, stats.terminations) == (2, 1)


def test_blocked_call_is_an_error_tool_message_with_the_intervention() -> None:
    counter = Counter()
    scripted = model(calls("count_files", {"dir": "src"}, 6))
    agent = create_agent(scripted, [counter.tool], middleware=[LoopGuardMiddleware(config=SMALL)])

    result = agent.invoke(user())

    assert counter.runs == 5
    blocked = result["messages"][-2]  # the 6th call's result, then the model's answer
    assert isinstance(blocked, ToolMessage)
    assert blocked.tool_call_id == "call-5"
    assert (blocked.status, blocked.name) == ("error", "count_files")
    assert blocked.artifact["details"]["deniedReason"] == "tool-loop"
    assert blocked.artifact["details"]["intervention"]["toolCallId"] == "call-5"
    assert "terminate" not in blocked.artifact
    # The model read the block and answered: the run goes on.
    assert blocked in scripted.seen[-1]
    assert result["messages"][-1].content == "done"
    assert not run_terminated(result)


def small_loop_agent(
    mode: str | None = None, n: int = 12, **kwargs: Any
) -> tuple[Any, ScriptedModel, Counter, LoopGuardMiddleware]:
    counter = Counter()
    scripted = model(calls("count_files", {"dir": "src"}, n))
    guard = LoopGuardMiddleware(config=SMALL, mode=mode, **kwargs)
    return create_agent(scripted, [counter.tool], middleware=[guard]), scripted, counter, guard


def test_small_thresholds_warn_block_and_stop() -> None:
    agent, scripted, counter, _guard = small_loop_agent()

    result = agent.invoke(user())

    assert counter.runs == 5
    assert len(scripted.seen) == 7
    received = tool_results(scripted.seen[-1])
    assert received[:5] == ["42 files"] * 3 + ["42 files\n\n" + NOTE_AT_3, "42 files"]
    assert RECOVERABLE in received[5]
    assert TERMINAL in str(result["messages"][-2].content)
    assert run_terminated(result)


def test_async_agent_warns_blocks_and_stops() -> None:
    agent, scripted, counter, guard = small_loop_agent()

    result = asyncio.run(agent.ainvoke(user()))

    assert counter.runs == 5
    assert len(scripted.seen) == 7
    assert tool_results(scripted.seen[4])[-1] == "42 files\n\n" + NOTE_AT_3
    assert RECOVERABLE in tool_results(scripted.seen[-1])[-1]
    assert result["messages"][-1].content == TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE
    assert guard.guard.stats().terminations == 1


def test_async_tool_is_guarded() -> None:
    runs = []

    @tool
    async def fetch(url: str) -> str:
        """Fetch a page."""
        runs.append(url)
        return "<html>same</html>"

    scripted = model(calls("fetch", {"url": "https://example.test"}, 12))
    agent = create_agent(scripted, [fetch], middleware=[LoopGuardMiddleware(config=SMALL)])

    result = asyncio.run(agent.ainvoke(user()))

    assert len(runs) == 5
    assert run_terminated(result)


def unguarded_results(script: list[AIMessage], text: str = "42 files") -> list[list[str]]:
    counter = Counter(text)
    scripted = model(script)
    create_agent(scripted, [counter.tool]).invoke(user())
    return [tool_results(seen) for seen in scripted.seen]


def test_shadow_mode_changes_nothing_the_model_sees() -> None:
    script = calls("count_files", {"dir": "src"}, 12)
    plain = unguarded_results(calls("count_files", {"dir": "src"}, 12))
    agent, scripted, counter, guard = small_loop_agent(mode="observe")

    result = agent.invoke(user())

    assert [tool_results(seen) for seen in scripted.seen] == plain
    assert counter.runs == len(script) == 12
    assert not run_terminated(result)
    stats = guard.guard.stats()
    assert stats.shadow_blocks >= 2
    assert stats.blocks == 0
    assert stats.warnings == 1


@settings(max_examples=15)
@given(st.lists(st.sampled_from(["src", "docs"]), min_size=1, max_size=14))
def test_shadow_mode_never_changes_any_script(dirs: list[str]) -> None:
    script = [
        AIMessage(
            content="", tool_calls=[{"name": "count_files", "args": {"dir": d}, "id": f"c{i}"}]
        )
        for i, d in enumerate(dirs)
    ]
    plain = unguarded_results(list(script))
    counter = Counter()
    scripted = model(list(script))
    middleware = LoopGuardMiddleware(config=SMALL, mode="observe")
    create_agent(scripted, [counter.tool], middleware=[middleware]).invoke(user())
    assert [tool_results(seen) for seen in scripted.seen] == plain
    assert counter.runs == len(dirs)


def test_scope_is_the_thread_and_each_invoke_is_a_new_run() -> None:
    events: list[LoopEvent] = []
    counter = Counter()
    scripted = ScriptedModel(
        messages=iter(
            [
                *calls("count_files", {"dir": "src"}, 4, "a"),
                AIMessage(content="first"),
                *calls("count_files", {"dir": "src"}, 4, "b"),
                AIMessage(content="second"),
            ]
        )
    )
    guard = ToolLoopGuard(SMALL, on_event=events.append)
    agent = create_agent(
        scripted,
        [counter.tool],
        middleware=[LoopGuardMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "chat-1"}}

    agent.invoke(user(), config)
    agent.invoke(user("and now?"), config)

    # Each run warned at its own 4th call: the second did not inherit the first's history.
    warnings = [e for e in events if e.kind == "warning"]
    assert [(e.session, e.tool_call_id) for e in warnings] == [("chat-1", "a-3"), ("chat-1", "b-3")]
    assert warnings[0].run_id != warnings[1].run_id
    assert all(e.run_id for e in warnings)
    # Ended runs are forgotten.
    assert guard.stats().live_scopes == 0


def test_a_thread_goes_on_after_a_terminated_run() -> None:
    counter = Counter()
    script = [*calls("count_files", {"dir": "src"}, 7), AIMessage(content="back")]
    scripted = ScriptedModel(messages=iter(script))
    middleware = LoopGuardMiddleware(config=SMALL)
    agent = create_agent(
        scripted, [counter.tool], middleware=[middleware], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "chat-2"}}

    first = agent.invoke(user(), config)
    second = agent.invoke(user("hello again"), config)

    assert run_terminated(first)
    assert not run_terminated(second)
    assert second["messages"][-1].content == "back"
    # The next run's model request carries the whole, consistent history: every tool
    # call answered, then the stop message and the new question.
    last_input = scripted.seen[-1]
    assert [m.content for m in last_input[-2:]] == [
        TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE,
        "hello again",
    ]
    asked = {c["id"] for m in last_input if isinstance(m, AIMessage) for c in m.tool_calls}
    answered = {m.tool_call_id for m in last_input if isinstance(m, ToolMessage)}
    assert asked == answered


def test_the_callers_run_id_is_the_run_id() -> None:
    events: list[LoopEvent] = []
    counter = Counter()
    guard = ToolLoopGuard(SMALL, on_event=events.append)
    scripted = model(calls("count_files", {"dir": "src"}, 4))
    agent = create_agent(scripted, [counter.tool], middleware=[LoopGuardMiddleware(guard)])
    run_id = uuid.uuid4()

    agent.invoke(user(), {"run_id": run_id, "configurable": {"thread_id": "t-9"}})

    assert [(e.session, e.run_id) for e in events] == [("t-9", str(run_id))]


def test_concurrent_runs_on_separate_threads_do_not_share_a_history() -> None:
    guard = ToolLoopGuard(SMALL)
    middleware = LoopGuardMiddleware(guard)
    counters = [Counter(), Counter()]
    models = [model(calls("count_files", {"dir": "src"}, 3)) for _ in counters]
    agents = [
        create_agent(m, [c.tool], middleware=[middleware])
        for m, c in zip(models, counters, strict=True)
    ]

    async def both() -> None:
        await asyncio.gather(
            *(a.ainvoke(user(), {"configurable": {"thread_id": None}}) for a in agents)
        )

    asyncio.run(both())
    # Six identical calls in one scope would have warned (at 3) and blocked (at 5).
    assert [c.runs for c in counters] == [3, 3]
    assert guard.stats().warnings == 0
    assert guard.stats().blocks == 0


def test_parallel_calls_of_one_turn_are_each_checked_and_recorded() -> None:
    counter = Counter()
    turn = AIMessage(
        content="",
        tool_calls=[
            {"name": "count_files", "args": {"dir": "src"}, "id": "p-1"},
            {"name": "count_files", "args": {"dir": "docs"}, "id": "p-2"},
        ],
    )
    middleware = LoopGuardMiddleware(config=SMALL, end_runs=False)
    agent = create_agent(model([turn]), [counter.tool], middleware=[middleware])
    run_id = uuid.uuid4()

    agent.invoke(user(), {"run_id": run_id})

    assert counter.runs == 2
    history = middleware.guard.detector.history(session=None, run_id=str(run_id))
    assert sorted(r.tool_call_id or "" for r in history) == ["p-1", "p-2"]
    assert all(r.complete for r in history)


def test_tool_error_message_is_recorded_as_an_error_and_noted() -> None:
    runs = []

    @tool
    def deploy(target: str) -> str:
        """Deploy a target."""
        runs.append(target)
        raise ToolException("permission denied")

    deploy.handle_tool_error = True  # LangChain turns the error into an error ToolMessage
    scripted = model(calls("deploy", {"target": "prod"}, 4))
    middleware = LoopGuardMiddleware(config=SMALL, end_runs=False)
    agent = create_agent(scripted, [deploy], middleware=[middleware])
    run_id = uuid.uuid4()

    result = agent.invoke(user(), {"run_id": run_id, "configurable": {"thread_id": "ops"}})

    assert len(runs) == 4
    results = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in results] == ["error"] * 4
    assert results[3].content == "permission denied\n\n" + NOTE_AT_3
    assert RUN_ID_KEY not in result  # private state: not in the agent's output
    history = middleware.guard.detector.history(session="ops", run_id=str(run_id))
    assert len(history) == 4
    assert all(r.complete and r.no_progress for r in history)  # errors, not results


def test_tool_exception_is_recorded_and_propagates() -> None:
    runs = []

    @tool
    def flaky(n: int) -> str:
        """Fail."""
        runs.append(n)
        raise LookupError("no such record")

    scripted = model(calls("flaky", {"n": 1}, 2))
    middleware = LoopGuardMiddleware(config=SMALL, end_runs=False)
    agent = create_agent(scripted, [flaky], middleware=[middleware])
    run_id = uuid.uuid4()

    with pytest.raises(LookupError):
        agent.invoke(user(), {"run_id": run_id})

    assert runs == [1]
    (record,) = middleware.guard.detector.history(session=None, run_id=str(run_id))
    assert record.complete
    assert record.no_progress


def test_a_command_result_gets_the_note_in_its_tool_message() -> None:
    runs: list[str] = []

    @tool
    def remember(fact: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Remember a fact."""
        runs.append(tool_call_id)
        message = ToolMessage(content="noted", tool_call_id=tool_call_id)
        return Command(update={"messages": [message]})

    scripted = model(calls("remember", {"fact": "x"}, 4))
    agent = create_agent(scripted, [remember], middleware=[LoopGuardMiddleware(config=SMALL)])

    result = agent.invoke(user())

    assert runs == [f"call-{i}" for i in range(4)]
    assert tool_results(result["messages"]) == ["noted"] * 3 + ["noted\n\n" + NOTE_AT_3]


def is_summary(message: BaseMessage) -> bool:
    return message.additional_kwargs.get("lc_source") == "summarization"


def summarising_agent(
    script: list[AIMessage], guard: ToolLoopGuard, tools: list[BaseTool], guard_first: bool = True
) -> tuple[Any, ScriptedModel]:
    scripted = model(script)
    summary = SummarizationMiddleware(
        scripted,
        trigger=("messages", 8),  # once in this script: 3 calls follow before the next
        keep=("messages", 2),
        summarizer=lambda messages: "the agent counted the files of src",
    )
    middleware: list[Any] = [LoopGuardMiddleware(guard), summary]
    if not guard_first:
        middleware.reverse()
    return create_agent(scripted, tools, middleware=middleware), scripted


@pytest.mark.parametrize("guard_first", [True, False])
def test_summarization_arms_the_post_compaction_guard_which_aborts(guard_first: bool) -> None:
    events: list[LoopEvent] = []
    guard = ToolLoopGuard({"enabled": True}, on_event=events.append)
    counter = Counter()
    agent, scripted = summarising_agent(
        calls("count_files", {"dir": "src"}, 9), guard, [counter.tool], guard_first
    )

    with pytest.raises(CompactionLoopPersisted) as raised:
        agent.invoke(user())

    assert raised.value.tool_name == "count_files"
    armed = [e for e in events if e.kind == "guard_armed"]
    assert len(armed) == 1
    assert any(map(is_summary, scripted.seen[-1]))  # the model worked from a summary
    assert [e.kind for e in events][-1] == "compaction_abort"
    # Armed before the model's first request on the summary; the window's 3 calls ran.
    first_summarised = next(i for i, seen in enumerate(scripted.seen) if any(map(is_summary, seen)))
    assert counter.runs == first_summarised + 3


def test_no_summarization_no_arming() -> None:
    events: list[LoopEvent] = []
    guard = ToolLoopGuard({"enabled": True}, on_event=events.append)
    counter = Counter()
    scripted = model(calls("count_files", {"dir": "src"}, 5))
    agent = create_agent(scripted, [counter.tool], middleware=[LoopGuardMiddleware(guard)])
    agent.invoke(user())
    assert counter.runs == 5
    assert not [e for e in events if e.kind == "guard_armed"]


def test_arm_on_summarization_off_leaves_the_guard_unarmed() -> None:
    events: list[LoopEvent] = []
    guard = ToolLoopGuard({"enabled": True}, on_event=events.append)
    counter = Counter()
    scripted = model(calls("count_files", {"dir": "src"}, 9))
    summary = SummarizationMiddleware(
        scripted, trigger=("messages", 6), keep=("messages", 2), summarizer=lambda m: "summary"
    )
    middleware = [LoopGuardMiddleware(guard, arm_on_summarization=False), summary]
    agent = create_agent(scripted, [counter.tool], middleware=middleware)

    agent.invoke(user())

    assert counter.runs == 9
    assert not [e for e in events if e.kind in ("guard_armed", "compaction_abort")]


def test_arm_post_compaction_by_hand_needs_a_live_run() -> None:
    events: list[LoopEvent] = []
    middleware = LoopGuardMiddleware(ToolLoopGuard(on_event=events.append))
    assert middleware.arm_post_compaction(thread_id="nobody") is False
    assert middleware.arm_post_compaction(thread_id="t", run_id="r") is True
    assert [(e.kind, e.session, e.run_id) for e in events] == [("guard_armed", "t", "r")]


def test_arm_post_compaction_by_thread_finds_the_live_run() -> None:
    counter = Counter()
    armed: list[bool] = []

    class OwnCompaction(AgentMiddleware[Any, Any, Any]):
        """A host's own history compaction: arms the guard when it compacts."""

        def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
            if len(state["messages"]) == 5:  # after two calls: "compact" and tell the guard
                armed.append(guard.arm_post_compaction(thread_id="t-1"))
            return None

    guard = LoopGuardMiddleware(config={"enabled": True})
    scripted = model(calls("count_files", {"dir": "src"}, 9))
    agent = create_agent(scripted, [counter.tool], middleware=[guard, OwnCompaction()])

    with pytest.raises(CompactionLoopPersisted):
        agent.invoke(user(), {"configurable": {"thread_id": "t-1"}})
    # Two calls before the compaction, then the window's three identical ones.
    assert armed == [True]
    assert counter.runs == 5


def test_constructor_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="guard: pass either"):
        LoopGuardMiddleware(ToolLoopGuard(), config={"enabled": True})
    with pytest.raises(TypeError, match="guard: expected a ToolLoopGuard"):
        LoopGuardMiddleware("guard")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode"):
        LoopGuardMiddleware(mode="loud")
    assert LoopGuardMiddleware(config={"enabled": True}, mode="observe").guard.mode == "observe"

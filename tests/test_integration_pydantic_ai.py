"""Does loopcore's PydanticAI toolset show the model warnings and blocks, and stop looping runs?

Every agent here is a real PydanticAI agent driven by a scripted ``FunctionModel``
(offline); the assertions are on the messages that model function receives.
"""

from __future__ import annotations

from .conftest import require

framework = require("pydantic_ai", "pydantic-ai")

import asyncio  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from pydantic_ai import (  # noqa: E402
    Agent,
    DeferredToolRequests,
    DeferredToolResults,
    ModelRetry,
    RunContext,
    ToolReturn,
)
from pydantic_ai.capabilities import ProcessHistory  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    CompactionPart,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402
from pydantic_ai.toolsets import FunctionToolset  # noqa: E402

from loopcore import (  # noqa: E402
    TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE,
    CompactionLoopPersisted,
    LoopEvent,
    ToolLoopGuard,
    ToolLoopRunTerminated,
)
from loopcore.integrations.pydantic_ai import LoopGuardCapability, LoopGuardToolset  # noqa: E402

SMALL = {
    "enabled": True,
    "warningThreshold": 3,
    "criticalThreshold": 5,
    "globalCircuitBreakerThreshold": 8,
}
NOTE_AT_3 = "[System note: Tool-loop warning after 3 repeated calls."
BLOCK_HINT = "Do not repeat this exact tool action"


class Script:
    """A FunctionModel function: makes the scripted tool calls in turn, then answers.

    ``requests`` keeps every message list the model was sent.
    """

    def __init__(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> None:
        self.calls = list(calls)
        self.requests: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        if not self.calls:
            return ModelResponse(parts=[TextPart("done")])
        tool, args = self.calls.pop(0)
        return ModelResponse(parts=[ToolCallPart(tool, args)])

    def seen(self) -> list[tuple[str, Any, str]]:
        """(kind, content, outcome) of every tool result and user part in the last request."""
        out: list[tuple[str, Any, str]] = []
        for message in self.requests[-1]:
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    out.append(("tool", part.content, part.outcome))
                elif isinstance(part, UserPromptPart):
                    out.append(("user", part.content, ""))
        return out

    def tool_results(self) -> list[Any]:
        return [content for kind, content, _ in self.seen() if kind == "tool"]


class Counter:
    """Tools that count how often they really ran."""

    def __init__(self) -> None:
        self.runs: dict[str, int] = {}

    def read(self, path: str) -> str:
        self.runs["read"] = self.runs.get("read", 0) + 1
        return "same text"

    def search(self, q: str) -> str:
        self.runs["search"] = self.runs.get("search", 0) + 1
        return "no results"

    async def fetch(self, url: str) -> str:
        self.runs["fetch"] = self.runs.get("fetch", 0) + 1
        await asyncio.sleep(0)
        return "<html>same</html>"


def guarded_agent(
    script: Script, counter: Counter, guard: ToolLoopGuard, **agent_kwargs: Any
) -> tuple[Agent[Any, str], LoopGuardToolset]:
    tools = FunctionToolset([counter.read, counter.search, counter.fetch])
    toolset = LoopGuardToolset(tools, guard)
    return Agent(FunctionModel(script), toolsets=[toolset], **agent_kwargs), toolset


def read_loop(n: int) -> list[tuple[str, dict[str, Any]]]:
    return [("read", {"path": "a.txt"})] * n


# -- warnings ------------------------------------------------------------------------------


def test_the_eleventh_identical_result_carries_the_note_at_the_defaults() -> None:
    script, counter = Script(read_loop(12)), Counter()
    agent, _ = guarded_agent(script, counter, ToolLoopGuard({"enabled": True}))
    assert agent.run_sync("go").output == "done"
    results = script.tool_results()
    assert len(results) == 12
    assert counter.runs["read"] == 12
    assert results[:10] == ["same text"] * 10
    assert results[10].startswith("same text\n\n[System note: Tool-loop warning after 10 repeated")
    assert results[11] == "same text"  # shown once per threshold step


def test_a_warned_structured_result_gets_the_note_as_content_next_to_it() -> None:
    def stats(job: str) -> dict[str, Any]:
        return {"job": job, "state": "pending"}

    script = Script([("stats", {"job": "j1"})] * 4)
    toolset = LoopGuardToolset(FunctionToolset([stats]), config=SMALL)
    Agent(FunctionModel(script), toolsets=[toolset]).run_sync("go")
    seen = script.seen()
    # The 4th result is the tool's own value, followed by the note as its own part.
    assert seen[-2] == ("tool", {"job": "j1", "state": "pending"}, "success")
    assert seen[-1][0] == "user"
    assert seen[-1][1].startswith(NOTE_AT_3)
    assert sum(NOTE_AT_3 in str(content) for _, content, _ in seen) == 1


def test_a_warned_tool_return_keeps_its_content_and_gets_the_note() -> None:
    def look(name: str) -> ToolReturn[str]:
        return ToolReturn(return_value="nothing new", content="see the attached log")

    script = Script([("look", {"name": "x"})] * 4)
    toolset = LoopGuardToolset(FunctionToolset([look]), config=SMALL)
    Agent(FunctionModel(script), toolsets=[toolset]).run_sync("go")
    results = script.tool_results()
    assert results[:3] == ["nothing new"] * 3
    assert results[3].startswith("nothing new\n\n" + NOTE_AT_3)
    assert script.seen()[-1] == ("user", "see the attached log", "")


def test_a_warned_model_retry_carries_the_note_in_its_message() -> None:
    def flaky(q: str) -> str:
        raise ModelRetry("backend busy")

    script = Script([("flaky", {"q": "x"})] * 4)
    toolset = LoopGuardToolset(FunctionToolset([flaky]), config=SMALL)
    Agent(FunctionModel(script), toolsets=[toolset], retries=10).run_sync("go")
    results = [str(r) for r in script.tool_results()]
    # Errors are recorded as outcomes: three identical failures warn before the fourth.
    assert all("backend busy" in r for r in results)
    assert len(results) == 4
    assert [NOTE_AT_3 in r for r in results] == [False, False, False, True]


def test_a_tool_exception_is_recorded_and_re_raised_with_the_note() -> None:
    calls = {"n": 0}

    def unstable(path: str) -> str:
        calls["n"] += 1
        if calls["n"] == 4:
            raise RuntimeError("disk gone")
        return "fine"

    script = Script([("unstable", {"path": "a"})] * 4)
    toolset = LoopGuardToolset(FunctionToolset([unstable]), config=SMALL)
    with pytest.raises(RuntimeError, match="disk gone") as caught:
        Agent(FunctionModel(script), toolsets=[toolset]).run_sync("go")
    assert any(note.startswith(NOTE_AT_3) for note in getattr(caught.value, "__notes__", []))


# -- blocks and the end of a run -----------------------------------------------------------


def test_a_blocked_call_does_not_run_and_the_model_reads_why() -> None:
    script, counter = Script([*read_loop(6), ("search", {"q": "other"})]), Counter()
    agent, toolset = guarded_agent(script, counter, ToolLoopGuard(SMALL))
    assert agent.run_sync("go").output == "done"
    seen = [(content, outcome) for kind, content, outcome in script.seen() if kind == "tool"]
    ran = [s for s in seen[:-1] if s[1] == "success"]
    assert counter.runs["read"] == len(ran) == 5  # criticalThreshold
    blocked_text, outcome = seen[5]
    assert outcome == "failed"  # a failed tool result, not a retry prompt
    assert blocked_text.startswith("CRITICAL:")
    assert BLOCK_HINT in blocked_text
    assert seen[6] == ("no results", "success")  # the run went on with another tool
    assert toolset.guard.stats().blocks == 1


def test_a_block_does_not_use_up_the_tool_retries() -> None:
    script, counter = Script(read_loop(8)), Counter()
    agent, _ = guarded_agent(script, counter, ToolLoopGuard(SMALL), retries=0)
    with pytest.raises(ToolLoopRunTerminated):
        agent.run_sync("go")  # with ModelRetry, retries=0 would end the run on the first block
    assert counter.runs["read"] == 5
    outcomes = [outcome for kind, _, outcome in script.seen() if kind == "tool"]
    assert outcomes == ["success"] * 5 + ["failed"]  # the model was asked again after the block


def test_the_second_critical_ends_the_run_without_another_model_request() -> None:
    calls = [*read_loop(6), *[("search", {"q": "notes"})] * 6, ("read", {"path": "b"})]
    script, counter = Script(calls), Counter()
    agent, toolset = guarded_agent(script, counter, ToolLoopGuard(SMALL))
    with pytest.raises(ToolLoopRunTerminated) as caught:
        agent.run_sync("go")
    stop = caught.value
    assert str(stop) == TOOL_LOOP_RECOVERY_TERMINATED_MESSAGE
    assert stop.result_text
    assert stop.result_text != stop.reason
    assert counter.runs == {"read": 5, "search": 5}
    # 12 calls answered: the model was never asked again after the terminal block.
    assert len(script.requests) == 12
    assert script.calls == [("read", {"path": "b"})]
    stats = toolset.guard.stats()
    assert (stats.blocks, stats.terminations) == (2, 1)
    assert stats.live_scopes == 0  # the run's scope was freed
    assert stats.ended_scopes == 1


def test_an_async_run_with_an_async_tool_stops_the_same_way() -> None:
    script, counter = Script([("fetch", {"url": "u"})] * 10), Counter()
    agent, _ = guarded_agent(script, counter, ToolLoopGuard(SMALL))

    async def main() -> None:
        await agent.run("go")

    with pytest.raises(ToolLoopRunTerminated):
        asyncio.run(main())
    assert counter.runs["fetch"] == 5
    results = script.tool_results()
    assert results[3].startswith("<html>same</html>\n\n" + NOTE_AT_3)
    assert BLOCK_HINT in results[5]


def test_the_capability_guards_every_tool_of_the_agent() -> None:
    script, counter = Script([*read_loop(6), *[("search", {"q": "s"})] * 6]), Counter()
    capability = LoopGuardCapability(config=SMALL)
    agent = Agent(
        FunctionModel(script), tools=[counter.read, counter.search], capabilities=[capability]
    )
    with pytest.raises(ToolLoopRunTerminated):
        agent.run_sync("go")
    assert counter.runs == {"read": 5, "search": 5}
    assert capability.guard.stats().terminations == 1


# -- shadow mode and stats -----------------------------------------------------------------


def test_shadow_mode_changes_nothing_the_model_sees() -> None:
    calls = [*read_loop(9), *[("fetch", {"url": "u"})] * 9]

    plain_script, plain_counter = Script(calls), Counter()
    plain_tools = FunctionToolset([plain_counter.read, plain_counter.search, plain_counter.fetch])
    Agent(FunctionModel(plain_script), toolsets=[plain_tools]).run_sync("go")

    shadow_script, shadow_counter = Script(calls), Counter()
    agent, toolset = guarded_agent(
        shadow_script, shadow_counter, ToolLoopGuard(SMALL, mode="observe")
    )
    assert agent.run_sync("go").output == "done"

    assert shadow_script.seen() == plain_script.seen()
    assert shadow_counter.runs == plain_counter.runs == {"read": 9, "fetch": 9}
    stats = toolset.guard.stats()
    assert stats.shadow_blocks > 0
    assert stats.blocks == 0
    assert stats.warnings > 0


def test_stats_count_what_the_model_was_told() -> None:
    script, counter = Script(read_loop(7)), Counter()
    agent, toolset = guarded_agent(script, counter, ToolLoopGuard(SMALL))
    with pytest.raises(ToolLoopRunTerminated):
        agent.run_sync("go")
    stats = toolset.guard.stats()
    results = script.tool_results()
    assert stats.calls == 7 == len(results) + 1  # the terminal block reaches no model
    assert stats.warnings == sum(NOTE_AT_3 in r for r in results) == 1
    assert stats.by_outcome[("generic_repeat", "critical", "blocked")] == 1
    assert stats.by_outcome[("generic_repeat", "critical", "terminated")] == 1


def test_a_test_model_run_is_checked_call_by_call() -> None:
    counter = Counter()
    toolset = LoopGuardToolset(FunctionToolset([counter.read]), config={"enabled": True})
    result = Agent(TestModel(), toolsets=[toolset]).run_sync("go")
    assert counter.runs == {"read": 1}
    assert toolset.guard.stats().calls == 1
    assert "same text" in result.output


# -- scopes --------------------------------------------------------------------------------


def test_scope_is_the_conversation_and_the_run_unless_a_session_is_given() -> None:
    events: list[LoopEvent] = []
    guard = ToolLoopGuard(SMALL, on_event=events.append)
    counter = Counter()
    script = Script(read_loop(4))
    agent = Agent(
        FunctionModel(script), toolsets=[LoopGuardToolset(FunctionToolset([counter.read]), guard)]
    )
    first = agent.run_sync("go")
    assert [(e.kind, e.session, e.run_id) for e in events] == [
        ("warning", first.conversation_id, first.run_id)
    ]

    events.clear()
    by_user = LoopGuardToolset(
        FunctionToolset([counter.read]), guard, session=lambda ctx: f"user-{ctx.deps}"
    )
    agent = Agent(FunctionModel(Script(read_loop(4))), toolsets=[by_user], deps_type=int)
    second = agent.run_sync("go", deps=7)
    assert [(e.session, e.run_id) for e in events] == [("user-7", second.run_id)]
    assert second.run_id != first.run_id


def test_concurrent_runs_of_one_agent_keep_separate_histories() -> None:
    counter = Counter()
    toolset = LoopGuardToolset(FunctionToolset([counter.read]), config=SMALL)

    async def one_run() -> list[Any]:
        script = Script(read_loop(4))
        agent = Agent(FunctionModel(script), toolsets=[toolset])
        await agent.run("go")
        return script.tool_results()

    async def main() -> list[list[Any]]:
        return list(await asyncio.gather(one_run(), one_run(), one_run()))

    for results in asyncio.run(main()):
        # Mixed together, 12 identical calls would have been blocked.
        assert [NOTE_AT_3 in r for r in results] == [False, False, False, True]
    assert counter.runs["read"] == 12
    assert toolset.guard.stats().blocks == 0


# -- compaction ----------------------------------------------------------------------------


def summarise_once(messages: list[ModelMessage]) -> list[ModelMessage]:
    """A history processor that replaces a long history with an app-written summary, once."""
    if len(messages) >= 5 and not any(
        isinstance(p, CompactionPart) for m in messages for p in m.parts
    ):
        return [ModelRequest(parts=[CompactionPart(content="summary"), UserPromptPart("go on")])]
    return messages


def test_a_compaction_in_the_history_arms_the_post_compaction_guard() -> None:
    counter = Counter()
    toolset = LoopGuardToolset(FunctionToolset([counter.read]))  # defaults: no repeat block
    agent = Agent(
        FunctionModel(Script(read_loop(8))),
        toolsets=[toolset],
        capabilities=[ProcessHistory(summarise_once)],
    )
    with pytest.raises(CompactionLoopPersisted) as caught:
        agent.run_sync("go")
    assert (caught.value.tool_name, caught.value.count) == ("read", 3)
    assert counter.runs["read"] == 5  # 2 before the summary, then 3 identical after it

    # The same loop without a compaction just runs.
    plain = LoopGuardToolset(FunctionToolset([counter.read]))
    assert Agent(FunctionModel(Script(read_loop(8))), toolsets=[plain]).run_sync("go").output


def test_a_compaction_already_in_the_history_does_not_arm() -> None:
    old = [ModelRequest(parts=[CompactionPart(content="old summary"), UserPromptPart("hi")])]
    toolset = LoopGuardToolset(FunctionToolset([Counter().read]))
    agent = Agent(FunctionModel(Script(read_loop(5))), toolsets=[toolset])
    assert agent.run_sync("go", message_history=old).output == "done"
    assert toolset.guard.stats().aborts == 0


def test_arm_post_compaction_from_a_trimming_history_processor() -> None:
    toolset = LoopGuardToolset(FunctionToolset([Counter().read]))
    trimmed = {"done": False}

    def trim(ctx: RunContext[None], messages: list[ModelMessage]) -> list[ModelMessage]:
        if len(messages) >= 5 and not trimmed["done"]:
            trimmed["done"] = True
            toolset.arm_post_compaction(ctx)  # no CompactionPart is left behind
            return [ModelRequest(parts=[UserPromptPart("continue")])]
        return messages

    agent = Agent(
        FunctionModel(Script(read_loop(8))),
        toolsets=[toolset],
        capabilities=[ProcessHistory(trim)],
    )
    with pytest.raises(CompactionLoopPersisted):
        agent.run_sync("go")
    assert toolset.guard.stats().aborts == 1


def test_observe_mode_never_aborts_after_a_compaction() -> None:
    toolset = LoopGuardToolset(FunctionToolset([Counter().read]), mode="observe")
    agent = Agent(
        FunctionModel(Script(read_loop(8))),
        toolsets=[toolset],
        capabilities=[ProcessHistory(summarise_once)],
    )
    assert agent.run_sync("go").output == "done"
    assert toolset.guard.stats().shadow_aborts == 1


# -- construction --------------------------------------------------------------------------


def test_construction_errors_name_the_argument() -> None:
    tools = FunctionToolset([Counter().read])
    with pytest.raises(TypeError, match=r"^guard: pass either"):
        LoopGuardToolset(tools, ToolLoopGuard(), config=SMALL)
    with pytest.raises(TypeError, match=r"^guard: expected a ToolLoopGuard, got dict"):
        LoopGuardToolset(tools, {"enabled": True})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^wrapped: expected a PydanticAI toolset, got list"):
        LoopGuardToolset([Counter().read])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^guard: pass either"):
        LoopGuardCapability(ToolLoopGuard(), mode="observe")


def test_one_guard_shared_by_two_toolsets() -> None:
    guard = ToolLoopGuard(SMALL)
    counter = Counter()
    first = LoopGuardToolset(FunctionToolset([counter.read]), guard)
    second = LoopGuardToolset(FunctionToolset([counter.search]), guard)
    script = Script([("read", {"path": "a"}), ("search", {"q": "b"})])
    Agent(FunctionModel(script), toolsets=[first, second]).run_sync("go")
    assert first.guard is second.guard is guard
    assert guard.stats().calls == 2


def test_a_call_waiting_for_approval_is_not_an_outcome() -> None:
    counter = Counter()
    toolset = LoopGuardToolset(FunctionToolset([counter.read]).approval_required(), config=SMALL)
    script = Script(read_loop(1))
    agent = Agent(
        FunctionModel(script), toolsets=[toolset], output_type=[str, DeferredToolRequests]
    )
    first = agent.run_sync("go")
    assert isinstance(first.output, DeferredToolRequests)
    assert "read" not in counter.runs
    call_id = first.output.approvals[0].tool_call_id
    approved = DeferredToolResults(approvals={call_id: True})
    second = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=approved)
    assert second.output == "done"
    assert counter.runs == {"read": 1}
    assert script.tool_results() == ["same text"]
    assert toolset.guard.stats().calls == 2  # asked once per run; the first call never ran


def test_a_warned_tool_result_mapping_gets_a_text_block() -> None:
    def report(job: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "42 files"}]}

    script = Script([("report", {"job": "j"})] * 4)
    toolset = LoopGuardToolset(FunctionToolset([report]), config=SMALL)
    Agent(FunctionModel(script), toolsets=[toolset]).run_sync("go")
    last = script.tool_results()[-1]
    assert last["content"][0] == {"type": "text", "text": "42 files"}
    assert last["content"][-1]["text"].startswith(NOTE_AT_3)
    assert len(last["content"]) == 2


def test_a_warned_structured_tool_return_keeps_its_content_before_the_note() -> None:
    def rows(table: str) -> ToolReturn[list[int]]:
        return ToolReturn(return_value=[1, 2], content="2 rows", metadata={"ms": 3})

    script = Script([("rows", {"table": "t"})] * 4)
    toolset = LoopGuardToolset(FunctionToolset([rows]), config=SMALL)
    result = Agent(FunctionModel(script), toolsets=[toolset]).run_sync("go")
    assert script.tool_results() == [[1, 2]] * 4
    user_parts = [content for kind, content, _ in script.seen() if kind == "user"]
    assert user_parts[-2] == "2 rows"  # the 3rd call's content, untouched
    assert user_parts[-1].startswith("2 rows\n\n" + NOTE_AT_3)
    metadata = [
        part.metadata
        for message in result.all_messages()
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert metadata == [{"ms": 3}] * 4  # the application's metadata passes through

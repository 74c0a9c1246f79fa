"""LoopAgent served over real HTTP, called with a2a-sdk's own client."""

from __future__ import annotations

from a2a.types import DataPart, TaskQueryParams, TaskState

from llamon_agent.a2a.server import create_app
from llamon_agent.loop import LoopAgent, ScriptedModel, ToolRegistry, tool_call
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    texts,
    user_message,
)
from tests.loop.conftest import FlakyRemote


async def test_a_completed_run_answers_completed(registry: ToolRegistry) -> None:
    model = ScriptedModel(
        [
            tool_call("add_numbers", {"a": 20, "b": 22}),
            lambda messages: f"The answer is {messages[-1].content}.",
        ]
    )
    agent = LoopAgent(model, registry.view("add_numbers"))
    async with running_server(create_app(agent, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("20 + 22?"))
    assert task.status.state == TaskState.completed
    assert texts(task) == ["The answer is 42."]
    assert model.calls[0].messages[-1].content == "20 + 22?"


async def test_max_rounds_exceeded_fails_and_keeps_the_tool_results(
    registry: ToolRegistry,
) -> None:
    model = ScriptedModel([tool_call("lookup", {"key": str(i)}, id=f"c{i}") for i in range(3)])
    agent = LoopAgent(model, registry.view("lookup"), max_rounds=2)
    async with running_server(create_app(agent, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("loop forever"))
        fetched = await client.get_task(TaskQueryParams(id=task.id))

    for answer in (task, fetched):
        assert answer.status.state == TaskState.failed
        data = error_data(answer)
        assert data["errorCode"] == "UPSTREAM_UNAVAILABLE"
        assert data["errorReason"] == "max_rounds_exceeded"
        assert data["retriable"] is True
        assert data["errorMessage"] == "No final answer after 2 rounds (2 tool calls, 0 failed)."
        [artifact] = answer.artifacts or []
        assert artifact.name == "tool_results"
        [part] = artifact.parts
        assert isinstance(part.root, DataPart)
        assert [item["tool_call_id"] for item in part.root.data["items"]] == ["c0", "c1"]
        assert part.root.data["items"][1]["value"] == {"key": "1", "value": "1"}


async def test_a_model_error_fails_with_its_classification(registry: ToolRegistry) -> None:
    model = ScriptedModel([tool_call("lookup", {"key": "a"}), TimeoutError("model too slow")])
    agent = LoopAgent(model, registry)
    async with running_server(create_app(agent, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("go"))
    assert task.status.state == TaskState.failed
    data = error_data(task)
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "UPSTREAM_TIMEOUT",
        "timeout",
        True,
    )
    assert [a.name for a in task.artifacts or []] == ["tool_results"]


async def test_an_escalated_tool_fails_the_task_as_classified(registry: ToolRegistry) -> None:
    model = ScriptedModel(
        [tool_call("lookup", {"key": "a"}), tool_call("flaky_remote"), "never reached"]
    )
    agent = LoopAgent(model, ToolRegistry([*registry, FlakyRemote()]))
    async with running_server(create_app(agent, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("go"))
    assert task.status.state == TaskState.failed
    data = error_data(task)
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "UPSTREAM_UNAVAILABLE",
        "component_invoke_error",
        True,
    )
    assert data["errorMessage"] == "Upstream tool 'flaky_remote' failed 3 times; giving up."
    assert [a.name for a in task.artifacts or []] == ["tool_results"]

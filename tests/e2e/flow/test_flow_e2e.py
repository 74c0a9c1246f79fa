"""The guide's example flows, served over real HTTP and called with a2a-sdk's client."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types import DataPart, TaskQueryParams, TaskState
from langgraph.config import get_stream_writer

from llamon_agent import END, START, GraphBuilder
from llamon_agent.a2a.server import create_app
from llamon_agent.core.hitl import HITLInterrupt
from llamon_agent.exceptions import ComponentInvokeError
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    stream,
    user_message,
)
from tests._support.parts import artifacts_of, data_of, text_of


def fetch_subject_node(state: dict[str, Any]) -> dict[str, Any]:
    return {"subject": f"subject of {state.get('query')}"}


async def rag_search_node(state: dict[str, Any]) -> dict[str, Any]:
    raise ComponentInvokeError("MCP down")


def generate_response_node(state: dict[str, Any]) -> dict[str, Any]:
    return {"output": "never reached"}


def example_flow() -> GraphBuilder:
    return (
        GraphBuilder()
        .node("fetch_subject", fetch_subject_node, node_kind="business")
        .node("rag_search", rag_search_node, node_kind="business")
        .node("generate_response", generate_response_node, node_kind="llm")
        .edge(START, "fetch_subject")
        .edge("fetch_subject", "rag_search")
        .edge("rag_search", "generate_response")
        .edge("generate_response", END)
    )


async def test_middle_node_failure_keeps_completed_outputs(checkpointer: Any) -> None:
    app = create_app(example_flow().compile(checkpointer=checkpointer), make_card())
    async with running_server(app) as url, a2a_client(url) as client:
        task = await send(client, user_message("math"))
        fetched = await client.get_task(TaskQueryParams(id=task.id))
    for answer in (task, fetched):
        assert answer.status.state == TaskState.failed
        data = error_data(answer)
        assert data["errorCode"] == "UPSTREAM_UNAVAILABLE"
        assert data["node"] == {"id": "rag_search", "kind": "business"}
        assert data["flow"] == {"completedNodes": ["fetch_subject"]}
        assert [a.name for a in answer.artifacts or []] == ["fetch_subject"]
        assert data_of(artifacts_of(answer.artifacts)[0].parts[0]) == {"subject": "subject of math"}


async def test_parallel_branch_beside_the_failed_node_counts_as_completed() -> None:
    profile_done = asyncio.Event()

    async def lookup_profile(state: dict[str, Any]) -> dict[str, Any]:
        profile_done.set()
        return {"profile": "p"}

    async def rag_search_after_profile(state: dict[str, Any]) -> dict[str, Any]:
        await asyncio.wait_for(profile_done.wait(), timeout=10)
        raise ComponentInvokeError("MCP down")

    builder = (
        GraphBuilder()
        .node("fetch_subject", fetch_subject_node, node_kind="business")
        .node("rag_search", rag_search_after_profile, node_kind="business")
        .node("lookup_profile", lookup_profile, node_kind="business")
        .edge(START, "fetch_subject")
        .edge("fetch_subject", "rag_search")
        .edge("fetch_subject", "lookup_profile")
        .edge("rag_search", END)
        .edge("lookup_profile", END)
    )
    async with running_server(create_app(builder, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("math"))
    data = error_data(task)
    assert data["node"] == {"id": "rag_search", "kind": "business"}
    assert data["flow"] == {"completedNodes": ["fetch_subject", "lookup_profile"]}
    assert sorted(a.name or "" for a in artifacts_of(task.artifacts)) == [
        "fetch_subject",
        "lookup_profile",
    ]


def ask_birthday(state: dict[str, Any]) -> HITLInterrupt | dict[str, Any]:
    birthday = state.get("birthday")
    if not birthday:
        return HITLInterrupt(
            payload={"question": "생년월일을 알려주세요."},
            thread_id=state["thread_id"],
            resume_key="birthday",
        )
    return {"output": f"born {birthday}"}


async def test_hitl_round_trip(checkpointer: Any) -> None:
    graph = (
        GraphBuilder()
        .node("ask_birthday", ask_birthday, node_kind="hitl")
        .edge(START, "ask_birthday")
        .edge("ask_birthday", END)
        .compile(checkpointer=checkpointer)
    )
    async with running_server(create_app(graph, make_card())) as url, a2a_client(url) as client:
        paused = await send(client, user_message("hi"))
        assert paused.status.state == TaskState.input_required
        assert error_data(paused) == {"question": "생년월일을 알려주세요."}
        done = await send(
            client, user_message("1990-01-01", task_id=paused.id, context_id=paused.context_id)
        )
    assert done.status.state == TaskState.completed
    assert [text_of(p) for a in artifacts_of(done.artifacts) for p in a.parts] == [
        "born 1990-01-01"
    ]


async def test_hitl_answer_as_data_fills_the_state() -> None:
    builder = GraphBuilder().node("ask_birthday", ask_birthday).edge(START, "ask_birthday")
    async with running_server(create_app(builder, make_card())) as url, a2a_client(url) as client:
        paused = await send(client, user_message("hi"))
        done = await send(
            client,
            user_message(
                None,
                data={"birthday": "2000-02-02"},
                task_id=paused.id,
                context_id=paused.context_id,
            ),
        )
    assert [text_of(p) for a in artifacts_of(done.artifacts) for p in a.parts] == [
        "born 2000-02-02"
    ]


async def stream_response(state: dict[str, Any]) -> dict[str, Any]:
    writer = get_stream_writer()
    full = ""
    for chunk in ("안녕", "하세요", "!"):
        writer(chunk)
        full += chunk
        if state.get("query") == "break" and len(full) > 3:
            raise ComponentInvokeError("mid-stream failure")
    return {"output": full}


async def test_stream_from_a_node_and_its_midway_failure() -> None:
    builder = GraphBuilder().node("stream_response", stream_response, node_kind="llm")
    builder.edge(START, "stream_response").edge("stream_response", END)
    async with running_server(create_app(builder, make_card())) as url:
        async with a2a_client(url, streaming=True) as client:
            ok = await stream(client, user_message("hi"))
            broken = await stream(client, user_message("break"))
        async with a2a_client(url) as client:
            fetched = await client.get_task(TaskQueryParams(id=broken[-1][0].id))
    ok_task = ok[-1][0]
    assert ok_task.status.state == TaskState.completed
    assert "".join(p.root.text for p in ok_task.artifacts[0].parts) == "안녕하세요!"
    assert len(ok_task.artifacts) == 1, "the streamed text is not sent twice"
    failed = [
        u
        for _, u in broken
        if u is not None and getattr(u, "status", None) and u.status.state == TaskState.failed
    ]
    assert len(failed) == 1
    assert fetched.status.state == TaskState.failed
    streamed = [
        text_of(p) for a in artifacts_of(fetched.artifacts) if a.name == "response" for p in a.parts
    ]
    assert streamed == ["안녕", "하세요"]
    assert error_data(fetched)["node"] == {"id": "stream_response", "kind": "llm"}


@pytest.mark.reason("max_tool_iterations_exceeded")
async def test_recursion_limit_is_upstream_unavailable() -> None:
    def loop(state: dict[str, Any]) -> dict[str, Any]:
        return {"n": int(state.get("n", 0)) + 1}

    builder = (
        GraphBuilder()
        .node("loop", loop)
        .edge(START, "loop")
        .conditional_edges("loop", lambda state: "loop")
    )
    async with running_server(create_app(builder, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("go"))
    data = error_data(task)
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "UPSTREAM_UNAVAILABLE",
        "max_tool_iterations_exceeded",
        True,
    )


async def test_node_timeout_is_upstream_timeout() -> None:
    async def slow(state: dict[str, Any]) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    builder = GraphBuilder().node("slow", slow, node_kind="business", timeout=0.2)
    builder.edge(START, "slow")
    async with running_server(create_app(builder, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("go"))
    data = error_data(task)
    assert (data["errorCode"], data["retriable"]) == ("UPSTREAM_TIMEOUT", True)
    assert data["node"] == {"id": "slow", "kind": "business"}


async def test_untyped_flow_carries_state_from_node_to_node(checkpointer: Any) -> None:
    def node_a(state: dict[str, Any]) -> dict[str, Any]:
        return {"x": 1}

    def node_b(state: dict[str, Any]) -> dict[str, Any]:
        return {"y": state["x"] + 1}

    graph = (
        GraphBuilder()
        .node("a", node_a)
        .node("b", node_b)
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .compile(checkpointer=checkpointer)
    )
    async with running_server(create_app(graph, make_card())) as url, a2a_client(url) as client:
        task = await send(client, user_message("go"))
        after = await send(client, user_message("again"))
    assert task.status.state == TaskState.completed
    [artifact] = task.artifacts or []
    [part] = artifact.parts
    assert isinstance(part.root, DataPart)
    assert part.root.data == {"query": "go", "thread_id": task.id, "data": [], "x": 1, "y": 2}
    assert after.status.state == TaskState.completed


# The node exactly as users write it from the specification: no ``resume_key``, and
# nothing after the question but ``...``. Run from its text so not a character changes.
ASK_BIRTHDAY_AS_WRITTEN = """
from llamon_agent.core.hitl import HITLInterrupt

async def ask_birthday(state):
    birthday = state.get("birthday")
    if not birthday:
        # raise 하지 않고 return — SDK 가 input-required 로 전송
        return HITLInterrupt(
            payload={"question": "생년월일을 알려주세요."},
            thread_id=state["thread_id"],
        )
    ...
"""


def ask_birthday_as_written() -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(ASK_BIRTHDAY_AS_WRITTEN, "ask_birthday", "exec"), namespace)  # noqa: S102
    return namespace["ask_birthday"]


async def test_hitl_node_as_written_completes_with_a_plain_text_answer(checkpointer: Any) -> None:
    graph = (
        GraphBuilder()
        .node("ask_birthday", ask_birthday_as_written(), node_kind="hitl")
        .edge(START, "ask_birthday")
        .edge("ask_birthday", END)
        .compile(checkpointer=checkpointer)
    )
    async with running_server(create_app(graph, make_card())) as url, a2a_client(url) as client:
        paused = await send(client, user_message("hi"))
        assert paused.status.state == TaskState.input_required
        assert error_data(paused) == {"question": "생년월일을 알려주세요."}
        done = await send(
            client, user_message("1990-01-01", task_id=paused.id, context_id=paused.context_id)
        )
        fetched = await client.get_task(TaskQueryParams(id=paused.id))
        next_task = await send(client, user_message("hi"))
    for answer in (done, fetched):
        assert answer.status.state == TaskState.completed
        [artifact] = answer.artifacts or []
        [part] = artifact.parts
        assert isinstance(part.root, DataPart)
        assert part.root.data["birthday"] == "1990-01-01"
        assert "__interrupt__" not in part.root.data
    assert next_task.status.state == TaskState.input_required


async def test_hitl_node_as_written_over_message_stream() -> None:
    builder = (
        GraphBuilder()
        .node("ask_birthday", ask_birthday_as_written(), node_kind="hitl")
        .edge(START, "ask_birthday")
        .edge("ask_birthday", END)
    )
    async with (
        running_server(create_app(builder, make_card())) as url,
        a2a_client(url, streaming=True) as client,
    ):
        paused = (await stream(client, user_message("hi")))[-1][0]
        assert paused.status.state == TaskState.input_required
        done = (
            await stream(
                client,
                user_message("1990-01-01", task_id=paused.id, context_id=paused.context_id),
            )
        )[-1][0]
    assert done.status.state == TaskState.completed
    data = [
        p.root.data for a in done.artifacts or [] for p in a.parts if isinstance(p.root, DataPart)
    ]
    assert [d["birthday"] for d in data] == ["1990-01-01"]

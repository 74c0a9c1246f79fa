"""Served flows get a checkpointer of the store's kind; SQLite lives under LLAMON_HOME."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.pregel import Pregel

from llamon_agent import END, START, GraphBuilder
from llamon_agent.a2a.serve import ServeOptions, serve_agent
from llamon_agent.flow.checkpointers import attach_checkpointer, open_checkpointer
from tests._support.a2a_server import a2a_client, error_data, make_card, send, user_message
from tests._support.stores import postgres_schema
from tests.e2e.flow.test_flow_e2e import example_flow


def test_attach_only_when_missing() -> None:
    saver = InMemorySaver()
    compiled = attach_checkpointer(example_flow(), saver)
    assert isinstance(compiled, Pregel)
    assert compiled.checkpointer is saver
    own = InMemorySaver()
    graph = example_flow().compile(checkpointer=own)
    kept = attach_checkpointer(graph, saver)
    assert isinstance(kept, Pregel)
    assert kept.checkpointer is own


async def test_open_each_kind(tmp_path: Path) -> None:
    async with open_checkpointer("memory") as memory:
        assert isinstance(memory, InMemorySaver)
    async with open_checkpointer("sqlite", home=tmp_path):
        assert (tmp_path / "checkpoints.db").is_file()
    async with postgres_schema() as dsn, open_checkpointer("postgres", dsn=dsn) as saver:
        graph = GraphBuilder().node("a", lambda s: {"x": 1}).edge(START, "a").edge("a", END)
        compiled = graph.compile(checkpointer=saver)
        await compiled.ainvoke({}, {"configurable": {"thread_id": "t"}})
        state = await compiled.aget_state({"configurable": {"thread_id": "t"}})
        assert state.values == {"x": 1}


async def test_postgres_without_a_dsn_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLAMON_DATABASE_URL", raising=False)
    with pytest.raises(ValueError, match="need a DSN"):
        async with open_checkpointer("postgres"):
            pass


async def test_served_flow_checkpoints_in_llamon_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path))
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    shutdown = asyncio.Event()
    server = asyncio.create_task(
        serve_agent(
            example_flow(),
            make_card(),
            ServeOptions(port=0, store="sqlite"),
            on_ready=ready.set_result,
            shutdown=shutdown,
        )
    )
    try:
        url = await asyncio.wait_for(ready, timeout=30)
        async with a2a_client(url.rstrip("/")) as client:
            task = await send(client, user_message("math"))
    finally:
        shutdown.set()
        await asyncio.wait_for(server, timeout=30)
    assert error_data(task)["node"] == {"id": "rag_search", "kind": "business"}
    assert (tmp_path / "checkpoints.db").is_file()
    assert (tmp_path / "tasks.db").is_file()

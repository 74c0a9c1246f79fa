"""An answer to a paused task resumes it exactly once, whichever replica it lands on.

Two in-process apps (replicas A and B, each with its own worker id) share one SQLite file,
each through its own connections, as two server processes do. The agent asks a question;
two answers sent at once, one to each replica, both read the task paused (the stores hold
every read of a paused task until the other replica has read it too) and both try to
claim it: exactly one runs the agent, the other is answered ``task_busy`` (-32041,
retriable), and the task ends as the winner's run left it. On one server: an answer whose
task ended just before its claim gets a2a-sdk's terminal-state error, an answer refused
after its claim (a webhook the push policy refuses) leaves the task paused for the next,
and a store of the user's own without ``claim_paused`` resumes as it always did.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client.errors import A2AClientJSONRPCError
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Task, TaskState, TaskStatus

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.executor import CustomAgentExecutor
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.states import PAUSED_STATES
from llamon_agent.a2a.stores import WORKER_METADATA_KEY, open_stores
from llamon_agent.a2a.stores.memory import BoundedMemoryTaskStore
from llamon_agent.a2a.stores.sqlite import SQLiteTaskStore
from llamon_agent.a2a.task_locks import TASK_BUSY_CODE
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.hitl import HITLInterrupt, InterruptKind
from tests._support.a2a_server import (
    a2a_client,
    make_card,
    running_server,
    send,
    texts,
    user_message,
)
from tests._support.jsonrpc import assert_error, post, post_stream, request, text_message

WAIT = 10.0
WORKERS = ("replica-a", "replica-b")
ANSWERS = ("one", "two")


class Asker:
    """Asks a question (``kind``); an answer runs until ``go`` is set, then answers
    ``answered <text>``. ``answers`` lists the answers the agent ran with."""

    def __init__(self, kind: InterruptKind = "input-required") -> None:
        self.kind: InterruptKind = kind
        self.go = asyncio.Event()
        self.started = asyncio.Event()
        self.answers: list[str] = []

    async def invoke(self, ctx: AgentContext) -> Any:
        if not ctx.resumed:
            return HITLInterrupt(payload={"question": "Which one?"}, kind=self.kind)
        self.answers.append(ctx.text)
        self.started.set()
        await self.go.wait()
        return f"answered {ctx.text}"


class RacingStore(SQLiteTaskStore):
    """A replica's SQLite task store. While ``race`` is set, each read of a paused task
    waits at it until the other replica's request has read the task as well: both answers
    see the task paused before either claims it."""

    race: asyncio.Barrier | None = None

    async def get(self, task_id: str, context: ServerCallContext | None = None) -> Task | None:
        task = await super().get(task_id, context)
        race = self.race
        if race is not None and task is not None and task.status.state in PAUSED_STATES:
            await asyncio.wait_for(race.wait(), WAIT)
        return task


@asynccontextmanager
async def replicas(agent: Asker, home: Path) -> AsyncIterator[tuple[list[str], list[RacingStore]]]:
    """Replicas A and B serving ``agent`` on the SQLite file under ``home``: their URLs
    and task stores."""
    async with AsyncExitStack() as stack:
        urls: list[str] = []
        stores: list[RacingStore] = []
        for worker in WORKERS:
            opened = await open_stores("sqlite", home=home)
            stack.push_async_callback(opened.close)
            assert opened.database is not None
            store = RacingStore(opened.database)
            executor = CustomAgentExecutor(agent, task_store=store, worker=worker)
            app = create_app(agent, make_card(), task_store=store, executor=executor)
            urls.append(await stack.enter_async_context(running_server(app)))
            stores.append(store)
        yield urls, stores


def racing(stores: list[RacingStore]) -> None:
    race = asyncio.Barrier(len(stores))
    for store in stores:
        store.race = race


def raced(stores: list[RacingStore]) -> None:
    for store in stores:
        store.race = None


async def ask(http: httpx.AsyncClient, url: str, kind: str) -> dict[str, Any]:
    reply = await post(http, url, request("message/send", {"message": text_message("hi")}, "ask"))
    task: dict[str, Any] = reply["result"]
    assert task["status"]["state"] == kind, reply
    return task


def answer(task: dict[str, Any], text: str) -> dict[str, Any]:
    message = text_message(text, taskId=task["id"], contextId=task["contextId"])
    return {"message": message}


def history_texts(task: dict[str, Any]) -> list[str]:
    return [
        part["text"]
        for message in task.get("history") or []
        for part in message["parts"]
        if part["kind"] == "text"
    ]


@pytest.mark.reason("task_busy")
@pytest.mark.parametrize("kind", ["input-required", "auth-required"])
async def test_two_answers_racing_on_two_replicas_one_runs_the_other_is_busy(
    tmp_path: Path, kind: InterruptKind
) -> None:
    agent = Asker(kind)
    async with (
        replicas(agent, tmp_path) as (urls, stores),
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        try:
            task = await ask(http, urls[0], kind)
            racing(stores)
            sends = [
                asyncio.create_task(
                    post(http, url, request("message/send", answer(task, text), text))
                )
                for url, text in zip(urls, ANSWERS, strict=True)
            ]
            done, _ = await asyncio.wait(sends, timeout=WAIT, return_when="FIRST_COMPLETED")
            raced(stores)
            [first] = done  # the loser is answered at once; the winner's run waits for go
            loser = sends.index(first)
            winner = 1 - loser
            busy = first.result()
            assert busy["id"] == ANSWERS[loser]
            data = assert_error(busy, TASK_BUSY_CODE, "task_busy")
            assert (data.error_code, data.retriable) == (ErrorCode.RATE_LIMITED, True)

            agent.go.set()
            won = (await asyncio.wait_for(sends[winner], WAIT))["result"]
            assert (won["id"], won["status"]["state"]) == (task["id"], "completed")
            assert won["artifacts"][-1]["parts"] == [
                {"kind": "text", "text": f"answered {ANSWERS[winner]}"}
            ]
            assert won["metadata"][WORKER_METADATA_KEY] == WORKERS[winner]
            assert agent.answers == [ANSWERS[winner]]  # the agent ran once
            for url in urls:  # both replicas read the winner's end; the loser left no trace
                got = (await post(http, url, request("tasks/get", {"id": task["id"]})))["result"]
                assert got["status"]["state"] == "completed"
                assert got["artifacts"] == won["artifacts"]
                assert got["metadata"][WORKER_METADATA_KEY] == WORKERS[winner]
                assert ANSWERS[winner] in history_texts(got)
                assert ANSWERS[loser] not in history_texts(got)

            # the next requests on the loser's replica are answered: its answer again is
            # refused as for any ended task, and a new question is asked
            again = await post(
                http, urls[loser], request("message/send", answer(task, ANSWERS[loser]), "again")
            )
            assert again["error"]["code"] == -32602
            assert again["error"]["message"] == f"Task {task['id']} is in terminal state: completed"
            await ask(http, urls[loser], kind)
        finally:
            agent.go.set()


async def test_an_answer_to_a_task_resumed_on_another_replica_is_busy_send_and_stream(
    tmp_path: Path,
) -> None:
    agent = Asker()
    async with (
        replicas(agent, tmp_path) as (urls, _),
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        try:
            task = await ask(http, urls[1], "input-required")
            running = asyncio.create_task(
                post(http, urls[0], request("message/send", answer(task, "one"), "one"))
            )
            await asyncio.wait_for(agent.started.wait(), WAIT)
            # B sees the task taken by A's worker, and refuses to run it a second time
            got = (await post(http, urls[1], request("tasks/get", {"id": task["id"]})))["result"]
            assert got["status"]["state"] == "working"
            assert got["metadata"][WORKER_METADATA_KEY] == WORKERS[0]
            busy = await post(http, urls[1], request("message/send", answer(task, "two"), "two"))
            assert_error(busy, TASK_BUSY_CODE, "task_busy")
            events = await post_stream(
                http, urls[1], request("message/stream", answer(task, "three"), "three")
            )
            assert len(events) == 1
            assert_error(events[0], TASK_BUSY_CODE, "task_busy")

            agent.go.set()
            won = (await asyncio.wait_for(running, WAIT))["result"]
            assert won["status"]["state"] == "completed"
            assert agent.answers == ["one"]
        finally:
            agent.go.set()


@pytest.mark.reason("task_busy")
async def test_a2a_sdk_clients_answering_on_two_replicas_at_once_one_runs(tmp_path: Path) -> None:
    agent = Asker()
    async with (
        replicas(agent, tmp_path) as (urls, stores),
        a2a_client(urls[0]) as client_a,
        a2a_client(urls[1]) as client_b,
    ):
        try:
            asked = await send(client_a, user_message("hi"))
            assert asked.status.state == TaskState.input_required
            racing(stores)
            sends = [
                asyncio.create_task(
                    send(client, user_message(text, task_id=asked.id, context_id=asked.context_id))
                )
                for client, text in zip((client_a, client_b), ANSWERS, strict=True)
            ]
            done, _ = await asyncio.wait(sends, timeout=WAIT, return_when="FIRST_COMPLETED")
            raced(stores)
            [first] = done
            winner = 1 - sends.index(first)
            with pytest.raises(A2AClientJSONRPCError) as refused:
                first.result()
            error = refused.value.error
            assert error.code == TASK_BUSY_CODE
            assert isinstance(error.data, dict)
            assert (error.data["errorReason"], error.data["retriable"]) == ("task_busy", True)

            agent.go.set()
            won = await asyncio.wait_for(sends[winner], WAIT)
            assert (won.id, won.status.state) == (asked.id, TaskState.completed)
            assert texts(won) == [f"answered {ANSWERS[winner]}"]
            assert agent.answers == [ANSWERS[winner]]
        finally:
            agent.go.set()


class EndedMeanwhile(BoundedMemoryTaskStore):
    """A memory store on which the task ends ``canceled`` just before an answer claims it
    (as a ``tasks/cancel`` on another replica that came first)."""

    async def claim_paused(self, task: Task, paused_state: TaskState) -> bool:
        stored = await self.get(task.id)
        assert stored is not None
        ended = TaskStatus(state=TaskState.canceled)
        await self.save(stored.model_copy(update={"status": ended}))
        return await super().claim_paused(task, paused_state)


async def test_an_answer_to_a_task_ended_before_its_claim_gets_the_terminal_error() -> None:
    agent = Asker()
    app = create_app(agent, make_card(), task_store=EndedMeanwhile())
    async with running_server(app) as url, httpx.AsyncClient(timeout=WAIT) as http:
        task = await ask(http, url, "input-required")
        refused = await post(http, url, request("message/send", answer(task, "one"), "one"))
        assert refused["error"]["code"] == -32602
        assert refused["error"]["message"] == f"Task {task['id']} is in terminal state: canceled"
        assert refused["error"]["data"]["errorCode"] == "INVALID_INPUT"
        got = (await post(http, url, request("tasks/get", {"id": task["id"]})))["result"]
        assert got["status"]["state"] == "canceled"
        assert agent.answers == []


async def test_a_store_of_its_own_without_claims_resumes_as_before() -> None:
    agent = Asker()
    agent.go.set()
    app = create_app(agent, make_card(), task_store=InMemoryTaskStore())
    async with running_server(app) as url, httpx.AsyncClient(timeout=WAIT) as http:
        task = await ask(http, url, "input-required")
        reply = await post(http, url, request("message/send", answer(task, "one"), "one"))
        won = reply["result"]
        assert (won["id"], won["status"]["state"]) == (task["id"], "completed")
        assert won["artifacts"][-1]["parts"] == [{"kind": "text", "text": "answered one"}]
        assert agent.answers == ["one"]


async def test_an_answer_refused_after_its_claim_leaves_the_task_paused_for_the_next() -> None:
    agent = Asker()
    agent.go.set()
    async with (
        running_server(create_app(agent, make_card(push=True))) as url,
        httpx.AsyncClient(timeout=WAIT) as http,
    ):
        task = await ask(http, url, "input-required")
        params = answer(task, "one")
        params["configuration"] = {"pushNotificationConfig": {"url": "http://10.0.0.7:8080/h"}}
        refused = await post(http, url, request("message/send", params, "one"))
        assert_error(refused, -32602, "push_url_refused")
        got = (await post(http, url, request("tasks/get", {"id": task["id"]})))["result"]
        assert got["status"]["state"] == "input-required"
        assert got["status"] == task["status"]  # as it was: the question, unanswered
        assert "one" not in history_texts(got)
        reply = await post(http, url, request("message/send", answer(task, "two"), "two"))
        assert reply["result"]["status"]["state"] == "completed"
        assert reply["result"]["artifacts"][-1]["parts"] == [
            {"kind": "text", "text": "answered two"}
        ]
        assert agent.answers == ["two"]

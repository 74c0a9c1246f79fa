"""Races on one task, over real HTTP on 127.0.0.1: one true final state, every request answered.

Each race is repeated ``TRIALS`` times on one server with a fixed seed: both requests
are fired together (``asyncio.gather``) and a seeded number of event-loop turns decides
which side starts first. The agent waits on an ``asyncio.Event`` gate the test opens, so
nothing here waits on a clock.

* cancel racing completion: the cancel answer is the final state -- ``canceled`` (and
  ``tasks/get`` says so, with no answer stored) or -32002 naming ``completed`` (and the
  answer is stored);
* resume racing cancel: both requests are answered, and agree with ``tasks/get``;
* two resumes of one paused task (send or stream): exactly one runs, the other gets
  -32041 ``task_busy``; every stream ends with a final event or a JSON-RPC error.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from llamon_agent.a2a.agent import AgentContext, FinalOutput
from llamon_agent.a2a.server import create_app
from llamon_agent.core.hitl import HITLInterrupt
from tests._support.a2a_server import make_card, running_server
from tests._support.jsonrpc import assert_error, post, request, text_message

TRIALS = 200
SEED = 20261130
ANSWER_TIMEOUT = 10.0
"""Every request must be answered within this many seconds (a hang fails the trial)."""
TASK_BUSY = -32041
NOT_CANCELABLE = -32002


class GatedAgent:
    """``ask``: pauses with a question. ``run`` (or a resume): waits for its task's gate,
    then answers ``answer:<task id>``. ``started[task]`` is set once the agent waits.
    Streamed (``message/stream`` of ``run``): the chunk ``first``, the gate, the chunk
    ``answer:<task id>``."""

    def __init__(self) -> None:
        self.gates: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.started: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
        self.runs: defaultdict[str, int] = defaultdict(int)

    async def stream(self, ctx: AgentContext) -> AsyncIterator[str | FinalOutput]:
        if ctx.text != "run":
            yield FinalOutput(await self.invoke(ctx))
            return
        yield "first"
        self.started[ctx.task_id].set()
        await self.gates[ctx.task_id].wait()
        yield f"answer:{ctx.task_id}"

    async def invoke(self, ctx: AgentContext) -> Any:
        if ctx.text == "ask" and not ctx.resumed:
            return HITLInterrupt(payload={"question": "Which one?"})
        if ctx.text == "quick":
            return f"quick:{ctx.task_id}"
        self.runs[ctx.task_id] += 1
        self.started[ctx.task_id].set()
        await self.gates[ctx.task_id].wait()
        return f"answer:{ctx.task_id}"


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, GatedAgent, httpx.AsyncClient]]:
    agent = GatedAgent()
    limits = httpx.Limits(max_connections=50, max_keepalive_connections=50)
    async with (
        running_server(create_app(agent, make_card())) as url,
        httpx.AsyncClient(timeout=ANSWER_TIMEOUT, limits=limits) as http,
    ):
        yield url, agent, http


async def _turns(rng: random.Random) -> None:
    """A seeded number of event-loop turns: which side of a race starts first."""
    for _ in range(rng.randrange(8)):
        await asyncio.sleep(0)


async def _answer(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC reply, or a failed test if none comes within ``ANSWER_TIMEOUT``."""
    return await asyncio.wait_for(post(http, url, body), ANSWER_TIMEOUT)


async def _get(http: httpx.AsyncClient, url: str, task_id: str) -> dict[str, Any]:
    reply = await _answer(http, url, request("tasks/get", {"id": task_id}))
    task: dict[str, Any] = reply["result"]
    return task


async def _paused_task(http: httpx.AsyncClient, url: str) -> str:
    reply = await _answer(http, url, request("message/send", {"message": text_message("ask")}))
    assert reply["result"]["status"]["state"] == "input-required", reply
    task_id: str = reply["result"]["id"]
    return task_id


def _texts(task: dict[str, Any]) -> list[str]:
    return [
        part["text"]
        for artifact in task.get("artifacts") or []
        for part in artifact["parts"]
        if part["kind"] == "text"
    ]


async def _stream(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every SSE event of a streaming request, or a failed test if it does not end in time."""

    async def read() -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        async with http.stream("POST", url + "/", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    events.append(json.loads(line.removeprefix("data:").strip()))
        return events

    return await asyncio.wait_for(read(), ANSWER_TIMEOUT)


def _ends_properly(events: list[dict[str, Any]]) -> bool:
    """The stream's last event is a final status-update or a JSON-RPC error."""
    if not events:
        return False
    last = events[-1]
    if "error" in last:
        return True
    result = last["result"]
    return bool(result.get("kind") == "status-update" and result.get("final"))


async def test_cancel_racing_completion_has_one_true_final_state(
    served: tuple[str, GatedAgent, httpx.AsyncClient],
) -> None:
    url, agent, http = served
    rng = random.Random(SEED)  # noqa: S311 - a reproducible order, not a secret
    outcomes: defaultdict[str, int] = defaultdict(int)
    for trial in range(TRIALS):
        params = {"message": text_message("run"), "configuration": {"blocking": False}}
        started = await _answer(http, url, request("message/send", params))
        task_id = started["result"]["id"]
        await asyncio.wait_for(agent.started[task_id].wait(), ANSWER_TIMEOUT)
        gate = agent.gates[task_id]

        async def complete(gate: asyncio.Event = gate) -> None:
            await _turns(rng)
            gate.set()

        async def cancel(task_id: str = task_id) -> dict[str, Any]:
            await _turns(rng)
            return await _answer(http, url, request("tasks/cancel", {"id": task_id}))

        answer, _ = await asyncio.gather(cancel(), complete())
        final = await _get(http, url, task_id)
        state = final["status"]["state"]
        if "result" in answer:
            assert answer["result"]["status"]["state"] == "canceled", (trial, answer)
            assert state == "canceled", (trial, final)
            assert f"answer:{task_id}" not in _texts(final), (trial, final)
            outcomes["canceled"] += 1
        else:
            data = assert_error(answer, NOT_CANCELABLE, "task_not_cancelable")
            assert state == "completed", (trial, final)
            assert data.error_message.endswith("current state: completed"), (trial, answer)
            assert _texts(final) == [f"answer:{task_id}"], (trial, final)
            outcomes["completed"] += 1
    assert set(outcomes) == {"canceled", "completed"}, outcomes  # both sides won sometimes
    quick = await _answer(http, url, request("message/send", {"message": text_message("quick")}))
    assert quick["result"]["status"]["state"] == "completed"


async def test_cancel_racing_a_streamed_answer_has_one_true_final_state(
    served: tuple[str, GatedAgent, httpx.AsyncClient],
) -> None:
    url, agent, http = served
    rng = random.Random(SEED + 4)  # noqa: S311 - a reproducible order, not a secret
    outcomes: defaultdict[str, int] = defaultdict(int)
    for trial in range(TRIALS):
        body = request("message/stream", {"message": text_message("run")})
        events: list[dict[str, Any]] = []
        first = asyncio.Event()
        reading = asyncio.create_task(_stream_into(http, url, body, events, first))
        await asyncio.wait_for(first.wait(), ANSWER_TIMEOUT)  # the client knows the task now
        task_id = events[0]["result"]["id"]
        await asyncio.wait_for(agent.started[task_id].wait(), ANSWER_TIMEOUT)
        gate = agent.gates[task_id]

        async def complete(gate: asyncio.Event = gate) -> None:
            await _turns(rng)
            gate.set()

        async def cancel(task_id: str = task_id) -> dict[str, Any]:
            await _turns(rng)
            return await _answer(http, url, request("tasks/cancel", {"id": task_id}))

        answer, _ = await asyncio.gather(cancel(), complete())
        await asyncio.wait_for(reading, ANSWER_TIMEOUT)
        final = await _get(http, url, task_id)
        state = final["status"]["state"]
        assert _ends_properly(events), (trial, events)
        assert events[-1]["result"]["status"]["state"] == state, (trial, events[-1], final)
        if "result" in answer:
            assert answer["result"]["status"]["state"] == "canceled", (trial, answer)
            assert state == "canceled", (trial, final)
        else:
            assert_error(answer, NOT_CANCELABLE, "task_not_cancelable")
            assert state == "completed", (trial, final)
            assert _texts(final) == ["first", f"answer:{task_id}"], (trial, final)
        streamed = [
            part["text"]
            for event in events
            if event["result"].get("kind") == "artifact-update"
            for part in event["result"]["artifact"]["parts"]
        ]
        # the stored task holds what the stream delivered, nothing from after the end
        assert set(_texts(final)) <= set(streamed), (trial, final, events)
        outcomes[state] += 1
    assert set(outcomes) == {"canceled", "completed"}, outcomes


async def _stream_into(
    http: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    events: list[dict[str, Any]],
    first: asyncio.Event,
) -> None:
    """Read a stream's events into ``events``; ``first`` is set at the first one."""
    async with http.stream("POST", url + "/", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line.removeprefix("data:").strip()))
                first.set()


async def test_resume_racing_cancel_answers_both_requests(
    served: tuple[str, GatedAgent, httpx.AsyncClient],
) -> None:
    url, agent, http = served
    rng = random.Random(SEED + 1)  # noqa: S311 - a reproducible order, not a secret
    outcomes: defaultdict[str, int] = defaultdict(int)
    for trial in range(TRIALS):
        task_id = await _paused_task(http, url)
        gate = agent.gates[task_id]

        async def resume(task_id: str = task_id) -> dict[str, Any]:
            await _turns(rng)
            message = text_message("the red one", taskId=task_id)
            return await _answer(http, url, request("message/send", {"message": message}))

        async def cancel(task_id: str = task_id) -> dict[str, Any]:
            await _turns(rng)
            return await _answer(http, url, request("tasks/cancel", {"id": task_id}))

        async def complete(gate: asyncio.Event = gate) -> None:
            await _turns(rng)
            gate.set()

        resumed, canceled, _ = await asyncio.gather(resume(), cancel(), complete())
        final = await _get(http, url, task_id)
        state = final["status"]["state"]
        assert state in {"canceled", "completed"}, (trial, final)
        if "result" in canceled:
            assert state == "canceled", (trial, canceled, final)
            assert f"answer:{task_id}" not in _texts(final), (trial, final)
        else:
            assert_error(canceled, NOT_CANCELABLE, "task_not_cancelable")
            assert state == "completed", (trial, final)
        if "result" in resumed:  # the resume ran: it answers the state the task ended in
            assert resumed["result"]["status"]["state"] == state, (trial, resumed, final)
        else:  # the cancel came first: the task had ended
            assert state == "canceled", (trial, resumed, final)
            assert resumed["error"]["code"] == -32602, (trial, resumed)
        outcomes[f"{state}/{'ran' if 'result' in resumed else 'refused'}"] += 1
    assert len(outcomes) >= 2, outcomes
    quick = await _answer(http, url, request("message/send", {"message": text_message("quick")}))
    assert quick["result"]["status"]["state"] == "completed"


@pytest.mark.reason("task_busy")
async def test_two_resumes_at_once_one_runs_the_other_is_busy(
    served: tuple[str, GatedAgent, httpx.AsyncClient],
) -> None:
    url, agent, http = served
    rng = random.Random(SEED + 2)  # noqa: S311 - a reproducible order, not a secret
    for trial in range(TRIALS):
        task_id = await _paused_task(http, url)

        async def resume(text: str, task_id: str = task_id) -> dict[str, Any]:
            await _turns(rng)
            message = text_message(text, taskId=task_id)
            return await _answer(http, url, request("message/send", {"message": message}))

        async def open_gate(task_id: str = task_id) -> None:
            await asyncio.wait_for(agent.started[task_id].wait(), ANSWER_TIMEOUT)
            await _turns(rng)
            agent.gates[task_id].set()

        first, second, _ = await asyncio.gather(resume("one"), resume("two"), open_gate())
        answers = [first, second]
        ran = [a for a in answers if "result" in a]
        busy = [a for a in answers if "error" in a]
        assert len(ran) == 1, (trial, answers)
        assert len(busy) == 1, (trial, answers)
        assert ran[0]["result"]["status"]["state"] == "completed", (trial, ran)
        data = assert_error(busy[0], TASK_BUSY, "task_busy")
        assert data.retriable is True
        assert agent.runs[task_id] == 1, (trial, agent.runs[task_id])
        assert (await _get(http, url, task_id))["status"]["state"] == "completed"
    # retriable: once the running resume ended, the next one is taken
    task_id = await _paused_task(http, url)
    agent.gates[task_id].set()
    message = text_message("three", taskId=task_id)
    again = await _answer(http, url, request("message/send", {"message": message}))
    assert again["result"]["status"]["state"] == "completed"


async def test_two_streaming_resumes_one_runs_every_stream_ends(
    served: tuple[str, GatedAgent, httpx.AsyncClient],
) -> None:
    url, agent, http = served
    rng = random.Random(SEED + 3)  # noqa: S311 - a reproducible order, not a secret
    for trial in range(TRIALS):
        task_id = await _paused_task(http, url)

        async def resume(text: str, task_id: str = task_id) -> list[dict[str, Any]]:
            await _turns(rng)
            message = text_message(text, taskId=task_id)
            return await _stream(http, url, request("message/stream", {"message": message}))

        async def open_gate(task_id: str = task_id) -> None:
            await asyncio.wait_for(agent.started[task_id].wait(), ANSWER_TIMEOUT)
            await _turns(rng)
            agent.gates[task_id].set()

        first, second, _ = await asyncio.gather(resume("one"), resume("two"), open_gate())
        streams = [first, second]
        assert all(_ends_properly(events) for events in streams), (trial, streams)
        busy = [events for events in streams if "error" in events[-1]]
        ran = [events for events in streams if "result" in events[-1]]
        assert len(ran) == 1, (trial, streams)
        assert len(busy) == 1, (trial, streams)
        assert busy[0][-1]["error"]["code"] == TASK_BUSY, (trial, busy)
        assert busy[0][-1]["error"]["data"]["errorReason"] == "task_busy", (trial, busy)
        assert ran[0][-1]["result"]["status"]["state"] == "completed", (trial, ran)
        assert agent.runs[task_id] == 1, (trial, agent.runs[task_id])
    quick = await _answer(http, url, request("message/send", {"message": text_message("quick")}))
    assert quick["result"]["status"]["state"] == "completed"


async def test_a_run_that_answered_frees_its_task_at_once(
    served: tuple[str, GatedAgent, httpx.AsyncClient],
) -> None:
    """A client that answers the moment it reads the question is never told task_busy."""
    url, _, http = served
    for trial in range(50):
        events = await _stream(
            http, url, request("message/stream", {"message": text_message("ask")})
        )
        assert events[-1]["result"]["status"]["state"] == "input-required", (trial, events)
        task_id = events[-1]["result"]["taskId"]
        message = text_message("quick", taskId=task_id)
        events = await _stream(http, url, request("message/stream", {"message": message}))
        assert events[-1]["result"]["status"]["state"] == "completed", (trial, events)

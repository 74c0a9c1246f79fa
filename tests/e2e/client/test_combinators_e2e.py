"""Two real llamon agents on 127.0.0.1 called with ``AgentClient``, one failing with a
known errorCode: best_effort returns one success and one typed failure carrying that
errorCode, all_or_nothing raises it, and the failing agent answers the next request. An
agent whose saga fails answers its caller with the failing step's errorCode; a saga step
that sends its idempotency key as the ``messageId`` is seen by the server under that id,
and repeating the run does not run the step again."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import pytest
from a2a.types import Message, Part, Role, TaskState, TextPart

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import (
    AgentClient,
    RemoteRateLimitedError,
    Saga,
    StepContext,
    all_or_nothing,
    best_effort,
    clear_card_cache,
    saga_step,
)
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.exceptions import LlamonApplicationError
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    texts,
    user_message,
)


class Echo:
    """Answers every question; keeps the ``messageId`` of each message it ran for."""

    def __init__(self) -> None:
        self.message_ids: list[str] = []

    async def invoke(self, ctx: AgentContext) -> str:
        self.message_ids.append(ctx.message.message_id)
        return f"echo: {ctx.text}"


class OutOfQuota:
    """Fails ``fail`` with RATE_LIMITED (the day's quota: not retriable, retry after 2 s
    as a hint); answers anything else."""

    async def invoke(self, ctx: AgentContext) -> str:
        if ctx.text == "fail":
            raise LlamonApplicationError(
                "RATE_LIMITED", "quota_exhausted", retriable=False, retry_after_ms=2000
            )
        return f"quota ok: {ctx.text}"


async def ask(client: AgentClient, text: str) -> str:
    """One agent call: its text; a failure raises the client's typed error."""
    return (await client.send(text)).text


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


@asynccontextmanager
async def serving(*agents: object) -> AsyncIterator[list[AgentClient]]:
    """Each agent on its own server; an ``AgentClient`` for each."""
    async with AsyncExitStack() as stack:
        clients = []
        for agent in agents:
            url = await stack.enter_async_context(running_server(create_app(agent, make_card())))
            clients.append(await stack.enter_async_context(AgentClient(url)))
        yield clients


async def test_one_success_and_one_typed_failure_across_two_agents() -> None:
    async with serving(Echo(), OutOfQuota()) as (echo, limited):
        outcomes = await best_effort([ask(echo, "hi"), ask(limited, "fail")])
        with pytest.raises(RemoteRateLimitedError) as raised:
            await all_or_nothing([ask(echo, "hi"), ask(limited, "fail")])
        following = await ask(limited, "again")
        together = await all_or_nothing([ask(echo, "a"), ask(limited, "b")])

    assert outcomes[0].ok
    assert outcomes[0].value == "echo: hi"
    failure = outcomes[1]
    assert not failure.ok
    assert isinstance(failure.error, RemoteRateLimitedError)
    assert (failure.error_code, failure.reason, failure.retriable, failure.retry_after_ms) == (
        ErrorCode.RATE_LIMITED,
        "quota_exhausted",
        False,
        2000,
    )
    assert failure.error.agent == "test-agent"
    assert failure.error.task_id is not None
    assert classify_exception(raised.value).as_tuple() == (
        ErrorCode.RATE_LIMITED,
        "quota_exhausted",
        False,
    )
    assert raised.value.retry_after_ms == 2000
    assert following == "quota ok: again"
    assert together == ["echo: a", "quota ok: b"]


class Booking:
    """Runs a saga whose last step (a call to the quota agent) fails with RATE_LIMITED and
    whose first undo fails too."""

    def __init__(self, quota_url: str) -> None:
        self.quota_url = quota_url

    async def invoke(self, ctx: AgentContext) -> str:
        async def reserve(step: StepContext) -> str:
            return "seat-1"

        async def release(step: StepContext, seat: str) -> None:
            raise ConnectionError("seat service gone")

        async def pay(step: StepContext) -> str:
            async with AgentClient(self.quota_url) as quota:
                return await ask(quota, ctx.text)  # its RemoteAgentError propagates

        results = await Saga(saga_step(reserve, release), saga_step(pay)).run()
        return str(results)


async def test_an_agent_whose_saga_fails_answers_with_the_failing_steps_error_code() -> None:
    async with running_server(create_app(OutOfQuota(), make_card())) as quota_url:
        app = create_app(Booking(quota_url), make_card())
        async with running_server(app) as url, a2a_client(url) as client:
            task = await send(client, user_message("fail"))
            following = await send(client, user_message("ok"))
    assert task.status.state == TaskState.failed
    data = error_data(task)
    # the step's code and reason; not retriable: the seat could not be released
    assert (data["errorCode"], data["errorReason"], data["retriable"]) == (
        "RATE_LIMITED",
        "quota_exhausted",
        False,
    )
    assert "'pay'" in data["errorMessage"]
    assert "'reserve'" in data["errorMessage"]
    assert "retryAfterMs" not in data
    assert following.status.state == TaskState.completed
    assert texts(following) == ["['seat-1', 'quota ok: ok']"]


def _keyed(step: StepContext, text: str) -> Message:
    """The step's message, sent under its idempotency key."""
    part = Part(root=TextPart(text=text))
    return Message(role=Role.user, parts=[part], message_id=step.idempotency_key)


async def test_a_saga_steps_idempotency_key_is_the_message_id_the_server_sees() -> None:
    echo = Echo()
    async with serving(echo) as (agent,):

        async def book(step: StepContext) -> str | None:
            return (await agent.send(_keyed(step, "book"))).task_id

        async def confirm(step: StepContext) -> str | None:
            return (await agent.send(_keyed(step, "confirm"))).task_id

        saga = Saga(saga_step(book), saga_step(confirm))
        run_id = str(uuid.uuid4())
        first = await saga.run(run_id=run_id)
        repeated = await saga.run(run_id=run_id)  # a retried run: the same keys
        fresh = await saga.run()

    names = ("book", "confirm")
    keys = [StepContext(run_id, index, name).idempotency_key for index, name in enumerate(names)]
    assert echo.message_ids[:2] == keys
    assert repeated == first  # answered with the tasks the first run started
    assert len(echo.message_ids) == 4  # the repeat ran nothing; the fresh run ran twice
    assert not set(echo.message_ids[2:]) & set(keys)
    assert not set(fresh) & set(first)

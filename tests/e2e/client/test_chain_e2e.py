"""``chain(...)`` across real agents on 127.0.0.1: three llamon agents (text -> text ->
data), a mode mismatch refused before any agent is called, a large artifact handed over
by reference through an ``ArtifactShelf`` the caller serves, a failure in the middle, and
a plain a2a-sdk server (not llamon) in the middle of a chain."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

import httpx
import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.apps import A2AStarletteApplication
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCard, FileWithUri, Part, Task, TaskState, TaskStatus, TextPart
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import (
    DEFAULT_BY_REFERENCE_ABOVE,
    AgentClient,
    ArtifactShelf,
    ArtifactTooLargeError,
    CardMismatchError,
    ChainFailedError,
    ChainStep,
    RemoteNotFoundError,
    RemoteUnavailableError,
    chain,
    clear_card_cache,
)
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.errors import raise_application_error
from tests._support.a2a_server import make_card, running_server


@dataclass
class Seen:
    """What reached one server: the paths it was asked to GET, each POST body's size."""

    gets: list[str] = field(default_factory=list)
    post_sizes: list[int] = field(default_factory=list)


class Watch:
    """ASGI middleware writing what reaches the app into ``seen``."""

    def __init__(self, app: ASGIApp, seen: Seen) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            if scope["type"] == "http":
                self.seen.gets.append(scope["path"])
            await self.app(scope, receive, send)
            return
        size = 0

        async def counting() -> Message:
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if not message.get("more_body", False):
                    self.seen.post_sizes.append(size)
            return message

        await self.app(scope, counting, send)


def _watched(app: Starlette, seen: Seen) -> Starlette:
    app.add_middleware(Watch, seen=seen)
    return app


def _card(name: str, inputs: list[str], outputs: list[str]) -> AgentCard:
    return make_card(streaming=False).model_copy(
        update={"name": name, "default_input_modes": inputs, "default_output_modes": outputs}
    )


class PlainEcho(AgentExecutor):
    """A plain a2a-sdk agent (no llamon): ``FAIL`` fails with text only, else echoes."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = Task(
            id=str(context.task_id),
            context_id=str(context.context_id),
            status=TaskStatus(state=TaskState.submitted),
            history=[context.message],
        )
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input()
        if text == "FAIL":
            await updater.failed(updater.new_agent_message([Part(root=TextPart(text="down"))]))
            return
        await updater.add_artifact([Part(root=TextPart(text=f"plain {text}"))], name="response")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


class Shout:
    """Text in, text out: the text in capitals."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def invoke(self, ctx: AgentContext) -> str:
        self.texts.append(ctx.text)
        return ctx.text.upper()


class Exclaim:
    """Text in, text out: adds an exclamation; ``UNKNOWN`` fails with NOT_FOUND."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def invoke(self, ctx: AgentContext) -> str:
        self.texts.append(ctx.text)
        if "UNKNOWN" in ctx.text:
            raise_application_error(
                ErrorCode.NOT_FOUND,
                "customer_not_found",
                message="no such customer",
                errorSource="db:customers",
            )
        return f"{ctx.text}!"


class Count:
    """Text in, data out: the words of the text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def invoke(self, ctx: AgentContext) -> dict[str, object]:
        self.texts.append(ctx.text)
        return {"words": len(ctx.text.split()), "text": ctx.text}


class Fetch:
    """Text in, text out: reads a text given by reference (a FilePart's URI) with httpx,
    or says how long the text given by value is."""

    def __init__(self) -> None:
        self.inline_texts: list[str] = []
        self.uris: list[str] = []

    async def invoke(self, ctx: AgentContext) -> str:
        self.inline_texts.extend(p.root.text for p in ctx.parts if isinstance(p.root, TextPart))
        if not ctx.files:
            return f"inline {len(ctx.text)} chars"
        (file_part,) = ctx.files
        assert isinstance(file_part.file, FileWithUri)
        self.uris.append(file_part.file.uri)
        async with httpx.AsyncClient() as http:
            response = await http.get(file_part.file.uri)
        response.raise_for_status()
        digest = hashlib.sha256(response.content).hexdigest()
        return f"{file_part.file.mime_type} {len(response.content)} bytes {digest}"


class Big:
    """Text in, text out: a text of ``size`` bytes."""

    def __init__(self, size: int) -> None:
        self.size = size

    async def invoke(self, ctx: AgentContext) -> str:
        return ("x" * (self.size - len(ctx.text))) + ctx.text


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


@asynccontextmanager
async def serving(
    *agents: tuple[object, AgentCard, Seen],
) -> AsyncIterator[list[AgentClient]]:
    """Each agent on its own server; an ``AgentClient`` for each."""
    async with AsyncExitStack() as stack:
        clients = []
        for agent, card, seen in agents:
            url = await stack.enter_async_context(
                running_server(_watched(create_app(agent, card), seen))
            )
            clients.append(await stack.enter_async_context(AgentClient(url)))
        yield clients


TEXT = ["text/plain"]
DATA = ["application/json"]


async def test_three_llamon_agents_text_to_text_to_data() -> None:
    shout, exclaim, count = Shout(), Exclaim(), Count()
    seen = [Seen(), Seen(), Seen()]
    async with serving(
        (shout, _card("shout", TEXT, TEXT), seen[0]),
        (exclaim, _card("exclaim", TEXT, TEXT), seen[1]),
        (count, _card("count", TEXT, DATA), seen[2]),
    ) as (a, b, c):
        done = await chain(a, b, c, input="hello agent world")
        again = await chain(a, b, c, input="once more")

    assert done.complete
    assert [r.state for r in done.results] == [TaskState.completed] * 3
    assert [r.text for r in done.results[:2]] == ["HELLO AGENT WORLD", "HELLO AGENT WORLD!"]
    assert done.last.data == ({"words": 3, "text": "HELLO AGENT WORLD!"},)
    assert shout.texts == ["hello agent world", "once more"]
    assert exclaim.texts == ["HELLO AGENT WORLD", "ONCE MORE"]
    assert count.texts == ["HELLO AGENT WORLD!", "ONCE MORE!"]
    assert again.last.data == ({"words": 2, "text": "ONCE MORE!"},)
    assert [len(s.post_sizes) for s in seen] == [2, 2, 2]


@pytest.mark.reason("card_mismatch_error")
async def test_a_mode_mismatch_is_refused_before_any_agent_is_called() -> None:
    shout, count = Shout(), Count()
    seen = [Seen(), Seen()]
    async with serving(
        (shout, _card("shout", TEXT, TEXT), seen[0]),
        (count, _card("count", DATA, DATA), seen[1]),
    ) as (a, b):
        with pytest.raises(CardMismatchError) as refused:
            await chain(a, b, input="hello")
        with pytest.raises(CardMismatchError) as no_skill:
            await chain(a, ChainStep(b, skill="summarize"), input="hello")
        assert [s.post_sizes for s in seen] == [[], []]  # only the cards were read
        assert shout.texts == count.texts == []
        following = await chain(a, input="hello")

    message = str(refused.value)
    assert message == (
        "agent 'shout' cannot feed agent 'count': 'shout' default output modes: text/plain; "
        "'count' default input modes: application/json; no mode in common, nothing was sent"
    )
    assert "127.0.0.1" not in message
    assert str(no_skill.value) == "agent 'count' has no skill 'summarize' (skills: answer)"
    assert following.last.text == "HELLO"


async def test_a_large_artifact_goes_by_reference_through_the_shelf() -> None:
    size = 4 * DEFAULT_BY_REFERENCE_ABOVE
    fetch = Fetch()
    seen = [Seen(), Seen(), Seen()]
    shelf = ArtifactShelf()
    async with (
        running_server(_watched(shelf.app(), seen[2])) as shelf_url,
        serving(
            (Big(size), _card("big", TEXT, TEXT), seen[0]),
            (fetch, _card("fetch", TEXT, TEXT), seen[1]),
        ) as (a, b),
    ):
        shelf.base_url = shelf_url
        done = await chain(a, b, input="tail", shelf=shelf)
        assert len(shelf) == 0  # removed once the reading step answered
        async with httpx.AsyncClient() as http:
            gone = await http.get(fetch.uris[0])
        small = await chain(a, b, input="small", shelf=shelf, by_reference_above=size - 1)

    sent = ("x" * (size - 4) + "tail").encode()
    assert done.complete
    assert done.last.text == f"text/plain {size} bytes {hashlib.sha256(sent).hexdigest()}"
    assert fetch.inline_texts == []
    assert fetch.uris[0].startswith(shelf_url + "/")
    assert len(fetch.uris[0].rsplit("/", 1)[-1]) >= 43  # 256 random bits
    assert max(seen[1].post_sizes) < DEFAULT_BY_REFERENCE_ABOVE  # nothing oversized inline
    paths = [uri.removeprefix(shelf_url) for uri in fetch.uris]
    assert seen[2].gets == [paths[0], paths[0], paths[1]]  # the agent, the test, the agent
    assert gone.status_code == 404
    assert small.complete  # the next chain is answered


async def test_a_failure_in_the_middle_names_the_step_and_keeps_the_results_before() -> None:
    shout, exclaim, count = Shout(), Exclaim(), Count()
    seen = [Seen(), Seen(), Seen()]
    async with serving(
        (shout, _card("shout", TEXT, TEXT), seen[0]),
        (exclaim, _card("exclaim", TEXT, TEXT), seen[1]),
        (count, _card("count", TEXT, DATA), seen[2]),
    ) as (a, b, c):
        with pytest.raises(ChainFailedError) as caught:
            await chain(a, b, c, input="unknown customer")
        assert seen[2].post_sizes == []  # the third agent was never called
        following = await chain(a, b, c, input="known customer")

    error = caught.value
    assert isinstance(error, RemoteNotFoundError)  # the step's own class
    assert (error.step, error.steps) == (2, 3)
    assert (error.code, error.reason, error.retriable) == (
        ErrorCode.NOT_FOUND,
        "customer_not_found",
        False,
    )
    assert error.agent == "exclaim"
    assert error.message == "chain step 2 of 3 (agent 'exclaim') failed: no such customer"
    assert error.data is not None
    assert error.data.error_source == "db:customers"
    assert error.error.__class__ is RemoteNotFoundError
    assert error.__cause__ is error.error
    assert error.task_id == error.error.task_id is not None
    assert [r.text for r in error.results] == ["UNKNOWN CUSTOMER"]
    assert error.cause_hops == [
        {
            "agent": "exclaim",
            "taskId": error.task_id,
            "errorCode": "NOT_FOUND",
            "errorReason": "customer_not_found",
            "errorSource": "db:customers",
        }
    ]
    assert following.last.data == ({"words": 2, "text": "KNOWN CUSTOMER!"},)


async def test_a_plain_a2a_server_in_the_middle_of_a_chain() -> None:
    shout, count = Shout(), Count()
    seen = [Seen(), Seen()]
    plain_card = _card("plain", TEXT, TEXT)
    handler = DefaultRequestHandler(PlainEcho(), InMemoryTaskStore())
    async with (
        running_server(A2AStarletteApplication(plain_card, handler).build()) as plain_url,
        serving(
            (shout, _card("shout", TEXT, TEXT), seen[0]),
            (count, _card("count", TEXT, DATA), seen[1]),
        ) as (a, c),
        AgentClient(plain_url) as plain,
    ):
        done = await chain(a, plain, c, input="hello there")
        with pytest.raises(ChainFailedError) as caught:
            await chain(a, plain, c, input="fail")
        following = await chain(a, plain, c, input="again")

    assert done.complete
    assert [r.text for r in done.results[:2]] == ["HELLO THERE", "plain HELLO THERE"]
    assert done.last.data == ({"words": 3, "text": "plain HELLO THERE"},)
    error = caught.value  # the plain server failed "FAIL" with text only: by its state
    assert (error.step, error.code, error.reason, error.data) == (
        2,
        ErrorCode.INTERNAL_ERROR,
        "remote_task_failed",
        None,
    )
    assert error.message == "chain step 2 of 3 (agent 'plain') failed: down"
    assert count.texts == ["plain HELLO THERE", "plain AGAIN"]
    assert following.last.data == ({"words": 2, "text": "plain AGAIN"},)


@pytest.mark.reason("artifact_too_large_error")
async def test_an_artifact_the_shelf_cannot_hold_stops_before_the_next_call() -> None:
    fetch = Fetch()
    seen = [Seen(), Seen()]
    shelf = ArtifactShelf(max_bytes=1000)
    async with (
        running_server(shelf.app()) as shelf_url,
        serving(
            (Big(2000), _card("big", TEXT, TEXT), seen[0]),
            (fetch, _card("fetch", TEXT, TEXT), seen[1]),
        ) as (a, b),
    ):
        shelf.base_url = shelf_url
        with pytest.raises(ArtifactTooLargeError) as caught:
            await chain(a, b, input="tail", shelf=shelf, by_reference_above=100)
        assert seen[1].post_sizes == []  # the next agent was never called
        following = await chain(a, b, input="tail", shelf=shelf, by_reference_above=5000)

    assert str(caught.value) == "an artifact of 2000 bytes is larger than the shelf (1000 bytes)"
    assert caught.value.__notes__ == ["chain step 2 of 2 ('fetch')"]
    assert fetch.uris == []
    assert fetch.inline_texts == ["x" * 1996 + "tail"]  # by value: under the threshold
    assert following.last.text == "inline 2000 chars"


@pytest.mark.reason("a2a_invalid_response")
async def test_an_unreadable_card_fails_its_step_before_any_agent_is_called() -> None:
    shout = Shout()
    seen = Seen()

    async def not_a_card(request: Request) -> Response:
        return JSONResponse({"name": "half a card"})

    broken = Starlette(routes=[Route("/.well-known/agent-card.json", not_a_card)])
    async with (
        running_server(broken) as broken_url,
        serving((shout, _card("shout", TEXT, TEXT), seen)) as (a,),
        AgentClient(broken_url) as b,
    ):
        with pytest.raises(ChainFailedError) as caught:
            await chain(a, b, input="hello")
        following = await chain(a, input="hello")

    error = caught.value
    assert isinstance(error, RemoteUnavailableError)
    assert (error.step, error.steps, error.results) == (2, 2, ())
    assert (error.reason, error.retriable) == ("a2a_invalid_response", False)
    assert error.message == (
        "chain step 2 of 2 failed: the called agent's card is not a valid agent card"
    )
    assert shout.texts == ["hello"]  # only the chain that followed called it
    assert following.last.text == "HELLO"

"""``RemoteResult`` read off a task, and where the credential providers put their secret."""

from __future__ import annotations

from a2a.types import (
    AgentCard,
    APIKeySecurityScheme,
    Artifact,
    DataPart,
    In,
    Message,
    Part,
    Role,
    SecurityScheme,
    Task,
    TaskState,
    TaskStatus,
    TextPart,
)

from llamon_agent.client import ApiKey, Bearer, RemoteResult
from tests._support.a2a_server import make_card


def test_a_task_result_joins_text_and_lists_data() -> None:
    parts = [
        Part(root=TextPart(text="a")),
        Part(root=DataPart(data={"n": 1})),
        Part(root=TextPart(text="b")),
    ]
    task = Task(
        id="t",
        context_id="c",
        status=TaskStatus(state=TaskState.completed),
        artifacts=[Artifact(artifact_id="x", parts=parts)],
    )
    result = RemoteResult.from_task(task)
    assert (result.text, result.data, result.needs_input) == ("ab", ({"n": 1},), False)


def test_a_paused_task_asks_its_question() -> None:
    question = Message(
        role=Role.agent, parts=[Part(root=DataPart(data={"question": "Why?"}))], message_id="m"
    )
    task = Task(
        id="t", context_id="c", status=TaskStatus(state=TaskState.auth_required, message=question)
    )
    result = RemoteResult.from_task(task)
    assert (result.needs_input, result.question) == (True, "Why?")


def _card_with_key_header(header: str) -> AgentCard:
    scheme = SecurityScheme(root=APIKeySecurityScheme(in_=In.header, name=header))
    return make_card().model_copy(update={"security_schemes": {"key": scheme}})


async def test_an_api_key_goes_in_the_header_the_card_names() -> None:
    assert await ApiKey("s3cret").headers(_card_with_key_header("X-Team-Key")) == {
        "X-Team-Key": "s3cret"
    }
    assert await ApiKey("s3cret").headers(make_card()) == {"X-API-Key": "s3cret"}
    assert "s3cret" not in repr(ApiKey("s3cret"))


async def test_a_bearer_token_is_refreshed_through_its_callback() -> None:
    async def renew() -> str:
        return "new"

    bearer = Bearer("old", refresh=renew)
    assert await bearer.headers(make_card()) == {"Authorization": "Bearer old"}
    assert await bearer.refresh() is True
    assert await bearer.headers(make_card()) == {"Authorization": "Bearer new"}
    assert await Bearer("fixed").refresh() is False

"""Tasks belong to their caller, over real HTTP on 127.0.0.1 with two API keys.

Caller A (alice) creates tasks; caller B (bob) naming them gets exactly the answer a task
that does not exist gets (JSON-RPC -32001, the same message and data), for every method;
A can still do everything. With auth off every caller is the same (anonymous) one. Push
config answers never carry the token or URL credentials in clear.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.client.errors import A2AClientJSONRPCError
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCard, TaskIdParams, TaskQueryParams, TaskState

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill
from llamon_agent.a2a.ownership import OWNER_METADATA_KEY
from llamon_agent.a2a.server import create_app
from llamon_agent.core.hitl import HITLInterrupt
from tests._support.a2a_server import running_server, user_message
from tests._support.jsonrpc import assert_jsonrpc_reply, post, post_stream, request, text_message

KEY_A = "alice-key-3f9c1e7a5b2d4c60"
KEY_B = "bob-key-8d2a6f0c4e1b9735"
HOOK_TOKEN = "hook-token-5e7a9c1b3d"
HOOK_PASSWORD = "hook-pass-2c4e6a8b0d"
HOOK_URL = f"https://hook-user:{HOOK_PASSWORD}@93.184.215.14/a2a?x=1"
"""A public address never contacted: push configs are only set on finished tasks."""
MASKED_HOOK_URL = "https://***@93.184.215.14/a2a?x=1"
NOT_FOUND = -32001


@dataclass
class Served:
    url: str
    store: InMemoryTaskStore
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)


def _card(auth: AuthSpec | None) -> AgentCard:
    return build_agent_card(
        name="ownership-test-agent",
        description="Answers test questions for the llamon-agent ownership suite.",
        url="http://127.0.0.1:1/",
        version="1.0.0",
        skills=[skill("echo", "Echo", "Echoes one test question.", tags=["test"])],
        push_notifications=True,
        auth=auth,
    )


@asynccontextmanager
async def serve(*, auth: bool) -> AsyncIterator[Served]:
    gate, started = asyncio.Event(), asyncio.Event()

    async def agent(ctx: AgentContext) -> str | HITLInterrupt:
        if ctx.resumed:
            return f"resumed {ctx.text}"
        if ctx.text == "ask":
            return HITLInterrupt(payload={"question": "which one?"})
        if ctx.text == "wait":
            started.set()
            while not gate.is_set():  # a "working" tick until the test opens the gate
                await ctx.progress("still working")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(gate.wait(), 0.05)
            return "released"
        return f"echo {ctx.text}"

    card = _card(AuthSpec.api_key() if auth else None)
    config = AuthConfig.from_card(card, principals={"alice": KEY_A, "bob": KEY_B}) if auth else None
    store = InMemoryTaskStore()
    app = create_app(agent, card, auth=config, task_store=store)
    async with running_server(app) as url:
        yield Served(url, store, gate, started)
        gate.set()


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    async with serve(auth=True) as server:
        yield server


@asynccontextmanager
async def caller(key: str | None) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"X-API-Key": key} if key else {}
    async with httpx.AsyncClient(headers=headers, timeout=10.0) as http:
        yield http


async def call(http: httpx.AsyncClient, url: str, method: str, params: Any) -> dict[str, Any]:
    reply = await post(http, url, request(method, params, "same-id"))
    assert_jsonrpc_reply(reply, "same-id")
    return reply


async def new_task(http: httpx.AsyncClient, url: str, text: str, **changes: Any) -> dict[str, Any]:
    reply = await call(http, url, "message/send", {"message": text_message(text, **changes)})
    assert "result" in reply, reply
    task: dict[str, Any] = reply["result"]
    return task


def _wire(reply: dict[str, Any], task_id: str) -> str:
    """The reply as sent, with the task id it names replaced (error messages may echo it)."""
    return json.dumps(reply, sort_keys=True).replace(task_id, "<task id>")


def _methods(task_id: str, context_id: str) -> dict[str, Any]:
    """Every non-streaming method naming ``task_id``, with its params."""
    hook = {"url": HOOK_URL, "token": HOOK_TOKEN, "id": "hook-1"}
    return {
        "tasks/get": {"id": task_id},
        "tasks/cancel": {"id": task_id},
        "tasks/pushNotificationConfig/set": {"taskId": task_id, "pushNotificationConfig": hook},
        "tasks/pushNotificationConfig/get": {"id": task_id},
        "tasks/pushNotificationConfig/list": {"id": task_id},
        "tasks/pushNotificationConfig/delete": {
            "id": task_id,
            "pushNotificationConfigId": "hook-1",
        },
        "message/send": {"message": text_message("take it", taskId=task_id, contextId=context_id)},
    }


async def assert_answered_as_unknown(
    http: httpx.AsyncClient, url: str, method: str, params: Any, task_id: str
) -> None:
    """``method`` on ``task_id`` gets exactly the answer an unknown task id gets."""
    refused = await call(http, url, method, params)
    assert refused["error"]["code"] == NOT_FOUND, refused
    assert refused["error"]["data"]["errorCode"] == "NOT_FOUND", refused
    unknown_id = str(uuid.uuid4())
    unknown = await call(
        http, url, method, json.loads(json.dumps(params).replace(task_id, unknown_id))
    )
    assert _wire(refused, task_id) == _wire(unknown, unknown_id)


async def test_another_callers_task_answers_as_an_unknown_task(served: Served) -> None:
    async with caller(KEY_A) as alice, caller(KEY_B) as bob:
        paused = await new_task(alice, served.url, "ask")
        assert paused["status"]["state"] == "input-required"
        task_id, context_id = paused["id"], paused["contextId"]
        for method, params in _methods(task_id, context_id).items():
            await assert_answered_as_unknown(bob, served.url, method, params, task_id)
            # the next request (alice's) is answered, and bob changed nothing
            mine = await call(alice, served.url, "tasks/get", {"id": task_id})
            assert mine["result"]["status"]["state"] == "input-required", (method, mine)
        listed = await call(alice, served.url, "tasks/pushNotificationConfig/list", {"id": task_id})
        assert listed["result"] == []

        # alice can still do all of it: push configs, resume, and cancel another task
        for method in (
            "tasks/pushNotificationConfig/set",
            "tasks/pushNotificationConfig/get",
            "tasks/pushNotificationConfig/list",
        ):
            assert "result" in await call(alice, served.url, method, _methods(task_id, "")[method])
        deleted = await call(
            alice,
            served.url,
            "tasks/pushNotificationConfig/delete",
            _methods(task_id, "")["tasks/pushNotificationConfig/delete"],
        )
        assert deleted["result"] is None
        resumed = await call(
            alice, served.url, "message/send", _methods(task_id, context_id)["message/send"]
        )
        assert resumed["result"]["status"]["state"] == "completed", resumed
        other = await new_task(alice, served.url, "ask")
        canceled = await call(alice, served.url, "tasks/cancel", {"id": other["id"]})
        assert canceled["result"]["status"]["state"] == "canceled", canceled
        # bob's own tasks are his
        own = await new_task(bob, served.url, "hi")
        fetched = await call(bob, served.url, "tasks/get", {"id": own["id"]})
        assert fetched["result"]["status"]["state"] == "completed"
        await assert_answered_as_unknown(
            alice, served.url, "tasks/get", {"id": own["id"]}, own["id"]
        )


async def test_a_finished_task_of_another_caller_answers_as_unknown(served: Served) -> None:
    async with caller(KEY_A) as alice, caller(KEY_B) as bob:
        done = await new_task(alice, served.url, "hi")
        assert done["status"]["state"] == "completed"
        for method, params in _methods(done["id"], done["contextId"]).items():
            await assert_answered_as_unknown(bob, served.url, method, params, done["id"])
        mine = await call(alice, served.url, "tasks/get", {"id": done["id"]})
        assert mine["result"]["status"]["state"] == "completed"


async def test_another_callers_context_is_not_joined(served: Served) -> None:
    async with caller(KEY_A) as alice, caller(KEY_B) as bob:
        first = await new_task(alice, served.url, "hi")
        context_id = first["contextId"]
        for method in ("message/send", "message/stream"):
            params = {"message": text_message("join", contextId=context_id)}
            if method == "message/send":
                refused = await call(bob, served.url, method, params)
            else:
                events = await post_stream(bob, served.url, request(method, params, "same-id"))
                assert len(events) == 1, events
                refused = events[0]
            assert refused["error"]["code"] == NOT_FOUND, refused
            unknown = await call(bob, served.url, "tasks/get", {"id": str(uuid.uuid4())})
            assert refused["error"] == unknown["error"]
        # alice continues her context; bob starts his own
        second = await new_task(alice, served.url, "again", contextId=context_id)
        assert (second["contextId"], second["status"]["state"]) == (context_id, "completed")
        fresh = await new_task(bob, served.url, "mine")
        assert fresh["contextId"] != context_id


async def test_resubscribe_to_another_callers_task_answers_as_unknown(served: Served) -> None:
    async with caller(KEY_A) as alice, caller(KEY_B) as bob:
        params = {"message": text_message("wait"), "configuration": {"blocking": False}}
        running = (await call(alice, served.url, "message/send", params))["result"]
        await asyncio.wait_for(served.started.wait(), 10)
        task_id = running["id"]

        async with asyncio.timeout(10):  # a subscription to alice's events would hang here
            refused = await post_stream(
                bob, served.url, request("tasks/resubscribe", {"id": task_id}, "same-id")
            )
        unknown_id = str(uuid.uuid4())
        unknown = await post_stream(
            bob, served.url, request("tasks/resubscribe", {"id": unknown_id}, "same-id")
        )
        assert [event["error"]["code"] for event in refused] == [NOT_FOUND]
        assert _wire(refused[0], task_id) == _wire(unknown[0], unknown_id)
        await assert_answered_as_unknown(bob, served.url, "tasks/cancel", {"id": task_id}, task_id)

        # alice's resubscription gets the task's events; her first one opens the gate
        events: list[dict[str, Any]] = []
        body = request("tasks/resubscribe", {"id": task_id}, "same-id")
        async with asyncio.timeout(10), alice.stream("POST", served.url + "/", json=body) as sse:
            async for line in sse.aiter_lines():
                if line.startswith("data:"):
                    events.append(json.loads(line.removeprefix("data:")))
                    served.gate.set()
        assert events
        assert all("result" in event for event in events), events
        assert events[-1]["result"]["status"]["state"] == "completed", events[-1]
        final = await call(alice, served.url, "tasks/get", {"id": task_id})
        assert final["result"]["status"]["state"] == "completed", final


async def test_push_config_answers_mask_token_and_url_credentials(served: Served) -> None:
    async with caller(KEY_A) as alice:
        done = await new_task(alice, served.url, "hi")  # finished: nothing is ever POSTed
        methods = _methods(done["id"], done["contextId"])
        answers = [
            await call(alice, served.url, method, methods[method])
            for method in (
                "tasks/pushNotificationConfig/set",
                "tasks/pushNotificationConfig/get",
                "tasks/pushNotificationConfig/list",
            )
        ]
    set_, get, listed = (answer["result"] for answer in answers)
    for config in (set_, get, *listed):
        hook = config["pushNotificationConfig"]
        assert (hook["url"], hook["token"], hook["id"]) == (MASKED_HOOK_URL, "***", "hook-1")
    assert len(listed) == 1
    for answer in answers:
        wire = json.dumps(answer)
        assert HOOK_TOKEN not in wire
        assert HOOK_PASSWORD not in wire
        assert "hook-user" not in wire


async def test_the_owner_is_stored_opaque_and_never_answered(served: Served) -> None:
    async with caller(KEY_A) as alice:
        done = await new_task(alice, served.url, "hi")
        fetched = await call(alice, served.url, "tasks/get", {"id": done["id"]})
    for task in (done, fetched["result"]):
        assert OWNER_METADATA_KEY not in (task.get("metadata") or {}), task
    stored = await served.store.get(done["id"])
    assert stored is not None
    assert stored.metadata is not None
    stamp = stored.metadata[OWNER_METADATA_KEY]
    assert isinstance(stamp, str)
    assert len(stamp) == 32
    assert "alice" not in stamp
    assert KEY_A not in stamp


async def test_a2a_sdk_client_gets_not_found_for_another_callers_task(served: Served) -> None:
    card = AgentCard.model_validate(_card(AuthSpec.api_key()).model_dump()).model_copy(
        update={"url": served.url + "/"}
    )
    async with caller(KEY_A) as alice_http, caller(KEY_B) as bob_http:
        alice = ClientFactory(ClientConfig(httpx_client=alice_http)).create(card)
        bob = ClientFactory(ClientConfig(httpx_client=bob_http)).create(card)
        events = [event async for event in alice.send_message(user_message("ask"))]
        task = events[-1][0] if isinstance(events[-1], tuple) else None
        assert task is not None
        assert task.status.state == TaskState.input_required
        errors = []
        for task_id in (task.id, str(uuid.uuid4())):
            for attempt in (
                bob.get_task(TaskQueryParams(id=task_id)),
                bob.cancel_task(TaskIdParams(id=task_id)),
            ):
                with pytest.raises(A2AClientJSONRPCError) as caught:
                    await attempt
                errors.append(caught.value.error.model_dump())
        assert errors[0] == errors[2]
        assert errors[1] == errors[3]
        assert [error["code"] for error in errors] == [NOT_FOUND] * 4
        assert (await alice.get_task(TaskQueryParams(id=task.id))).id == task.id
        canceled = await alice.cancel_task(TaskIdParams(id=task.id))
        assert canceled.status.state == TaskState.canceled


async def test_without_auth_every_caller_is_the_same_one() -> None:
    async with serve(auth=False) as server, caller(None) as one, caller(None) as other:
        paused = await new_task(one, server.url, "ask")
        task_id, context_id = paused["id"], paused["contextId"]
        methods = _methods(task_id, context_id)
        fetched = await call(other, server.url, "tasks/get", methods["tasks/get"])
        assert fetched["result"]["id"] == task_id
        assert OWNER_METADATA_KEY not in (fetched["result"].get("metadata") or {})
        for method in (
            "tasks/pushNotificationConfig/set",
            "tasks/pushNotificationConfig/get",
            "tasks/pushNotificationConfig/list",
            "tasks/pushNotificationConfig/delete",
        ):
            assert "result" in await call(other, server.url, method, methods[method]), method
        joined = await new_task(other, server.url, "hi", contextId=context_id)
        assert joined["contextId"] == context_id
        resumed = await call(other, server.url, "message/send", methods["message/send"])
        assert resumed["result"]["status"]["state"] == "completed"
        stored = await server.store.get(task_id)
        assert stored is not None
        assert OWNER_METADATA_KEY not in (stored.metadata or {})


def test_principals_name_several_callers_each_with_its_own_keys() -> None:
    config = AuthConfig.api_key("shared", principals={"alice": KEY_A, "bob": [KEY_B, "bob-2"]})
    assert [config.principal(key) for key in ("shared", KEY_A, KEY_B, "bob-2", "nope", None)] == [
        "",
        "alice",
        "bob",
        "bob",
        None,
        None,
    ]
    assert config.accepts(KEY_A)
    assert not config.accepts("nope")
    assert KEY_A not in repr(config)
    assert "alice" not in repr(config)
    assert AuthConfig.bearer(principals={"svc": "t1"}).principal("t1") == "svc"
    with pytest.raises(ValueError, match="each secret must belong to one caller"):
        AuthConfig.api_key(principals={"alice": "same", "bob": "same"})
    with pytest.raises(ValueError, match="non-empty name"):
        AuthConfig.api_key(principals={" ": "k"})
    with pytest.raises(ValueError, match="caller 'bob' needs at least one"):
        AuthConfig.api_key(principals={"alice": "k", "bob": []})
    with pytest.raises(ValueError, match="at least one non-empty"):
        AuthConfig.api_key()


async def test_the_several_callers_example_serves_each_caller_its_own_tasks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doc = (Path(__file__).parents[3] / "docs" / "auth-and-push.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", doc, re.DOTALL) if "principals" in b]
    keys = {"FRONTEND_KEY": "f-1", "REPORTING_KEY": "r-1", "REPORTING_KEY_NEXT": "r-2"}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)

    async def agent(ctx: AgentContext) -> str:
        return f"echo {ctx.text}"

    namespace: dict[str, Any] = {"agent": agent}
    exec(compile(block, "auth-and-push.md", "exec"), namespace)  # noqa: S102 -- our own docs
    async with (
        running_server(namespace["app"]) as url,
        caller("f-1") as frontend,
        caller("r-1") as reporting,
        caller("r-2") as reporting_next,
    ):
        task = await new_task(frontend, url, "hi")
        await assert_answered_as_unknown(
            reporting, url, "tasks/get", {"id": task["id"]}, task["id"]
        )
        own = await new_task(reporting, url, "report")
        fetched = await call(reporting_next, url, "tasks/get", {"id": own["id"]})
        assert fetched["result"]["status"]["state"] == "completed"

"""One INFO line on ``llamon_agent.a2a`` per task end, in-process (no handler installed by
the library): its fields exactly, for a completed, a failed and an input-required task; no
secret in any of them; and the failed task's failure in the app's failure store."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores.failures import FailureQuery, FailureStore
from llamon_agent.core.hitl import HITLInterrupt
from tests._support.a2a_server import (
    a2a_client,
    error_data,
    make_card,
    running_server,
    send,
    user_message,
)

SECRET = "sk-proj-9fA7bC3dE5fG7hJ9kL1mN3pQ5rS7tU9v"


async def agent(ctx: Any) -> str | HITLInterrupt:
    if ctx.text == "boom":
        raise RuntimeError(f"the bank said no, token={SECRET}")
    if ctx.text == "ask":
        return HITLInterrupt(payload={"question": "Which account?"})
    return "ok"


def _ends(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [
        dict(getattr(record, "llamon_fields"))  # noqa: B009 - set through extra=
        for record in caplog.records
        if record.name == "llamon_agent.a2a" and record.getMessage().startswith("task ")
    ]


async def test_each_task_end_is_one_line_with_its_fields(caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(agent, make_card())
    store = app.state.llamon_failure_store
    assert isinstance(store, FailureStore)
    with caplog.at_level(logging.INFO, logger="llamon_agent.a2a"):
        async with running_server(app) as url, a2a_client(url) as client:
            done = await send(client, user_message("hi"))
            failed = await send(client, user_message("boom"))
            asked = await send(client, user_message("ask"))
    data = error_data(failed)
    ends = _ends(caplog)
    durations = [end.pop("durationMs") for end in ends]
    assert all(isinstance(ms, float) and ms >= 0 for ms in durations)
    blank = {"errorCode": None, "reason": None, "stage": None, "incidentId": None}
    assert ends == [
        {"event": "task_end", "taskId": done.id, "state": "completed", **blank},
        {
            "event": "task_end",
            "taskId": failed.id,
            "state": "failed",
            "errorCode": "INTERNAL_ERROR",
            "reason": data["errorReason"],
            "stage": "service",
            "incidentId": data["incidentId"],
        },
        {"event": "task_end", "taskId": asked.id, "state": "input-required", **blank},
    ]
    messages = [r.getMessage() for r in caplog.records if r.name == "llamon_agent.a2a"]
    assert messages[1] == (
        f"task {failed.id} failed in {durations[1]} ms errorCode=INTERNAL_ERROR"
        f" reason={data['errorReason']} stage=service incidentId={data['incidentId']}"
    )
    assert SECRET not in caplog.text
    assert not any("token" in message for message in messages)  # no text of the exception

    await store.flush()
    (row,) = (await store.query(FailureQuery())).rows
    assert (row.task_id, row.context_id, row.agent, row.incident_id) == (
        failed.id,
        failed.context_id,
        "test-agent",
        data["incidentId"],
    )
    assert SECRET not in repr(row.to_dict())


async def test_no_line_when_info_is_off(caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(agent, make_card())
    with caplog.at_level(logging.WARNING, logger="llamon_agent.a2a"):
        async with running_server(app) as url, a2a_client(url) as client:
            await send(client, user_message("boom"))
    assert _ends(caplog) == []
    store = app.state.llamon_failure_store
    await store.flush()
    assert len((await store.query()).rows) == 1  # still stored

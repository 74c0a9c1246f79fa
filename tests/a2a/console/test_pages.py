"""The console over HTTP, against a real served agent (uvicorn on 127.0.0.1): sign-in
rules, what pages show (escaped), bad parameters, unknown tasks, security headers, and
the agent still answering after each refusal."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest

from llamon_agent.a2a.auth import AuthConfig
from llamon_agent.a2a.console import ConsoleOptions
from llamon_agent.a2a.console.session import COOKIE_NAME
from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores.failures import FailureStore, StoredFailure
from llamon_agent.a2a.stores.task_events import MemoryTaskEventStore
from llamon_agent.core.events import RunnerEvent
from tests._support.a2a_server import running_server
from tests._support.console import (
    KEY,
    PARTIAL_TEXT,
    RATE_ACTION,
    TIMEOUT_ACTION,
    ConsoleTestAgent,
    ask,
    console_app,
    console_card,
    still_answers,
)

HTML = {"accept": "text/html"}


@dataclass
class Served:
    url: str
    agent: ConsoleTestAgent
    events: MemoryTaskEventStore


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    agent = ConsoleTestAgent()
    events = MemoryTaskEventStore()
    app = console_app(agent, console=ConsoleOptions(events=events))
    async with running_server(app) as url:
        yield Served(url, agent, events)


def _client(url: str, **kwargs: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=10.0, follow_redirects=False, **kwargs)  # type: ignore[arg-type]


@asynccontextmanager
async def _signed_in(url: str, key: str = KEY) -> AsyncIterator[httpx.AsyncClient]:
    async with _client(url) as client:
        answer = await client.post("/console/login", data={"credential": key, "next": "/console"})
        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == "/console"
        yield client


async def test_a_browser_without_a_session_is_sent_to_sign_in(served: Served) -> None:
    async with _client(served.url) as client:
        answer = await client.get("/console/failures?code=RATE_LIMITED", headers=HTML)
        assert answer.status_code == 303
        assert answer.headers["location"] == (
            "/console/login?next=%2Fconsole%2Ffailures%3Fcode%3DRATE_LIMITED"
        )
        plain = await client.get("/console/failures")
        assert (plain.status_code, plain.text) == (401, "sign in to the console")
        htmx = await client.get("/console/live", headers={"HX-Request": "true"})
        assert htmx.status_code == 401
        assert htmx.headers["hx-redirect"].startswith("/console/login?next=")
    await still_answers(served.url)


async def test_a_wrong_key_gets_the_form_again_never_echoed(served: Served) -> None:
    wrong = "not-the-key-<b>zz9</b>"
    async with _client(served.url) as client:
        answer = await client.post("/console/login", data={"credential": wrong})
        assert answer.status_code == 401
        assert "That key or token was not accepted." in answer.text
        assert "zz9" not in answer.text
        assert COOKIE_NAME not in answer.headers.get("set-cookie", "")
        assert (await client.get("/console", headers=HTML)).status_code == 303
    await still_answers(served.url)


async def test_the_right_key_signs_in_with_a_strict_cookie_holding_no_secret(
    served: Served,
) -> None:
    async with _client(served.url) as client:
        answer = await client.post(
            "/console/login", data={"credential": KEY, "next": "/console/failures"}
        )
        assert answer.status_code == 303
        assert answer.headers["location"] == "/console/failures"
        cookie = answer.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE_NAME}=v1.")
        for attribute in ("HttpOnly", "Path=/console", "SameSite=strict", "Max-Age=28800"):
            assert attribute.lower() in cookie.lower(), cookie
        assert "secure" not in cookie.lower()  # plain http on loopback
        assert KEY not in cookie
        page = await client.get("/console/failures")
        assert page.status_code == 200
        assert "<h1>Failures</h1>" in page.text
        out = await client.post("/console/logout")
        assert out.status_code == 303
        assert 'llamon_console=""' in out.headers["set-cookie"]
        client.cookies.clear()
        assert (await client.get("/console", headers=HTML)).status_code == 303


async def test_an_offsite_next_is_ignored(served: Served) -> None:
    async with _client(served.url) as client:
        for target in ("https://evil.example/", "//evil.example", "/console/../x", "/other"):
            answer = await client.post("/console/login", data={"credential": KEY, "next": target})
            assert answer.headers["location"] == "/console", target


async def test_a_tampered_or_foreign_cookie_is_refused(served: Served) -> None:
    async with _signed_in(served.url) as client:
        value = client.cookies[COOKIE_NAME]
        version, expiry, tag, signature = value.split(".")
        later = f"{version}.{int(expiry) + 3600}.{tag}.{signature}"
        other_tag = f"{version}.{expiry}.{'A' * len(tag)}.{signature}"
        for forged in (later, other_tag, value[:-2], "v1.9999999999.x.y"):
            client.cookies.set(COOKIE_NAME, forged, path="/console")
            answer = await client.get("/console", headers=HTML)
            assert answer.status_code == 303, forged
    # a cookie from another console (another secret) is not accepted either
    other = console_app(ConsoleTestAgent(), console=ConsoleOptions(secret=b"another secret"))
    async with (
        running_server(other) as other_url,
        _signed_in(other_url) as foreign,
        _client(served.url) as client,
    ):
        client.cookies.set(COOKIE_NAME, foreign.cookies[COOKIE_NAME], path="/console")
        assert (await client.get("/console", headers=HTML)).status_code == 303
    await still_answers(served.url)


async def test_a_shared_secret_lets_another_replica_read_the_session() -> None:
    secret = b"one secret for every replica"
    first = console_app(ConsoleTestAgent(), console=ConsoleOptions(secret=secret))
    second = console_app(ConsoleTestAgent(), console=ConsoleOptions(secret=secret))
    async with (
        running_server(first) as one,
        running_server(second) as two,
        _signed_in(one) as signed,
        _client(two) as client,
    ):
        client.cookies.set(COOKIE_NAME, signed.cookies[COOKIE_NAME], path="/console")
        assert (await client.get("/console", headers=HTML)).status_code == 200


async def test_the_agents_header_works_for_scripts(served: Served) -> None:
    async with _client(served.url) as client:
        answer = await client.get("/console/failures", headers={"X-API-Key": KEY})
        assert answer.status_code == 200
        bad = await client.get("/console/failures", headers={"X-API-Key": "wrong"})
        assert bad.status_code == 401
        # the A2A endpoint still asks for the key: the console's rule is for /console only
        rpc = await client.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "tasks/get"})
        assert rpc.status_code == 401
    await still_answers(served.url)


async def test_with_named_callers_only_operators_sign_in() -> None:
    auth = AuthConfig.api_key(KEY, principals={"ops": "ops-key-1", "billing": "billing-key-2"})
    app = console_app(ConsoleTestAgent(), auth=auth, console=ConsoleOptions(operators=["ops"]))
    async with running_server(app) as url, _client(url) as client:
        refused = await client.post("/console/login", data={"credential": "billing-key-2"})
        assert refused.status_code == 401
        assert "not accepted" in refused.text
        header = await client.get("/console", headers={"X-API-Key": "billing-key-2"})
        assert header.status_code == 401
        assert (await client.get("/console", headers={"X-API-Key": "ops-key-1"})).status_code == 200
        assert (await client.get("/console", headers={"X-API-Key": KEY})).status_code == 200
        signed = await client.post("/console/login", data={"credential": "ops-key-1"})
        assert signed.status_code == 303
        # billing is still an A2A caller
        await still_answers(url, "billing-key-2")


def test_an_operator_the_auth_does_not_know_is_refused_at_build() -> None:
    auth = AuthConfig.api_key(KEY, principals={"ops": "ops-key-1"})
    with pytest.raises(ValueError, match=r"operators \['nobody'\] are not callers"):
        console_app(ConsoleTestAgent(), auth=auth, console=ConsoleOptions(operators=["nobody"]))


async def test_pages_show_a_real_failure_escaped_with_events_and_trace(served: Served) -> None:
    failed = await ask(served.url, "partial")
    await ask(served.url, "quota")
    hostile = "<script>alert('x')</script>"
    await served.events.add(
        [
            RunnerEvent(
                type="task.working",
                stage="a2a_serve",
                task_id=failed.id,
                trace_metadata={"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"},
            ),
            RunnerEvent(
                type="remote.note", stage="a2a_call", task_id=failed.id, extra={"note": hostile}
            ),
        ]
    )
    async with _signed_in(served.url) as client:
        page = (await client.get(f"/console/tasks/{failed.id}")).text
        assert PARTIAL_TEXT in page
        assert re.search(r"<th>errorCode</th><td[^>]*>UPSTREAM_TIMEOUT</td>", page)
        assert re.search(r"<th>errorReason</th><td[^>]*>timeout</td>", page)
        assert TIMEOUT_ACTION in page
        assert 'id="trace-id">4bf92f3577b34da6a3ce929d0e0e4736<' in page
        assert "<script>alert" not in page
        assert "&#34;note&#34;: &#34;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&#34;" in page
        failures = (await client.get("/console/failures")).text
        assert f'href="/console/tasks/{failed.id}"' in failures
        assert TIMEOUT_ACTION in failures
        assert RATE_ACTION in failures
        only = await client.get("/console/failures?code=RATE_LIMITED&since=1h")
        rows = re.findall(r'<tr data-task-id="[^"]+" data-code="([A-Z_]+)"', only.text)
        assert rows == ["RATE_LIMITED"]
        partial = await client.get(
            "/console/failures?code=RATE_LIMITED", headers={"HX-Request": "true"}
        )
        assert partial.text.startswith('<div id="failures-body"')
        assert "<html" not in partial.text
    await still_answers(served.url)


async def test_without_an_event_store_the_page_shows_this_process_events() -> None:
    app = console_app(ConsoleTestAgent(), console=ConsoleOptions())  # a bus, no store
    async with running_server(app) as url:
        task = await ask(url, "quota")
        async with _signed_in(url) as client:
            page = (await client.get(f"/console/tasks/{task.id}")).text
            assert 'data-type="task.failed"' in page
            assert 'id="trace-id">-<' in page


async def test_without_events_the_page_says_none_are_kept() -> None:
    app = create_app(
        ConsoleTestAgent(),
        console_card(),
        auth=AuthConfig.api_key(KEY),
        console=ConsoleOptions(),
        gc_freeze=False,
    )
    async with running_server(app) as url:
        task = await ask(url, "quota")
        async with _signed_in(url) as client:
            page = (await client.get(f"/console/tasks/{task.id}")).text
            assert "No events are kept by this server" in page
            assert re.search(r"<th>errorCode</th><td[^>]*>RATE_LIMITED</td>", page)


@pytest.mark.parametrize(
    ("query", "parameter", "message"),
    [
        ("code=NOPE", "code", "code: unknown errorCode &#39;NOPE&#39;"),
        ("since=yesterday", "since", "since &#39;yesterday&#39; is neither a duration"),
        ("until=soon", "until", "until &#39;soon&#39; is neither a duration"),
        ("since=1h&until=2h", "until", "until: must be after since"),
    ],
)
async def test_a_bad_parameter_is_a_400_page_naming_it(
    served: Served, query: str, parameter: str, message: str
) -> None:
    async with _signed_in(served.url) as client:
        answer = await client.get(f"/console/failures?{query}")
        assert answer.status_code == 400
        assert f'data-parameter="{parameter}"' in answer.text
        assert message in answer.text
    await still_answers(served.url)


async def test_an_unknown_task_is_a_404_page(served: Served) -> None:
    async with _signed_in(served.url) as client:
        answer = await client.get("/console/tasks/no-such-task")
        assert answer.status_code == 404
        assert "No task with this id is kept in this store." in answer.text
    await still_answers(served.url)


async def test_every_answer_carries_the_security_headers(served: Served) -> None:
    async with _signed_in(served.url) as client:
        for path in ("/console", "/console/failures", "/console/login", "/console/tasks/x"):
            answer = await client.get(path)
            headers = answer.headers
            assert headers["x-frame-options"] == "DENY", path
            assert headers["referrer-policy"] == "no-referrer"
            assert "script-src 'self'" in headers["content-security-policy"]
            assert "frame-ancestors 'none'" in headers["content-security-policy"]
            assert headers["cache-control"] == "no-store"
        script = await client.get("/console/static/htmx.min.js")
        assert script.status_code == 200
        assert script.headers["cache-control"] == "public, max-age=86400"
        assert script.headers["content-type"].startswith("text/javascript")
        again = await client.get(
            "/console/static/htmx.min.js", headers={"If-None-Match": script.headers["etag"]}
        )
        assert again.status_code == 304
        assert (await client.get("/console/static/secrets.txt")).status_code == 404
        page = (await client.get("/console")).text
        assert "<script>" not in page  # no inline script: htmx is configured by a meta tag
        assert 'src="/console/static/htmx.min.js"' in page


async def test_a_failure_holding_markup_is_shown_as_text() -> None:
    app = console_app(ConsoleTestAgent())
    store: FailureStore = app.state.llamon_failure_store
    hostile = "<img src=x onerror=alert(1)>"
    store.record(
        StoredFailure(
            task_id="t-<b>1</b>",
            time=datetime.now(UTC),
            error_code="UPSTREAM_UNAVAILABLE",
            stage="execute",
            reason=f"odd{hostile}",
            message=hostile,
            operator_action=hostile,
            retryable=False,
            agent=hostile,
            tool=hostile,
        )
    )
    await store.flush()
    async with running_server(app) as url, _signed_in(url) as client:
        page = (await client.get("/console/failures")).text
        assert "<img" not in page
        assert "<b>1</b>" not in page
        assert "&lt;img src=x onerror=alert(1)&gt;" in page
        assert 'href="/console/tasks/t-%3Cb%3E1%3C/b%3E"' in page
        await still_answers(url)


class _BrokenEvents(MemoryTaskEventStore):
    """A task event store whose reads fail with ``error``."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def for_task(self, task_id: str, *, limit: int = 1000) -> list[RunnerEvent]:
        raise self.error


@pytest.mark.parametrize(
    ("error", "status", "shown"),
    [
        (ConnectionRefusedError(111, "refused by db.internal:5432"), 503, "UPSTREAM_UNAVAILABLE"),
        (RuntimeError("boom at postgres://ops:hunter2@db.internal/x"), 500, "INTERNAL_ERROR"),
    ],
)
async def test_a_store_that_fails_gives_a_page_naming_the_failure_never_its_text(
    error: Exception, status: int, shown: str
) -> None:
    agent = ConsoleTestAgent()
    app = console_app(agent, console=ConsoleOptions(events=_BrokenEvents(error)))
    async with running_server(app) as url:
        failed = await ask(url, "quota")
        async with _signed_in(url) as client:
            page = await client.get(f"/console/tasks/{failed.id}")
            assert page.status_code == status
            assert shown in page.text
            for secret in ("hunter2", "db.internal", "5432", "boom"):
                assert secret not in page.text
            if status == 500:
                assert re.search(r"incident [0-9a-f]{12}", page.text)
            assert page.headers["cache-control"] == "no-store"
            following = await client.get("/console/failures")
            assert following.status_code == 200  # the next page is answered
        await still_answers(url)

"""Webhook URLs that could reach inside are refused when set and again at delivery.

Refusals are checked without sending anything: the set-time check needs no network, and
names are resolved by a resolver the test supplies (``hook.example`` is never looked up
in DNS). The only receiver is this test's own app on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.push import BackgroundPushSender
from llamon_agent.a2a.push_policy import PushPolicy, PushUrlRefused, address_rule
from llamon_agent.a2a.server import create_app
from llamon_agent.core.settings import PUSH_ALLOW_ENV, push_allow_setting
from tests._support.a2a_server import make_card, running_server
from tests._support.jsonrpc import post, post_stream, request, text_message

WAIT_SECONDS = 10.0
SECRET = "UrlPass-77"

REFUSED: list[tuple[str, str | None]] = [
    ("http://127.0.0.1/hook", "loopback"),
    ("http://127.1/hook", "loopback"),
    ("http://2130706433/hook", "loopback"),
    ("http://0x7f.1/hook", "loopback"),
    ("http://0177.0.0.1/hook", None),  # httpx refuses to parse it
    ("http://0x7f000001/hook", "loopback"),
    ("http://127.0.0.1./hook", "loopback"),
    ("http://localhost:8080/hook", "loopback"),
    ("http://api.localhost/hook", "loopback"),
    ("http://[::1]/hook", "loopback"),
    ("http://[::ffff:127.0.0.1]/hook", "loopback"),
    ("http://[::ffff:7f00:1]/hook", "loopback"),
    ("http://[2002:7f00:1::]/hook", "loopback"),
    ("http://[64:ff9b::a9fe:a9fe]/hook", "link-local"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[fe80::1]/hook", "link-local"),
    ("http://[::ffff:169.254.169.254]/hook", "link-local"),
    ("http://10.0.0.7/hook", "private"),
    ("http://10.1.2.3:8443/hook", "private"),
    ("http://172.16.0.1/hook", "private"),
    ("http://192.168.1.1/hook", "private"),
    ("http://[fd00::1]/hook", "private"),
    ("http://224.0.0.1/hook", "multicast"),
    ("http://[ff02::1]/hook", "multicast"),
    ("http://0.0.0.0/hook", "unspecified"),
    ("http://[::]/hook", "unspecified"),
    ("http://100.64.0.1/hook", "reserved"),
    ("http://240.0.0.1/hook", "reserved"),
    ("http://255.255.255.255/hook", "reserved"),
]
BAD_SCHEMES = [
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_INFO",
    "ftp://files.example.com/x",
    "dict://hook.example:11211/",
    "javascript:alert(1)",
]


@pytest.mark.parametrize(("url", "rule"), REFUSED, ids=[u for u, _ in REFUSED])
def test_internal_addresses_are_refused_in_every_spelling(url: str, rule: str | None) -> None:
    with pytest.raises(PushUrlRefused) as refused:
        PushPolicy().check_url(url)
    expected = f"it points to a {rule} address, which webhooks may not reach"
    assert refused.value.rule == (expected if rule else "it is not a valid URL")


@pytest.mark.parametrize("url", BAD_SCHEMES)
def test_only_http_and_https_are_accepted(url: str) -> None:
    with pytest.raises(PushUrlRefused) as refused:
        PushPolicy().check_url(url)
    assert refused.value.rule == "its scheme must be http or https"


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/a2a",
        "http://hook.example:8080/x?y=1",
        "https://8.8.8.8/hook",
        "https://[2606:4700:4700::1111]/hook",
    ],
)
def test_public_addresses_and_names_pass_the_set_time_check(url: str) -> None:
    assert str(PushPolicy().check_url(url)) == url


def test_the_allow_list_lets_named_networks_in_and_nothing_else() -> None:
    policy = PushPolicy(allow=["127.0.0.1/32", "10.1.0.0/16"])
    for url in (
        "http://127.0.0.1:9/h",
        "http://[::ffff:127.0.0.1]/h",
        "http://10.1.200.3/h",
        "http://localhost/h",
    ):
        policy.check_url(url)
    for url in ("http://127.0.0.2/h", "http://10.2.0.1/h", "http://169.254.169.254/"):
        with pytest.raises(PushUrlRefused):
            policy.check_url(url)
    with pytest.raises(PushUrlRefused):
        policy.check_url("gopher://127.0.0.1/")  # the scheme rule still holds
    with pytest.raises(ValueError, match=r"'10\.1/x' is not a network"):
        PushPolicy(allow=["10.1/x"])


def test_the_allow_list_env_var_is_split_on_commas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PUSH_ALLOW_ENV, " 127.0.0.1/32, ,10.1.0.0/16 ")
    assert push_allow_setting() == ("127.0.0.1/32", "10.1.0.0/16")
    monkeypatch.delenv(PUSH_ALLOW_ENV)
    assert push_allow_setting() == ()


def test_every_address_kind_has_its_rule() -> None:
    assert address_rule(ipaddress.ip_address("93.184.216.34")) is None
    assert address_rule(ipaddress.ip_address("::ffff:10.0.0.1")) == "private"
    assert address_rule(ipaddress.ip_address("2001:0:4136:e378:8000:63bf:80ff:fffe")) == (
        "loopback"  # Teredo carrying 127.0.0.1
    )


def fixed_resolver(answers: dict[str, Sequence[str]]) -> Any:
    async def resolve(host: str, port: int) -> Sequence[str]:
        if host not in answers:
            raise OSError("no such name")
        return answers[host]

    return resolve


@pytest.mark.parametrize(
    ("answers", "rule"),
    [
        (["127.0.0.1"], "it points to a loopback address, which webhooks may not reach"),
        (["169.254.169.254"], "it points to a link-local address, which webhooks may not reach"),
        (
            ["93.184.216.34", "10.0.0.7"],
            "it points to a private address, which webhooks may not reach",
        ),
        (["::ffff:127.0.0.1"], "it points to a loopback address, which webhooks may not reach"),
        ([], "its host name does not resolve"),
    ],
)
async def test_a_name_resolving_inside_is_refused_at_delivery(
    answers: list[str], rule: str
) -> None:
    policy = PushPolicy(resolver=fixed_resolver({"hook.example": answers}))
    policy.check_url("http://hook.example/h")  # the name alone passes when set
    with pytest.raises(PushUrlRefused) as refused:
        await policy.resolve("http://hook.example/h")
    assert refused.value.rule == rule


async def test_a_public_resolution_is_pinned_to_the_checked_address() -> None:
    policy = PushPolicy(resolver=fixed_resolver({"hook.example": ["93.184.216.34"]}))
    target = await policy.resolve(f"https://u:{SECRET}@hook.example:8443/h?x=1")
    assert target.address == "93.184.216.34"
    assert str(target.pinned_url()) == f"https://u:{SECRET}@93.184.216.34:8443/h?x=1"
    assert target.host_header() == "hook.example:8443"
    with pytest.raises(PushUrlRefused, match="does not resolve"):
        await policy.resolve("https://elsewhere.example/h")


# --------------------------------------------------------------------------- on the wire


async def echo(ctx: AgentContext) -> str:
    return f"echo {ctx.text}"


@pytest.fixture
async def agent_url() -> AsyncIterator[str]:
    async with running_server(create_app(echo, make_card(push=True))) as url:
        yield url


def assert_refused(reply: dict[str, Any], rule: str) -> None:
    error = reply["error"]
    assert error["code"] == -32602
    assert error["data"]["errorCode"] == "INVALID_INPUT"
    assert error["data"]["errorReason"] == "push_url_refused"
    assert error["message"] == f"Invalid parameters: pushNotificationConfig.url is refused: {rule}."
    assert SECRET not in str(reply)
    assert "169.254" not in str(reply)
    assert "10.0.0.7" not in str(reply)


LINK_LOCAL = "it points to a link-local address, which webhooks may not reach"


async def test_set_refuses_an_internal_url_without_echoing_it(agent_url: str) -> None:
    async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
        sent = await post(http, agent_url, request("message/send", {"message": text_message()}))
        task_id = sent["result"]["id"]
        hook = {"url": f"http://admin:{SECRET}@169.254.169.254/latest", "token": "t"}
        reply = await post(
            http,
            agent_url,
            request(
                "tasks/pushNotificationConfig/set",
                {"taskId": task_id, "pushNotificationConfig": hook},
                2,
            ),
        )
        assert_refused(reply, LINK_LOCAL)
        listed = await post(
            http, agent_url, request("tasks/pushNotificationConfig/list", {"id": task_id}, 3)
        )
        assert listed["result"] == []
        scheme = await post(
            http,
            agent_url,
            request(
                "tasks/pushNotificationConfig/set",
                {"taskId": task_id, "pushNotificationConfig": {"url": "gopher://x.example/"}},
                4,
            ),
        )
        assert_refused(scheme, "its scheme must be http or https")
        again = await post(http, agent_url, request("tasks/get", {"id": task_id}, 5))
    assert again["result"]["status"]["state"] == "completed"


@pytest.mark.parametrize("method", ["message/send", "message/stream"])
async def test_a_message_with_an_internal_webhook_is_refused_before_it_runs(
    agent_url: str, method: str
) -> None:
    params = {
        "message": text_message(),
        "configuration": {
            "pushNotificationConfig": {"url": f"http://u:{SECRET}@10.0.0.7:8080/h", "token": "t"}
        },
    }
    async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
        if method == "message/send":
            reply = await post(http, agent_url, request(method, params))
        else:
            events = await post_stream(http, agent_url, request(method, params))
            assert len(events) == 1
            reply = events[0]
        after = await post(http, agent_url, request("message/send", {"message": text_message()}))
    assert_refused(reply, "it points to a private address, which webhooks may not reach")
    assert after["result"]["status"]["state"] == "completed"


class Hook:
    """A webhook on 127.0.0.1 recording each POST's Host header."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self.changed = asyncio.Condition()
        self.app = Starlette(routes=[Route("/h", self._hook, methods=["POST"])])

    async def _hook(self, request: Request) -> Response:
        self.hosts.append(request.headers["host"])
        async with self.changed:
            self.changed.notify_all()
        return Response(status_code=204)


@contextmanager
def dropped_lines() -> Iterator[tuple[list[str], asyncio.Event]]:
    lines: list[str] = []
    seen = asyncio.Event()

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())
            seen.set()

    handler = Lines()
    logger = logging.getLogger("llamon_agent.a2a.push")
    logger.addHandler(handler)
    try:
        yield lines, seen
    finally:
        logger.removeHandler(handler)


async def test_a_name_that_resolves_to_loopback_is_refused_at_delivery() -> None:
    """The name passes when set; the delivery resolves it to 127.0.0.1 and refuses."""
    hook = Hook()
    policy = PushPolicy(resolver=fixed_resolver({"hook.example": ["127.0.0.1"]}))
    app = create_app(echo, make_card(push=True), push_policy=policy)
    with dropped_lines() as (lines, seen):
        async with running_server(hook.app) as base, running_server(app) as url:
            port = base.rsplit(":", 1)[1]
            params = {
                "message": text_message(),
                "configuration": {
                    "pushNotificationConfig": {
                        "url": f"http://u:{SECRET}@hook.example:{port}/h",
                        "token": "tok-9",
                    }
                },
            }
            async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
                sent = await post(http, url, request("message/send", params))
                await asyncio.wait_for(seen.wait(), WAIT_SECONDS)
                after = await post(http, url, request("message/send", {"message": text_message()}))
    task_id = sent["result"]["id"]
    assert sent["result"]["status"]["state"] == "completed"
    assert after["result"]["status"]["state"] == "completed"
    assert hook.hosts == []
    assert lines[0] == (
        f"push notification for task {task_id} dropped: webhook URL refused: it points to "
        "a loopback address, which webhooks may not reach"
    )
    assert all(SECRET not in line and "hook.example" not in line for line in lines)
    sender = app.state.llamon_push_sender
    assert isinstance(sender, BackgroundPushSender)
    assert sender.stats.delivered == 0


async def test_an_allowed_name_is_delivered_to_the_address_that_was_checked() -> None:
    """``hook.example`` exists only in the test's resolver: the POST reaching the
    receiver went to the checked address, with the name in its Host header."""
    hook = Hook()
    policy = PushPolicy(
        allow=["127.0.0.1/32"], resolver=fixed_resolver({"hook.example": ["127.0.0.1"]})
    )
    app = create_app(echo, make_card(push=True), push_policy=policy)
    async with running_server(hook.app) as base, running_server(app) as url:
        port = base.rsplit(":", 1)[1]
        params = {
            "message": text_message(),
            "configuration": {"pushNotificationConfig": {"url": f"http://hook.example:{port}/h"}},
        }
        async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
            sent = await post(http, url, request("message/send", params))
        async with hook.changed:
            await asyncio.wait_for(hook.changed.wait_for(lambda: bool(hook.hosts)), WAIT_SECONDS)
    assert sent["result"]["status"]["state"] == "completed"
    assert hook.hosts[0] == f"hook.example:{port}"


def test_llamon_serve_refuses_a_push_allow_entry_that_is_not_a_network() -> None:
    from typer.testing import CliRunner

    from llamon_agent.cli import app

    result = CliRunner().invoke(app, ["serve", "agent:agent", "--push-allow", "10.1/x"])
    assert result.exit_code == 2
    assert "--push-allow: push allow-list entry '10.1/x' is not a network" in result.output


def test_the_documented_allow_list_example_runs() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "auth-and-push.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    block = next(b for b in blocks if "PushPolicy(allow=" in b)
    namespace: dict[str, Any] = {"agent": echo, "card": make_card(push=True)}
    namespace["create_app"] = create_app
    exec(compile(block, "auth-and-push.md", "exec"), namespace)  # noqa: S102 -- our own docs
    sender = namespace["app"].state.llamon_push_sender
    assert isinstance(sender, BackgroundPushSender)
    assert sender.policy.allow == ("10.1.0.0/16", "127.0.0.1/32")
    sender.policy.check_url("http://10.1.2.3/h")


async def test_serve_agent_takes_the_push_policy_from_its_options() -> None:
    from llamon_agent.a2a.serve import ServeOptions, serve_agent

    hook = Hook()
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    shutdown = asyncio.Event()
    options = ServeOptions(
        port=0, store="memory", gc_freeze=False, push_policy=PushPolicy(allow=["127.0.0.1/32"])
    )
    async with running_server(hook.app) as base:
        server = asyncio.create_task(
            serve_agent(
                echo, make_card(push=True), options, on_ready=ready.set_result, shutdown=shutdown
            )
        )
        try:
            url = (await asyncio.wait_for(ready, WAIT_SECONDS)).rstrip("/")
            params = {
                "message": text_message(),
                "configuration": {"pushNotificationConfig": {"url": base + "/h"}},
            }
            async with httpx.AsyncClient(timeout=WAIT_SECONDS) as http:
                sent = await post(http, url, request("message/send", params))
            async with hook.changed:
                await asyncio.wait_for(
                    hook.changed.wait_for(lambda: bool(hook.hosts)), WAIT_SECONDS
                )
        finally:
            shutdown.set()
            await asyncio.wait_for(server, WAIT_SECONDS)
    assert sent["result"]["status"]["state"] == "completed"
    assert hook.hosts[0] == base.removeprefix("http://")

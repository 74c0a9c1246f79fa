"""The client side of the Agent Catalog end to end on 127.0.0.1: a real catalog service
(uvicorn, SQLite store), real llamon agents found through it, the catalog stopped while
callers keep calling from their cache, and ``llamon serve --publish-to`` as a real
process publishing its card and deprecating it on SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import AgentCard

from llamon_agent.a2a.agent import AgentContext
from llamon_agent.a2a.server import create_app
from llamon_agent.client import AgentClient, CatalogClient, clear_card_cache
from llamon_agent.client.retry import RetryPolicy
from llamon_agent.exceptions import (
    ConfigValidationError,
    RegistryNotFoundError,
    RegistryUnavailableError,
)
from tests._support.a2a_server import running_server
from tests._support.catalog_app import Catalog, agent_card, served_catalog, skill
from tests._support.catalog_stores import CATALOG_ENGINES
from tests._support.serve import llamon_serve, send_text

LOGGER = "llamon_agent.client.catalog"
LINE_TIMEOUT = 30.0


@dataclass
class Clock:
    """Wall-clock seconds the test moves by hand."""

    now: float = 2_000_000.0

    def __call__(self) -> float:
        return self.now


async def orders_v1(ctx: AgentContext) -> str:
    return f"v1 {ctx.text}"


async def orders_v2(ctx: AgentContext) -> str:
    return f"v2 {ctx.text}"


@pytest.fixture(autouse=True)
def _fresh_cards() -> None:
    clear_card_cache()


@pytest.fixture
async def catalog(tmp_path: Path) -> AsyncIterator[Catalog]:
    async with served_catalog(tmp_path / "catalog") as served:
        yield served


@pytest.fixture(params=CATALOG_ENGINES)
async def any_catalog(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Catalog]:
    """The catalog on SQLite, then on PostgreSQL."""
    async with served_catalog(tmp_path / "catalog", request.param) as served:
        yield served


def _client(catalog: Catalog, label: str, cache: Path, **kwargs: Any) -> CatalogClient:
    return CatalogClient(catalog.url, auth=catalog.keys[label], cache_dir=cache, **kwargs)


async def _publish(publisher: CatalogClient, version: str, url: str, *skills: str) -> None:
    card = agent_card("Orders", version, *(skill(s) for s in skills), url=url + "/")
    result = await publisher.publish(card)
    assert (result.entry.name, result.entry.version) == ("orders", version)


async def test_a_range_resolves_to_the_highest_matching_version(
    any_catalog: Catalog, tmp_path: Path
) -> None:
    catalog = any_catalog
    async with (
        _client(catalog, "orders-team", tmp_path / "p") as publisher,
        _client(catalog, "shop", tmp_path / "c") as caller,
    ):
        await _publish(publisher, "1.0.0", "http://127.0.0.1:1", "search")
        await _publish(publisher, "1.1.0", "http://127.0.0.1:1", "search", "refund")
        await _publish(publisher, "2.0.0", "http://127.0.0.1:2", "refund")
        await _publish(publisher, "2.1.0", "http://127.0.0.1:3", "refund", "track")
        assert (await caller.resolve_entry("orders", "^1")).version == "1.1.0"
        assert (await caller.resolve_entry("orders", "~2.0")).version == "2.0.0"
        card = await caller.resolve("orders", "^2")
        assert (card.version, card.url) == ("2.1.0", "http://127.0.0.1:3/")
        assert (await caller.resolve_entry("orders")).version == "2.1.0"
        assert (await caller.resolve_entry("orders", "1.0.0")).version == "1.0.0"
        await publisher.set_status("orders", "2.1.0", "deprecated")
        assert (await caller.resolve_entry("orders", "^2")).version == "2.0.0"
        listed = await caller.versions("orders", range="^2")
        assert [(e.version, e.status) for e in listed] == [
            ("2.1.0", "deprecated"),
            ("2.0.0", "active"),
        ]
        page = await caller.search(skill="refund")
        assert [(e.name, e.version) for e in page.agents] == [("orders", "2.0.0")]


@pytest.mark.reason("agent_not_found")
async def test_an_agent_the_key_may_not_see_is_not_found(catalog: Catalog, tmp_path: Path) -> None:
    async with (
        _client(catalog, "orders-team", tmp_path / "p") as publisher,
        _client(catalog, "outsider", tmp_path / "c") as outsider,
    ):
        await _publish(publisher, "1.0.0", "http://127.0.0.1:1", "search")
        with pytest.raises(RegistryNotFoundError) as raised:
            await outsider.resolve_entry("orders", "^1")
        assert (raised.value.error_reason, raised.value.http_status) == ("agent_not_found", 404)
        assert catalog.keys["outsider"] not in str(raised.value)
        assert (await outsider.search()).agents == []


@pytest.mark.reason("version_understates_change")
async def test_a_breaking_change_published_as_a_minor_is_refused(
    catalog: Catalog, tmp_path: Path
) -> None:
    async with _client(catalog, "orders-team", tmp_path) as publisher:
        await _publish(publisher, "1.0.0", "http://127.0.0.1:1", "search", "refund")
        with pytest.raises(ConfigValidationError) as raised:
            await publisher.publish(agent_card("Orders", "1.1.0", skill("refund")))
        assert getattr(raised.value, "error_reason", None) == "version_understates_change"
        assert "'search'" in str(raised.value)
        assert "2.0.0" in str(raised.value)
        await _publish(publisher, "2.0.0", "http://127.0.0.1:1", "refund")


async def test_an_agent_client_calls_the_agent_the_catalog_resolves(
    any_catalog: Catalog, tmp_path: Path
) -> None:
    catalog = any_catalog
    async with (
        running_server(create_app(orders_v1, AgentCard.model_validate(agent_card()))) as one,
        running_server(create_app(orders_v2, AgentCard.model_validate(agent_card()))) as two,
        _client(catalog, "orders-team", tmp_path / "p") as publisher,
        _client(catalog, "shop", tmp_path / "c") as caller,
    ):
        await _publish(publisher, "1.0.0", one, "search")
        await _publish(publisher, "2.0.0", two, "refund")
        async with AgentClient("catalog://orders@^1", catalog=caller) as agent:
            assert (await agent.send("hello")).text == "v1 hello"
        async with AgentClient("catalog://orders", catalog=caller) as agent:
            assert (await agent.send("hello")).text == "v2 hello"
            assert (await agent.card()).url == two + "/"


async def test_an_agent_client_resolves_again_when_the_card_ttl_ends(
    catalog: Catalog, tmp_path: Path
) -> None:
    async with (
        running_server(create_app(orders_v1, AgentCard.model_validate(agent_card()))) as one,
        running_server(create_app(orders_v2, AgentCard.model_validate(agent_card()))) as two,
        _client(catalog, "orders-team", tmp_path / "p") as publisher,
        _client(catalog, "shop", tmp_path / "c") as caller,
    ):
        await _publish(publisher, "2.0.0", one, "search")
        async with AgentClient("catalog://orders@^2", catalog=caller, card_ttl=0) as agent:
            assert (await agent.send("a")).text == "v1 a"
            await _publish(publisher, "2.1.0", two, "search", "refund")
            assert (await agent.send("b")).text == "v2 b"


def test_a_malformed_catalog_url_is_refused_when_the_client_is_made(tmp_path: Path) -> None:
    catalog = CatalogClient("http://127.0.0.1:9", cache_dir=tmp_path)
    with pytest.raises(ConfigValidationError) as raised:
        AgentClient("catalog://Orders@^2", catalog=catalog)
    assert str(raised.value).startswith(
        "'catalog://Orders@^2': 'Orders' is not an agent name of the catalog"
    )


@pytest.mark.reason("registry_unavailable_error")
async def test_a_stopped_catalog_leaves_callers_on_their_cache_until_the_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    cache = tmp_path / "cache"
    async with running_server(create_app(orders_v1, AgentCard.model_validate(agent_card()))) as one:
        async with served_catalog(tmp_path / "catalog") as catalog:
            key = catalog.keys["shop"]
            async with _client(catalog, "orders-team", tmp_path / "p") as publisher:
                await _publish(publisher, "1.2.0", one, "search")
            async with (
                CatalogClient(catalog.url, auth=key, cache_dir=cache, clock=clock) as caller,
                AgentClient("catalog://orders@^1", catalog=caller) as agent,
            ):
                assert (await agent.send("first")).text == "v1 first"
            stopped = catalog.url
        # the catalog is stopped; a caller started afterwards calls from its cache
        clock.now += 600
        caplog.set_level(logging.WARNING, logger=LOGGER)
        async with (
            CatalogClient(stopped, auth=key, cache_dir=cache, clock=clock) as caller,
            AgentClient("catalog://orders@^1", catalog=caller) as agent,
        ):
            assert (await agent.send("second")).text == "v1 second"
        warnings = [r.getMessage() for r in caplog.records if r.name == LOGGER]
        assert warnings == [
            "the catalog is unreachable; using the cached resolution of orders@^1 "
            "(version 1.2.0, cached 600 s ago)"
        ]
        assert stopped.split("//")[1] not in caplog.text
        # past the bound: the caller is told the catalog is unavailable, nothing is sent
        clock.now += 86_400
        async with (
            CatalogClient(stopped, auth=key, cache_dir=cache, clock=clock) as caller,
            AgentClient(
                "catalog://orders@^1", catalog=caller, retry=RetryPolicy(max_attempts=1)
            ) as agent,
        ):
            with pytest.raises(RegistryUnavailableError) as raised:
                await agent.send("third")
        assert str(raised.value) == (
            "agent 'orders' (^1): the catalog could not be reached; a cached resolution of "
            "orders@^1 exists but is 87000 s old, older than the bound of 86400 s"
        )


# -- llamon serve --publish-to ---------------------------------------------------------


async def _line(process: asyncio.subprocess.Process, needle: str) -> str:
    """The first stderr line of ``process`` containing ``needle``."""
    assert process.stderr is not None
    while True:
        raw = await asyncio.wait_for(process.stderr.readline(), LINE_TIMEOUT)
        assert raw, f"the server's stderr ended before a line with {needle!r}"
        line = raw.decode()
        if needle in line:
            return line


async def _status(catalog: Catalog, name: str, version: str) -> str:
    response = await catalog.get(f"/v0/agents/{name}/versions/{version}")
    assert response.status_code == 200, response.text
    status: str = response.json()["status"]
    return status


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_llamon_serve_publishes_its_card_and_deprecates_it_on_a_clean_stop(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: signal.Signals
) -> None:
    monkeypatch.setenv("ORDERS_CATALOG_KEY", catalog.keys["orders-team"])
    options = (
        "--store",
        "sqlite",
        "--publish-to",
        catalog.url,
        "--publish-key-env",
        "ORDERS_CATALOG_KEY",
        "--publish-name",
        "orders-demo",
        "--deprecate-on-shutdown",
    )
    async with llamon_serve(tmp_path / "home", *options) as (process, url):
        line = await _line(process, "published")
        assert "published orders-demo@1.0.0 to the Agent Catalog (change: initial)" in line
        assert catalog.url.split("//")[1] not in line
        entry = (await catalog.get("/v0/agents/orders-demo/versions/latest")).json()
        assert (entry["status"], entry["card"]["url"]) == ("active", url)
        process.send_signal(stop)
        line = await _line(process, "deprecated")
        assert "marked orders-demo@1.0.0 deprecated in the Agent Catalog" in line
        await asyncio.wait_for(process.wait(), LINE_TIMEOUT)
    assert await _status(catalog, "orders-demo", "1.0.0") == "deprecated"


@pytest.mark.reason("name_not_owned")
async def test_llamon_serve_keeps_serving_when_the_catalog_refuses_the_card(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMON_CATALOG_KEY", catalog.keys["billing-team"])
    options = ("--store", "sqlite", "--publish-to", catalog.url, "--publish-name", "orders-x")
    async with llamon_serve(tmp_path / "home", *options) as (process, url):
        line = await _line(process, "could not publish")
        assert "WARNING" in line
        assert "AUTH_REQUIRED registry_unauthorized_error" in line
        assert "the agent keeps serving" in line
        assert catalog.keys["billing-team"] not in line
        async with httpx.AsyncClient(timeout=30) as http:
            task = await send_text(http, url, "hello")
        assert task["status"]["state"] == "completed"
    response = await catalog.get("/v0/agents/orders-x/versions")
    assert response.status_code == 404


async def test_llamon_serve_keeps_serving_when_the_catalog_is_unreachable(
    tmp_path: Path,
) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    nowhere = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()
    options = ("--store", "sqlite", "--publish-to", nowhere, "--deprecate-on-shutdown")
    async with llamon_serve(tmp_path / "home", *options) as (process, url):
        async with httpx.AsyncClient(timeout=30) as http:
            task = await send_text(http, url, "hello")
        assert task["status"]["state"] == "completed"
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), LINE_TIMEOUT) is not None

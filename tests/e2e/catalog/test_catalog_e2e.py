"""The Agent Catalog end to end, on SQLite and on PostgreSQL: a catalog served by uvicorn on
127.0.0.1 (``llamon catalog serve`` in a process of its own for one test), three real
llamon agents publishing several versions, callers with keys of their own, the health
prober against an agent that stops and comes back, and ``CatalogClient`` answering from its
cache while the catalog is down."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from llamon_agent.a2a import AgentContext, build_agent_card, create_app, skill
from llamon_agent.catalog.access import hash_key, new_key
from llamon_agent.catalog.app import create_catalog_app
from llamon_agent.catalog.health import HealthProber
from llamon_agent.catalog.records import CatalogKey
from llamon_agent.catalog.store import CatalogStore, open_catalog_store
from llamon_agent.client.catalog import CatalogClient
from llamon_agent.exceptions import RegistryNotFoundError, RegistryUnavailableError
from tests._support.a2a_server import running_server
from tests._support.catalog_app import KEYS, Catalog
from tests._support.serve import READY_TIMEOUT, llamon_cli
from tests._support.stores import postgres_schema

ENGINES = ("sqlite", "postgres")
WARNING = (
    "warning: auth_not_declared at securitySchemes: no security schemes declared; clients "
    "cannot tell how to authenticate\n"
)
"""The one lint warning of the suite's cards, as ``llamon catalog publish`` shows it."""
NOW = 1_780_000_000.0


async def _answer(ctx: AgentContext) -> str:
    return f"done: {ctx.text}"


SKILLS = {
    "search": ("Search orders", "Finds the orders of one customer by name or email."),
    "status": ("Order status", "Reports where one order is, by its order number."),
    "refund": ("Refund an order", "Refunds one delivered order, fully or in part."),
    "invoice": ("Invoice an order", "Writes the invoice of one order as a PDF."),
    "forecast": ("Weather forecast", "Gives tomorrow's weather for one city."),
}


def _card(name: str, version: str, url: str, *skills: str) -> dict[str, Any]:
    card = build_agent_card(
        name=name,
        description=f"The {name} agent of the catalog's end-to-end suite; answers one question.",
        url=url,
        version=version,
        skills=[
            skill(s, SKILLS[s][0], SKILLS[s][1], tags=[s], examples=[f"{s} for order 42"])
            for s in skills
        ],
    )
    served: dict[str, Any] = card.model_dump(mode="json", by_alias=True, exclude_none=True)
    return served


@dataclass
class Agent:
    """A real llamon agent on 127.0.0.1: its base URL, the card it serves, its server."""

    url: str
    card: dict[str, Any]
    server: uvicorn.Server
    task: asyncio.Task[None]

    async def stop(self) -> None:
        self.server.should_exit = True
        await asyncio.wait_for(self.task, timeout=10)


async def _start_agent(name: str, version: str, *skills: str, port: int = 0) -> Agent:
    """Serve a llamon agent whose card names the address it listens on (``port`` 0: any)."""
    from a2a.types import AgentCard

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    card = _card(name, version, url, *skills)
    app = create_app(_answer, AgentCard.model_validate(card), gc_freeze=False)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    async def serve() -> None:
        try:
            await server.serve(sockets=[sock])
        finally:
            sock.close()

    # the socket listens already: a connection made before uvicorn accepts waits for it
    return Agent(url, card, server, asyncio.create_task(serve()))


@asynccontextmanager
async def _agents() -> AsyncIterator[dict[str, Agent]]:
    """orders 1.0.0 (search, status), billing 1.0.0 (invoice), weather 1.0.0 (forecast)."""
    agents = {
        "orders": await _start_agent("Orders", "1.0.0", "search", "status"),
        "billing": await _start_agent("Billing", "1.0.0", "invoice"),
        "weather": await _start_agent("Weather", "1.0.0", "forecast"),
    }
    try:
        yield agents
    finally:
        for agent in agents.values():
            if not agent.task.done():
                await agent.stop()


@asynccontextmanager
async def _database(engine: str, tmp_path: Path) -> AsyncIterator[str | None]:
    """The catalog's ``--database-url``: ``None`` (SQLite under ``tmp_path``) or a DSN that
    sees only a fresh PostgreSQL schema."""
    if engine == "postgres":
        async with postgres_schema() as dsn:
            yield dsn
    else:
        yield None


async def _add_keys(store: CatalogStore) -> dict[str, str]:
    keys: dict[str, str] = {}
    for label, (role, patterns) in KEYS.items():
        keys[label] = new_key()
        await store.add_key(CatalogKey(hash_key(keys[label]), role, label, patterns))
    return keys


@asynccontextmanager
async def _catalog(engine: str, tmp_path: Path, **options: Any) -> AsyncIterator[Catalog]:
    """A catalog on ``engine`` served by uvicorn on 127.0.0.1, with the keys of ``KEYS``."""
    async with AsyncExitStack() as stack:
        dsn = await stack.enter_async_context(_database(engine, tmp_path))
        store = await open_catalog_store(dsn, home=tmp_path)
        stack.push_async_callback(store.close)
        keys = await _add_keys(store)
        app = create_catalog_app(store, **options)
        url = await stack.enter_async_context(running_server(app))
        http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
        yield Catalog(url, store, http, keys)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    engine: str = request.param
    return engine


def _with(card: dict[str, Any], version: str, *skills: str) -> dict[str, Any]:
    """``card`` as ``version`` with ``skills``."""
    return _card(card["name"], version, card["url"], *skills)


async def _publish_all(catalog: Catalog, agents: dict[str, Agent]) -> None:
    """orders by its URL (its publisher fetches nothing itself), billing and weather as JSON."""
    answers = [
        await catalog.post("/v0/publish", {"url": agents["orders"].url}, "orders-team"),
        await catalog.publish(agents["billing"].card, "billing-team"),
        await catalog.publish(agents["weather"].card, "admin"),
    ]
    assert [a.status_code for a in answers] == [201, 201, 201], [a.text for a in answers]


async def _names(catalog: Catalog, label: str, **params: str) -> list[str]:
    answer = await catalog.get("/v0/agents", label, **params)
    assert answer.status_code == 200, answer.text
    return [entry["name"] for entry in answer.json()["agents"]]


async def test_agents_publish_versions_and_a_breaking_change_needs_a_major(
    engine: str, tmp_path: Path
) -> None:
    async with _catalog(engine, tmp_path) as catalog, _agents() as agents:
        await _publish_all(catalog, agents)
        orders = agents["orders"].card
        minor = await catalog.publish(_with(orders, "1.1.0", "search", "status", "refund"))
        assert minor.status_code == 201, minor.text
        assert (minor.json()["change"], minor.json()["entry"]["isLatest"]) == ("minor", True)

        refused = await catalog.publish(_with(orders, "1.2.0", "search", "refund"))
        assert refused.status_code == 409
        error = refused.json()["error"]
        assert (error["errorCode"], error["errorReason"]) == (
            "INVALID_INPUT",
            "version_understates_change",
        )
        assert error["errorMessage"] == (
            "skill 'status' was removed: that needs a major version (2.0.0 or higher), not 1.2.0"
        )
        listed = await catalog.get("/v0/agents/orders/versions")
        assert [v["version"] for v in listed.json()["versions"]] == ["1.1.0", "1.0.0"]

        major = await catalog.publish(_with(orders, "2.0.0", "search", "refund"))
        assert major.status_code == 201, major.text
        assert major.json()["change"] == "major"
        latest = await catalog.get("/v0/agents/orders/versions/latest", "shop")
        assert latest.json()["version"] == "2.0.0"
        in_range = await catalog.get("/v0/agents/orders/versions", "shop", range="^1")
        assert [v["version"] for v in in_range.json()["versions"]] == ["1.1.0", "1.0.0"]
        first = (await catalog.get("/v0/agents/orders/versions/1.0.0")).json()
        assert first["cardUrl"] == agents["orders"].url + ".well-known/agent-card.json"
        assert first["owner"] == "orders-team"


async def test_each_caller_sees_and_resolves_only_its_agents(engine: str, tmp_path: Path) -> None:
    async with _catalog(engine, tmp_path) as catalog, _agents() as agents:
        await _publish_all(catalog, agents)
        assert await _names(catalog, "admin") == ["billing", "orders", "weather"]
        assert await _names(catalog, "shop") == ["orders"]
        assert await _names(catalog, "outsider") == ["weather"]
        assert await _names(catalog, "billing-team") == ["billing"]
        assert await _names(catalog, "shop", skill="forecast") == []

        hidden = await catalog.get("/v0/agents/weather/versions/latest", "shop")
        missing = await catalog.get("/v0/agents/nowhere/versions/latest", "shop")
        assert (hidden.status_code, missing.status_code) == (404, 404)
        assert hidden.json()["error"]["errorReason"] == "agent_not_found"
        assert hidden.text.replace("weather", "NAME") == missing.text.replace("nowhere", "NAME")
        visible = await catalog.get("/v0/agents/orders/versions/latest", "shop")
        assert visible.json()["version"] == "1.0.0"

        async with CatalogClient(catalog.url, auth=catalog.keys["shop"], cache_dir=False) as client:
            card = await client.resolve("orders", "^1")
            assert card.url == agents["orders"].url
            with pytest.raises(RegistryNotFoundError) as hidden_error:
                await client.resolve("weather")
            with pytest.raises(RegistryNotFoundError) as missing_error:
                await client.resolve("nowhere")
        assert hidden_error.value.error_reason == missing_error.value.error_reason
        assert str(hidden_error.value).replace("weather", "X") == str(missing_error.value).replace(
            "nowhere", "X"
        )


async def test_the_prober_catches_a_stopped_agent_and_its_recovery(
    engine: str, tmp_path: Path
) -> None:
    now = [NOW]
    async with _catalog(engine, tmp_path) as catalog, _agents() as agents:
        await _publish_all(catalog, agents)
        prober = HealthProber(
            catalog.store, interval=30, timeout=5, clock=lambda: now[0], rng=lambda: 0.5
        )
        try:
            assert await prober.probe_once() == 3
            health = (await catalog.get("/v0/agents/orders/versions/latest")).json()["health"]
            assert (health["state"], health["failures"]) == ("healthy", 0)

            orders = agents["orders"]
            port = int(orders.url.rsplit(":", 1)[1].strip("/"))
            await orders.stop()
            now[0] += 31  # past every version's next check (interval 30, no jitter)
            assert await prober.probe_once() == 3
            health = (await catalog.get("/v0/agents/orders/versions/latest")).json()["health"]
            assert (health["state"], health["errorCode"], health["errorReason"]) == (
                "unhealthy",
                "UPSTREAM_UNAVAILABLE",
                "network_error",
            )
            assert health["failures"] == 1
            assert await _names(catalog, "admin") == ["billing", "weather"]
            assert await _names(catalog, "admin", health="any") == ["billing", "orders", "weather"]

            agents["orders"] = await _start_agent("Orders", "1.0.0", "search", "status", port=port)
            now[0] += 23  # past the backoff after one failure: 30/2 + 0.5 * 30/2 = 22.5 s
            assert await prober.probe_once() == 1
            health = (await catalog.get("/v0/agents/orders/versions/latest")).json()["health"]
            assert (health["state"], health["errorCode"], health["failures"]) == (
                "healthy",
                None,
                0,
            )
            assert await _names(catalog, "admin") == ["billing", "orders", "weather"]
        finally:
            await prober.stop()


async def test_the_client_answers_from_its_cache_while_the_catalog_is_down_never_stale(
    engine: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [NOW]
    cache = tmp_path / "cache"
    async with _agents() as agents:
        async with _catalog(engine, tmp_path) as catalog:
            await _publish_all(catalog, agents)
            url, key = catalog.url, catalog.keys["shop"]
            async with CatalogClient(
                url, auth=key, cache_dir=cache, cache_max_age=3600, clock=lambda: now[0]
            ) as client:
                assert (await client.resolve_entry("orders", "^1")).version == "1.0.0"
        # the catalog is stopped: nothing listens at its address any more
        caplog.set_level(logging.WARNING, logger="llamon_agent")
        now[0] += 3599
        async with CatalogClient(
            url, auth=key, cache_dir=cache, cache_max_age=3600, clock=lambda: now[0]
        ) as client:
            entry = await client.resolve_entry("orders", "^1")
            assert (entry.name, entry.version, entry.card["url"]) == (
                "orders",
                "1.0.0",
                agents["orders"].url,
            )
            assert [r.getMessage() for r in caplog.records if "cached" in r.getMessage()] == [
                "the catalog is unreachable; using the cached resolution of orders@^1 "
                "(version 1.0.0, cached 3599 s ago)"
            ]
            now[0] += 2
            with pytest.raises(RegistryUnavailableError) as stale:
                await client.resolve_entry("orders", "^1")
            assert str(stale.value) == (
                "agent 'orders' (^1): the catalog could not be reached; a cached resolution "
                "of orders@^1 exists but is 3601 s old, older than the bound of 3600 s"
            )
            with pytest.raises(RegistryUnavailableError):
                await client.resolve_entry("billing", "latest")  # never resolved: no cache


async def _serve_process(home: Path, dsn: str | None) -> tuple[asyncio.subprocess.Process, str]:
    """``python -m llamon_agent catalog serve`` on a free port; its process and URL."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llamon_agent", "catalog", "serve", "--port", "0",
        "--home", str(home), "--no-probe", *(["--database-url", dsn] if dsn else []),
        stderr=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stderr is not None
    while True:
        line = (await asyncio.wait_for(process.stderr.readline(), READY_TIMEOUT)).decode()
        assert line, "llamon catalog serve exited before it was ready"
        if line.startswith("llamon: catalog serving at "):
            return process, line.split(" at ", 1)[1].split(" ", 1)[0]


async def test_llamon_catalog_serve_keys_publish_and_list_in_processes_of_their_own(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    async with _database(engine, tmp_path) as dsn, _agents() as agents:
        where = ["--home", str(home), *(["--database-url", dsn] if dsn else [])]
        code, key, err = await llamon_cli(
            "catalog", "keys", "add", "--role", "publisher", "--label", "orders-team",
            "--pattern", "orders*", *where,
        )  # fmt: skip
        assert code == 0, err
        monkeypatch.setenv("E2E_CATALOG_KEY", key.strip())
        process, url = await _serve_process(home, dsn)
        try:
            publish = ("catalog", "publish", "--url", url, "--key-env", "E2E_CATALOG_KEY")
            code, out, err = await llamon_cli(*publish, "--agent-url", agents["orders"].url)
            assert (code, out, err) == (0, "orders@1.0.0 (initial)\n", WARNING)

            card = tmp_path / "orders.json"
            card.write_text(json.dumps(_with(agents["orders"].card, "1.1.0", "search")))
            code, out, err = await llamon_cli(*publish, "--card", str(card))
            assert (code, out) == (1, "")
            assert err.splitlines() == [
                "llamon catalog publish: INVALID_INPUT/version_understates_change: skill "
                "'status' was removed: that needs a major version (2.0.0 or higher), not 1.1.0"
            ]
            code, out, err = await llamon_cli(*publish, "--card", str(tmp_path / "none.json"))
            assert code == 2

            card.write_text(json.dumps(_with(agents["orders"].card, "2.0.0", "search")))
            code, out, err = await llamon_cli(*publish, "--card", str(card))
            assert (code, out, err) == (0, "orders@2.0.0 (major)\n", WARNING)

            code, out, err = await llamon_cli("catalog", "list", "--json", *where)
            assert code == 0, err
            (row,) = json.loads(out)
            assert {k: row[k] for k in ("name", "versions", "latest", "owner", "health")} == {
                "name": "orders",
                "versions": 2,
                "latest": "2.0.0",
                "owner": "orders-team",
                "health": "unknown",
            }
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.stderr is not None
            rest = (await asyncio.wait_for(process.stderr.read(), 20)).decode()
            # uvicorn shuts down cleanly, then raises the signal again: killed by SIGTERM
            assert await asyncio.wait_for(process.wait(), 20) == -signal.SIGTERM
            assert "Traceback" not in rest

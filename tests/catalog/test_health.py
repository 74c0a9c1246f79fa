"""``HealthProber``: real agents on 127.0.0.1 probed into a real SQLite catalog store, with
an injected clock and random source (no sleeps: servers signal with events)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from llamon_agent.a2a.server import create_app
from llamon_agent.catalog import AgentVersion, CatalogQuery, CatalogStore, open_catalog_store
from llamon_agent.catalog.health import HealthProber, backoff_delay, healthy_delay
from llamon_agent.catalog.records import Health
from tests._support.a2a_server import make_card, running_server

CARD_PATH = "/.well-known/agent-card.json"


class Clock:
    """An epoch clock the test moves by hand."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def fixed(value: float) -> Callable[[], float]:
    return lambda: value


def card_json(url: str = "http://127.0.0.1:1/") -> dict[str, Any]:
    dumped: dict[str, Any] = make_card(url).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    return dumped


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[CatalogStore]:
    opened = await open_catalog_store(home=tmp_path)
    try:
        yield opened
    finally:
        await opened.close()


async def publish(store: CatalogStore, name: str, card_url: str, version: str = "1.0.0") -> None:
    await store.add_version(
        AgentVersion(
            name=name,
            version=version,
            status="active",
            card=card_json(card_url.removesuffix(CARD_PATH) + "/"),
            owner="tests",
            published_at=0.0,
            card_url=card_url,
        )
    )


async def health_of(store: CatalogStore, name: str, version: str = "1.0.0") -> Health:
    found = await store.get_version(name, version)
    assert found is not None
    return found.health


async def pong(ctx: object) -> str:
    return "pong"


def agent_app() -> Starlette:
    """A real llamon agent (it serves ``/healthz``)."""
    return create_app(pong, make_card(), gc_freeze=False)


def card_only_app(healthz: int | None = None, body: bytes | None = None) -> Starlette:
    """A server with the card (``body`` instead, when given) and ``/healthz`` answering
    ``healthz`` (no such route when ``None``)."""

    async def card(_: Request) -> Response:
        if body is not None:
            return Response(body, media_type="application/json")
        return JSONResponse(card_json())

    async def health(_: Request) -> Response:
        assert healthz is not None
        return PlainTextResponse("down", status_code=healthz)

    routes = [Route(CARD_PATH, card)]
    if healthz is not None:
        routes.append(Route("/healthz", health))
    return Starlette(routes=routes)


def free_port() -> int:
    """A loopback port nothing listens on (connections to it are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def silent_server() -> AsyncIterator[tuple[str, asyncio.Event]]:
    """A server that accepts connections and never answers; yields its base URL and an
    event set once a connection was accepted."""
    accepted = asyncio.Event()
    writers: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        accepted.set()
        await reader.read()  # until the client goes away

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", accepted
    finally:
        for writer in writers:
            writer.close()
        server.close()
        await asyncio.wait_for(server.wait_closed(), 5)


# --------------------------------------------------------------------------- a real agent


async def test_a_served_agent_is_healthy_after_a_probe(store: CatalogStore) -> None:
    clock = Clock()
    async with running_server(agent_app()) as url:
        await publish(store, "pong", url + CARD_PATH)
        assert (await health_of(store, "pong")).state == "unknown"
        prober = HealthProber(store, interval=30.0, clock=clock, rng=fixed(0.5))
        try:
            assert await prober.probe_once() == 1
        finally:
            await prober.stop()
    assert await health_of(store, "pong") == Health(
        state="healthy",
        checked_at=clock.now,
        last_seen=clock.now,
        failures=0,
        next_check=clock.now + 30.0,
    )


async def test_an_agent_stopped_is_unhealthy_and_healthy_again_once_restarted(
    store: CatalogStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = Clock()
    port = free_port()
    prober = HealthProber(store, interval=10.0, max_backoff=100.0, clock=clock, rng=fixed(0.5))
    try:
        async with running_server(agent_app(), port=port) as url:
            await publish(store, "orders", url + CARD_PATH)
            assert await prober.probe_once() == 1
        seen = clock.now

        clock.now += 10.0
        assert await prober.probe_once() == 1
        down = await health_of(store, "orders")
        assert down == Health(
            state="unhealthy",
            checked_at=clock.now,
            last_seen=seen,
            error_code="UPSTREAM_UNAVAILABLE",
            error_reason="network_error",
            failures=1,
            next_check=clock.now + 7.5,
        )

        clock.now += 7.5
        async with running_server(agent_app(), port=port):
            assert await prober.probe_once() == 1
        assert await health_of(store, "orders") == Health(
            state="healthy",
            checked_at=clock.now,
            last_seen=clock.now,
            failures=0,
            next_check=clock.now + 10.0,
        )
    finally:
        await prober.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "llamon_agent.catalog"]
    assert lines == [
        "catalog health: orders@1.0.0 unknown -> healthy",
        "catalog health: orders@1.0.0 healthy -> unhealthy UPSTREAM_UNAVAILABLE network_error",
        "catalog health: orders@1.0.0 unhealthy -> healthy",
    ]
    every = [f"{r.name}: {r.getMessage()}" for r in caplog.records]
    assert [line for line in every if "127.0.0.1" in line or f":{port}" in line] == []


async def test_a_version_not_due_is_not_probed(store: CatalogStore) -> None:
    clock = Clock()
    async with running_server(agent_app()) as url:
        await publish(store, "pong", url + CARD_PATH)
        prober = HealthProber(store, interval=30.0, clock=clock, rng=fixed(0.5))
        try:
            assert await prober.probe_once() == 1
            clock.now += 29.0
            assert await prober.probe_once() == 0
            clock.now += 1.0
            assert await prober.probe_once() == 1
        finally:
            await prober.stop()


async def test_unhealthy_versions_are_left_out_of_search(store: CatalogStore) -> None:
    clock = Clock()
    async with running_server(agent_app()) as url:
        await publish(store, "alive", url + CARD_PATH)
        await publish(store, "gone", f"http://127.0.0.1:{free_port()}{CARD_PATH}")
        prober = HealthProber(store, clock=clock, rng=fixed(0.5))
        try:
            assert await prober.probe_once() == 2
        finally:
            await prober.stop()
    default = await store.search(CatalogQuery())
    assert [(v.name, v.health.state) for v in default.rows] == [("alive", "healthy")]
    every = await store.search(CatalogQuery(include_unhealthy=True))
    assert [(v.name, v.health.state) for v in every.rows] == [
        ("alive", "healthy"),
        ("gone", "unhealthy"),
    ]


# --------------------------------------------------------------------------- failures


async def test_an_agent_that_never_answers_is_unhealthy_with_a_timeout(
    store: CatalogStore,
) -> None:
    clock = Clock()
    async with silent_server() as (url, _):
        await publish(store, "silent", url + CARD_PATH)
        prober = HealthProber(store, timeout=0.3, clock=clock, rng=fixed(0.5))
        try:
            done = await asyncio.wait_for(prober.probe_once(), 5)
        finally:
            await prober.stop()
    assert done == 1
    health = await health_of(store, "silent")
    assert (health.state, health.error_code, health.error_reason, health.last_seen) == (
        "unhealthy",
        "UPSTREAM_TIMEOUT",
        "timeout",
        None,
    )


async def test_a_healthz_answering_503_is_unhealthy(store: CatalogStore) -> None:
    clock = Clock()
    async with running_server(card_only_app(healthz=503)) as url:
        await publish(store, "sick", url + CARD_PATH)
        prober = HealthProber(store, clock=clock, rng=fixed(0.5))
        try:
            assert await prober.probe_once() == 1
        finally:
            await prober.stop()
    health = await health_of(store, "sick")
    assert (health.state, health.error_code, health.error_reason, health.failures) == (
        "unhealthy",
        "UPSTREAM_UNAVAILABLE",
        "http_5xx",
        1,
    )


async def test_an_agent_without_healthz_is_healthy(store: CatalogStore) -> None:
    clock = Clock()
    async with running_server(card_only_app(healthz=None)) as url:
        await publish(store, "plain", url + CARD_PATH)
        prober = HealthProber(store, clock=clock, rng=fixed(0.5))
        try:
            assert await prober.probe_once() == 1
        finally:
            await prober.stop()
    assert (await health_of(store, "plain")).state == "healthy"


async def test_a_card_url_answering_404_is_unhealthy(store: CatalogStore) -> None:
    clock = Clock()
    async with running_server(card_only_app(healthz=None)) as url:
        await publish(store, "moved", url + "/elsewhere" + CARD_PATH)
        prober = HealthProber(store, clock=clock, rng=fixed(0.5))
        try:
            assert await prober.probe_once() == 1
        finally:
            await prober.stop()
    health = await health_of(store, "moved")
    assert (health.state, health.error_code, health.error_reason) == (
        "unhealthy",
        "NOT_FOUND",
        "http_not_found",
    )


@pytest.mark.reason("invalid_card")
@pytest.mark.parametrize(
    "body", [b"<html>not a card</html>", b'{"name": "half a card"}', b"[1, 2]"]
)
async def test_a_body_that_is_not_a_card_is_unhealthy_with_invalid_card(
    store: CatalogStore, body: bytes
) -> None:
    clock = Clock()
    async with running_server(card_only_app(healthz=200, body=body)) as url:
        await publish(store, "broken", url + CARD_PATH)
        prober = HealthProber(store, clock=clock, rng=fixed(0.5))
        try:
            assert await prober.probe_once() == 1
            health = await health_of(store, "broken")
            assert (health.state, health.error_code, health.error_reason) == (
                "unhealthy",
                "INVALID_INPUT",
                "invalid_card",
            )
            # the next probe is still made (and fails the same way)
            clock.now = health.next_check or clock.now
            assert await prober.probe_once() == 1
            assert (await health_of(store, "broken")).failures == 2
        finally:
            await prober.stop()


@pytest.mark.reason("card_too_large")
async def test_a_card_larger_than_the_limit_is_unhealthy_with_card_too_large(
    store: CatalogStore,
) -> None:
    clock = Clock()
    async with running_server(card_only_app(healthz=200)) as url:
        await publish(store, "big", url + CARD_PATH)
        prober = HealthProber(store, clock=clock, rng=fixed(0.5), max_card_bytes=64)
        try:
            assert await prober.probe_once() == 1
        finally:
            await prober.stop()
    health = await health_of(store, "big")
    assert (health.state, health.error_code, health.error_reason) == (
        "unhealthy",
        "INVALID_INPUT",
        "card_too_large",
    )


# --------------------------------------------------------------------------- bounds


async def test_probes_run_at_most_concurrency_at_once(store: CatalogStore) -> None:
    in_flight = 0
    peak = 0
    crowded = asyncio.Event()

    async def counted(request: Request) -> Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight >= 3:
            crowded.set()
        try:
            # hold each request until three are in flight at once (then let all pass)
            await asyncio.wait_for(crowded.wait(), 5)
        finally:
            in_flight -= 1
        if request.url.path.endswith("/healthz"):
            return PlainTextResponse("ok")
        return JSONResponse(card_json())

    app = Starlette(
        routes=[Route("/{agent}" + CARD_PATH, counted), Route("/{agent}/healthz", counted)]
    )
    clock = Clock()
    async with running_server(app) as url:
        for i in range(20):
            await publish(store, f"agent-{i}", f"{url}/a{i}{CARD_PATH}")
        prober = HealthProber(store, concurrency=3, clock=clock, rng=fixed(0.5))
        try:
            assert await asyncio.wait_for(prober.probe_once(), 30) == 20
        finally:
            await prober.stop()
    assert peak == 3
    page = await store.search(CatalogQuery(limit=100))
    assert len(page.rows) == 20
    assert {v.health.state for v in page.rows} == {"healthy"}


def test_backoff_delay_is_capped_exponential_with_equal_jitter() -> None:
    half = [backoff_delay(n, 10.0, 100.0, fixed(0.5)) for n in range(1, 8)]
    assert half == [7.5, 15.0, 30.0, 60.0, 75.0, 75.0, 75.0]
    assert [backoff_delay(n, 10.0, 100.0, fixed(0.0)) for n in (1, 4, 9)] == [5.0, 40.0, 50.0]
    assert backoff_delay(10_000, 10.0, 100.0, fixed(0.0)) == 50.0
    assert healthy_delay(30.0, fixed(0.0)) == pytest.approx(27.0)
    assert healthy_delay(30.0, fixed(0.5)) == pytest.approx(30.0)


async def test_the_recorded_backoff_follows_the_schedule_up_to_max_backoff(
    store: CatalogStore,
) -> None:
    clock = Clock()
    await publish(store, "down", f"http://127.0.0.1:{free_port()}{CARD_PATH}")
    prober = HealthProber(store, interval=10.0, max_backoff=100.0, clock=clock, rng=fixed(0.5))
    waits: list[float] = []
    try:
        for failures in range(1, 7):
            assert await prober.probe_once() == 1
            health = await health_of(store, "down")
            assert health.failures == failures
            assert health.next_check is not None
            waits.append(health.next_check - clock.now)
            clock.now += 1.0  # not due yet
            assert await prober.probe_once() == 0
            clock.now = health.next_check
    finally:
        await prober.stop()
    assert waits == [7.5, 15.0, 30.0, 60.0, 75.0, 75.0]


async def test_stop_returns_promptly_while_probes_hang(store: CatalogStore) -> None:
    clock = Clock()
    async with silent_server() as (url, accepted):
        for i in range(4):
            await publish(store, f"hung-{i}", f"{url}/h{i}{CARD_PATH}")
        prober = HealthProber(store, timeout=60.0, clock=clock, rng=fixed(0.5))
        await prober.start()
        assert prober.running
        await asyncio.wait_for(accepted.wait(), 5)
        loop = asyncio.get_running_loop()
        began = loop.time()
        await asyncio.wait_for(prober.stop(), 6)
        assert loop.time() - began < 2.0
        assert not prober.running
        await prober.stop()  # a second stop is a no-op
    health = await health_of(store, "hung-0")
    assert health.state == "unknown"  # a cancelled probe records nothing


async def test_a_store_closed_under_the_prober_is_logged_once_and_the_loop_goes_on(
    store: CatalogStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="llamon_agent.catalog")
    waits: list[float] = []
    idle = asyncio.Event()
    third_backoff = asyncio.Event()

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if len(waits) == 1:
            idle.set()  # the first sweep found nothing due: wait until wake()
            await asyncio.Event().wait()
        elif len(waits) == 4:
            third_backoff.set()  # the test stops the prober here
            await asyncio.Event().wait()

    prober = HealthProber(
        store, interval=10.0, max_backoff=100.0, clock=Clock(), rng=fixed(0.5), sleep=sleep
    )
    await prober.start()
    try:
        await asyncio.wait_for(idle.wait(), 5)
        await store.close()
        prober.wake()
        await asyncio.wait_for(third_backoff.wait(), 5)
        assert prober.running
    finally:
        await prober.stop()
    assert waits == [5.0, 7.5, 15.0, 30.0]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.name, r.getMessage()) for r in warnings] == [
        (
            "llamon_agent.catalog",
            "catalog health: the catalog store did not answer (INTERNAL_ERROR runtime_error); "
            "probes wait and try again",
        )
    ]


async def test_wake_starts_a_sweep_without_waiting_for_the_poll(store: CatalogStore) -> None:
    clock = Clock()
    waited = asyncio.Event()

    async def sleep(seconds: float) -> None:
        waited.set()
        await asyncio.Event().wait()  # only wake() ends an idle wait here

    async with running_server(agent_app()) as url:
        prober = HealthProber(store, clock=clock, rng=fixed(0.5), sleep=sleep)
        await prober.start()
        try:
            await asyncio.wait_for(waited.wait(), 5)  # idle: nothing published yet
            await publish(store, "late", url + CARD_PATH)
            waited.clear()
            prober.wake()
            await asyncio.wait_for(waited.wait(), 5)  # swept, then idle again
        finally:
            await prober.stop()
    assert (await health_of(store, "late")).state == "healthy"

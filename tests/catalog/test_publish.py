"""``POST /v0/publish`` through a real catalog server: every refusal its own test, and the
next request still answered after each."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llamon_agent.catalog.app import create_catalog_app
from llamon_agent.catalog.publish import card_url_of, parse_publish_request
from tests._support.catalog_app import Catalog, agent_card, card_server, served_catalog, skill


@pytest.fixture
async def catalog(tmp_path: Path) -> Any:
    async with served_catalog(tmp_path) as served:
        yield served


def error_of(response: httpx.Response) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    error: dict[str, Any] = body["error"]
    return error


def assert_refused(
    response: httpx.Response, status: int, code: str, reason: str, message: str
) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = error_of(response)
    assert (error["errorCode"], error["errorReason"]) == (code, reason)
    assert error["errorMessage"] == message
    return error


async def still_answers(catalog: Catalog) -> None:
    """The request after a failure is answered."""
    response = await catalog.get("/v0/agents")
    assert response.status_code == 200, response.text


# ------------------------------------------------------------------ success


async def test_a_card_is_published_with_its_warnings_owner_and_card_url(catalog: Catalog) -> None:
    before = time.time()
    response = await catalog.publish(agent_card())
    assert response.status_code == 201, response.text
    result = response.json()
    assert result["created"] is True
    assert result["change"] == "initial"
    assert [w["rule"] for w in result["warnings"]] == ["auth_not_declared"]
    entry = result["entry"]
    assert entry["name"] == "orders"
    assert entry["version"] == "1.0.0"
    assert entry["status"] == "active"
    assert entry["isLatest"] is True
    assert entry["owner"] == "orders-team"
    assert entry["change"] == "initial"
    assert entry["cardUrl"] == "http://127.0.0.1:1/.well-known/agent-card.json"
    assert entry["warnings"] == result["warnings"]
    assert entry["health"]["state"] == "unknown"
    assert entry["card"]["skills"][0]["id"] == "search"
    assert entry["card"]["preferredTransport"] == "JSONRPC"  # stored as validated, wire names
    assert "securitySchemes" not in entry["card"]  # unset fields left out
    stored = await catalog.store.get_version("orders", "1.0.0")
    assert stored is not None
    assert stored.published_at >= before
    assert stored.card == entry["card"]


async def test_the_identical_card_again_is_answered_not_created(catalog: Catalog) -> None:
    first = await catalog.publish(agent_card())
    again = await catalog.publish(agent_card())
    assert again.status_code == 200
    assert again.json()["created"] is False
    assert again.json()["entry"] == first.json()["entry"]


async def test_an_explicit_name_and_a_namespace(catalog: Catalog) -> None:
    response = await catalog.publish(agent_card("Cart"), name="shop/cart")
    assert response.status_code == 201, response.text
    assert response.json()["entry"]["name"] == "shop/cart"
    listed = await catalog.get("/v0/agents/shop/cart/versions", "shop")
    assert [e["version"] for e in listed.json()["versions"]] == ["1.0.0"]


async def test_a_major_change_published_as_major_is_accepted_and_both_stay_resolvable(
    catalog: Catalog,
) -> None:
    await catalog.publish(agent_card("Orders", "1.0.0", skill("search"), skill("cancel")))
    minor = await catalog.publish(
        agent_card("Orders", "1.1.0", skill("search"), skill("cancel"), skill("track"))
    )
    assert minor.json()["change"] == "minor"
    major = await catalog.publish(agent_card("Orders", "2.0.0", skill("search")))
    assert major.status_code == 201, major.text
    assert major.json()["change"] == "major"
    for version in ("1.0.0", "1.1.0", "2.0.0"):
        got = await catalog.get(f"/v0/agents/orders/versions/{version}", "shop")
        assert got.status_code == 200
    latest = await catalog.get("/v0/agents/orders/versions/latest", "shop")
    assert latest.json()["version"] == "2.0.0"


async def test_a_backport_is_compared_with_its_own_line(catalog: Catalog) -> None:
    await catalog.publish(agent_card("Orders", "1.4.0", skill("search"), skill("cancel")))
    await catalog.publish(agent_card("Orders", "2.0.0", skill("search")))
    backport = await catalog.publish(
        agent_card("Orders", "1.4.1", skill("search"), skill("cancel"), description="x" * 50)
    )
    assert backport.status_code == 201, backport.text
    assert backport.json()["change"] == "patch"
    assert backport.json()["entry"]["isLatest"] is False


async def test_a_card_named_in_capitals_joins_the_lowercase_agent(catalog: Catalog) -> None:
    await catalog.publish(agent_card("orders"))
    shouted = await catalog.publish(agent_card("ORDERS", "1.0.1"))
    assert shouted.status_code == 201
    assert shouted.json()["entry"]["name"] == "orders"
    assert shouted.json()["change"] == "patch"


# ------------------------------------------------------------------ refusals


@pytest.mark.reason("version_exists")
async def test_a_different_card_as_an_existing_version_is_version_exists(catalog: Catalog) -> None:
    await catalog.publish(agent_card())
    response = await catalog.publish(agent_card(description="Another description of this agent."))
    error = assert_refused(
        response,
        409,
        "INVALID_INPUT",
        "version_exists",
        "1.0.0 is already published with a different card: publish a new version number",
    )
    assert error["retriable"] is False
    await still_answers(catalog)


async def test_a_deleted_versions_number_is_never_reused(catalog: Catalog) -> None:
    await catalog.publish(agent_card())
    await catalog.post("/v0/agents/orders/versions/1.0.0/status", {"status": "deleted"})
    response = await catalog.publish(agent_card())
    assert_refused(
        response,
        409,
        "INVALID_INPUT",
        "version_exists",
        "1.0.0 was published and deleted; a version number is never reused: publish a new version",
    )


@pytest.mark.reason("version_understates_change")
async def test_a_removed_skill_published_as_minor_is_refused_naming_the_skill(
    catalog: Catalog,
) -> None:
    await catalog.publish(agent_card("Orders", "1.2.0", skill("search"), skill("cancel")))
    response = await catalog.publish(agent_card("Orders", "1.3.0", skill("search")))
    assert_refused(
        response,
        409,
        "INVALID_INPUT",
        "version_understates_change",
        "skill 'cancel' was removed: that needs a major version (2.0.0 or higher), not 1.3.0",
    )
    assert await catalog.store.get_version("orders", "1.3.0") is None
    await still_answers(catalog)


async def test_changed_modes_published_as_patch_are_refused(catalog: Catalog) -> None:
    await catalog.publish(agent_card())
    changed = agent_card("Orders", "1.0.1", skill("search", outputModes=["application/json"]))
    response = await catalog.publish(changed)
    assert_refused(
        response,
        409,
        "INVALID_INPUT",
        "version_understates_change",
        "skill 'search' changed its output modes from ['text/plain'] to ['application/json']: "
        "that needs a major version (2.0.0 or higher), not 1.0.1",
    )


async def test_an_added_skill_published_as_patch_is_refused(catalog: Catalog) -> None:
    await catalog.publish(agent_card())
    response = await catalog.publish(agent_card("Orders", "1.0.1", skill("search"), skill("track")))
    assert_refused(
        response,
        409,
        "INVALID_INPUT",
        "version_understates_change",
        "skill 'track' was added: that needs a minor version (1.1.0 or higher), not 1.0.1",
    )


@pytest.mark.reason("invalid_version")
async def test_a_card_version_that_is_not_semver_is_invalid_version(catalog: Catalog) -> None:
    response = await catalog.publish(agent_card(version="v1.0"))
    assert_refused(
        response,
        400,
        "INVALID_INPUT",
        "invalid_version",
        "the card's version: 'v1.0' is not a semantic version (MAJOR.MINOR.PATCH): drop the "
        "leading 'v'",
    )
    await still_answers(catalog)


@pytest.mark.reason("invalid_card")
async def test_a_card_failing_lint_is_invalid_card_with_the_findings(catalog: Catalog) -> None:
    card = agent_card(defaultInputModes=["text"])
    response = await catalog.publish(card)
    assert_refused(
        response,
        400,
        "INVALID_INPUT",
        "invalid_card",
        "the card fails lint rule mode_not_mime at defaultInputModes[0]: 'text' is a short "
        "name, not a MIME type: write 'text/plain'",
    )
    findings = response.json()["findings"]
    assert {"rule": "mode_not_mime", "severity": "error"}.items() <= findings[0].items()
    assert "auth_not_declared" in [f["rule"] for f in findings]
    await still_answers(catalog)


async def test_a_card_that_is_no_agent_card_is_invalid_card(catalog: Catalog) -> None:
    response = await catalog.publish({"version": "1.0.0", "name": "x"})
    error = error_of(response)
    assert response.status_code == 400
    assert error["errorReason"] == "invalid_card"
    assert error["errorMessage"].startswith(
        "the card fails lint rule invalid_card at $: not a valid A2A AgentCard: "
    )
    assert [f["rule"] for f in response.json()["findings"]] == ["invalid_card"]


@pytest.mark.reason("invalid_agent_name")
async def test_a_name_in_capitals_is_refused_naming_the_lowercase_form(catalog: Catalog) -> None:
    await catalog.publish(agent_card())
    response = await catalog.publish(agent_card(version="1.0.1"), name="Orders")
    assert_refused(
        response,
        400,
        "INVALID_INPUT",
        "invalid_agent_name",
        "agent names are lowercase: use 'orders', not 'Orders'",
    )
    await still_answers(catalog)


async def test_a_card_name_that_gives_no_catalog_name_is_refused(catalog: Catalog) -> None:
    response = await catalog.publish(agent_card("注文"))
    assert error_of(response)["errorReason"] == "invalid_agent_name"


@pytest.mark.reason("name_not_owned")
async def test_another_publishers_name_is_name_not_owned(catalog: Catalog) -> None:
    await catalog.publish(agent_card())
    response = await catalog.publish(agent_card(version="1.0.1"), label="rival-team")
    assert_refused(
        response, 403, "AUTH_REQUIRED", "name_not_owned", "'orders' is owned by another publisher"
    )
    await still_answers(catalog)


async def test_a_name_outside_the_publishers_patterns_is_name_not_owned(catalog: Catalog) -> None:
    response = await catalog.publish(agent_card(), label="billing-team")
    assert_refused(
        response,
        403,
        "AUTH_REQUIRED",
        "name_not_owned",
        "this key may not publish 'orders' (its names: billing*)",
    )


async def test_a_caller_key_cannot_publish(catalog: Catalog) -> None:
    response = await catalog.publish(agent_card(), label="shop")
    assert_refused(
        response,
        403,
        "AUTH_REQUIRED",
        "name_not_owned",
        "a caller key cannot publish: use a publisher key",
    )


async def test_an_admin_publishes_any_name_and_owns_it(catalog: Catalog) -> None:
    response = await catalog.publish(agent_card("Weather"), label="admin")
    assert response.status_code == 201
    assert response.json()["entry"]["owner"] == "admin"


@pytest.mark.reason("invalid_catalog_request")
async def test_unknown_fields_are_refused_naming_them(catalog: Catalog) -> None:
    response = await catalog.post("/v0/publish", {"card": agent_card(), "tags": [], "force": 1})
    assert_refused(
        response,
        400,
        "INVALID_INPUT",
        "invalid_catalog_request",
        "unknown field(s) 'force', 'tags': a publish request has 'card' or 'url', and "
        "optionally 'name'",
    )
    await still_answers(catalog)


async def test_malformed_json_is_invalid_catalog_request(catalog: Catalog) -> None:
    response = await catalog.http.post(
        catalog.url + "/v0/publish", content=b'{"card": {', headers=catalog.auth("admin")
    )
    error = assert_refused(
        response,
        400,
        "INVALID_INPUT",
        "invalid_catalog_request",
        "Parse error: the body is not JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 11 (char 10).",
    )
    assert error["retriable"] is False
    await still_answers(catalog)


async def test_a_json_array_body_is_invalid_catalog_request(catalog: Catalog) -> None:
    response = await catalog.post("/v0/publish", [agent_card()])
    assert_refused(
        response,
        400,
        "INVALID_INPUT",
        "invalid_catalog_request",
        "the body must be a JSON object ({'card': ...} or {'url': ...}), not an array",
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "give exactly one of 'card' (the card JSON) or 'url'"),
        (
            {"card": agent_card(), "url": "http://127.0.0.1:1/"},
            "give exactly one of 'card' (the card JSON) or 'url'",
        ),
        ({"card": "{}"}, "'card' must be a JSON object (the AgentCard)"),
        ({"url": 5}, "'url' must be a string"),
        ({"url": "ftp://agent/"}, "'url' must be an absolute http:// or https:// URL"),
        ({"url": "http://me:pw@127.0.0.1:1/"}, "'url' must not carry a user name or password"),
        ({"url": "http://127.0.0.1:1/?x=1"}, "'url' must not carry a query or a fragment"),
    ],
)
async def test_bad_publish_bodies_are_named(
    catalog: Catalog, body: dict[str, Any], message: str
) -> None:
    response = await catalog.post("/v0/publish", body)
    assert_refused(response, 400, "INVALID_INPUT", "invalid_catalog_request", message)


@pytest.mark.reason("card_too_large")
async def test_a_huge_card_is_card_too_large_without_being_read(catalog: Catalog) -> None:
    huge = agent_card(description="x" * (1024 * 1024))
    started = time.perf_counter()
    response = await catalog.publish(huge)
    assert time.perf_counter() - started < 5
    assert_refused(
        response,
        413,
        "INVALID_INPUT",
        "card_too_large",
        "the request body is larger than the catalog accepts (at most 262144 bytes)",
    )
    assert response.headers["connection"] == "close"
    await still_answers(catalog)


async def test_a_body_without_a_length_is_counted_as_it_arrives(catalog: Catalog) -> None:
    sent: list[int] = []

    async def chunks() -> AsyncIterator[bytes]:
        for index in range(1024):
            sent.append(index)
            yield b"x" * 1024

    app = create_catalog_app(catalog.store)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://catalog") as http:
        response = await http.post("/v0/publish", content=chunks(), headers=catalog.auth("admin"))
        assert response.status_code == 413
        assert error_of(response)["errorReason"] == "card_too_large"
        assert len(sent) < 300  # reading stopped at the limit, not at the end
        assert (await http.get("/v0/agents", headers=catalog.auth("admin"))).status_code == 200


async def test_the_size_limit_is_configurable(tmp_path: Path) -> None:
    async with served_catalog(tmp_path, max_card_bytes=1000) as small:
        response = await small.publish(agent_card(description="y" * 1000))
        assert response.status_code == 413
        assert error_of(response)["errorMessage"] == (
            "the request body is larger than the catalog accepts (at most 1000 bytes)"
        )


# ------------------------------------------------------------------ by URL


async def test_a_card_published_by_url_is_fetched_from_the_well_known_path(
    catalog: Catalog,
) -> None:
    async with card_server(agent_card()) as (url, agent):
        response = await catalog.post("/v0/publish", {"url": url + "/"}, "orders-team")
    assert response.status_code == 201, response.text
    entry = response.json()["entry"]
    assert entry["cardUrl"] == url + "/.well-known/agent-card.json"
    assert entry["card"]["url"] == url + "/"
    assert agent.requested == ["/.well-known/agent-card.json"]


async def test_the_legacy_well_known_path_is_tried_second(catalog: Catalog) -> None:
    async with card_server() as (url, agent):
        agent.routes["/.well-known/agent.json"] = (200, json.dumps(agent_card()).encode())
        response = await catalog.post("/v0/publish", {"url": url}, "orders-team")
    assert response.status_code == 201, response.text
    assert response.json()["entry"]["cardUrl"] == url + "/.well-known/agent.json"
    assert agent.requested == ["/.well-known/agent-card.json", "/.well-known/agent.json"]


CARD = "/.well-known/agent-card.json"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.reason("card_fetch_failed")
async def test_an_agent_that_does_not_answer_is_card_fetch_failed(catalog: Catalog) -> None:
    port = closed_port()
    response = await catalog.post("/v0/publish", {"url": f"http://127.0.0.1:{port}/"})
    error = assert_refused(
        response,
        502,
        "UPSTREAM_UNAVAILABLE",
        "card_fetch_failed",
        "could not fetch the agent's card from /.well-known/agent-card.json: the agent did not "
        "accept the connection",
    )
    assert error["retriable"] is True
    assert str(port) not in response.text
    await still_answers(catalog)


@pytest.mark.parametrize(
    ("routes", "problem"),
    [
        (
            {},
            "neither /.well-known/agent-card.json nor /.well-known/agent.json is there (HTTP 404)",
        ),
        ({"/.well-known/agent-card.json": (500, b"{}")}, "the agent answered HTTP 500"),
        ({"/.well-known/agent-card.json": (200, b"<html>")}, "the agent's answer is not JSON"),
        (
            {"/.well-known/agent-card.json": (200, b"[1]")},
            "the agent's answer is not a JSON object",
        ),
    ],
)
async def test_an_agent_without_a_usable_card_is_card_fetch_failed(
    catalog: Catalog, routes: dict[str, tuple[int, bytes]], problem: str
) -> None:
    async with card_server() as (url, agent):
        agent.routes.update(routes)
        response = await catalog.post("/v0/publish", {"url": url})
    assert_refused(
        response,
        502,
        "UPSTREAM_UNAVAILABLE",
        "card_fetch_failed",
        f"could not fetch the agent's card from /.well-known/agent-card.json: {problem}",
    )


async def test_a_fetch_that_takes_too_long_is_card_fetch_failed(tmp_path: Path) -> None:
    async with served_catalog(tmp_path, fetch_timeout=0.3) as catalog:
        async with card_server() as (url, agent):
            agent.routes["/.well-known/agent-card.json"] = (0, b"{}")
            response = await catalog.post("/v0/publish", {"url": url})
        assert error_of(response)["errorMessage"] == (
            "could not fetch the agent's card from /.well-known/agent-card.json: no complete "
            "answer within 0.3 s"
        )
        await still_answers(catalog)


async def test_a_fetched_card_over_the_limit_is_card_too_large(catalog: Catalog) -> None:
    huge = json.dumps(agent_card(description="z" * (1024 * 1024))).encode()
    async with card_server() as (url, agent):
        agent.routes["/.well-known/agent-card.json"] = (200, huge)
        response = await catalog.post("/v0/publish", {"url": url})
    assert_refused(
        response,
        413,
        "INVALID_INPUT",
        "card_too_large",
        "the fetched card is larger than the catalog accepts (at most 262144 bytes)",
    )


# ------------------------------------------------------------------ helpers


def test_the_card_url_of_a_card_is_its_hosts_well_known_path() -> None:
    assert card_url_of({"url": "https://u:p@agent.example:8443/a2a/v1"}) == (
        "https://agent.example:8443/.well-known/agent-card.json"
    )
    assert card_url_of({"url": "http://[::1]/"}) == "http://[::1]/.well-known/agent-card.json"
    assert card_url_of({"url": "not a url"}) is None
    assert card_url_of({}) is None


def test_a_request_parses_to_the_wire_model() -> None:
    request = parse_publish_request({"url": "http://127.0.0.1:1/", "name": "orders"})
    assert (request.url, request.name, request.card) == ("http://127.0.0.1:1/", "orders", None)


async def test_of_two_publishers_racing_for_a_new_name_exactly_one_gets_it(
    catalog: Catalog,
) -> None:
    first, second = await asyncio.gather(
        catalog.publish(agent_card(), label="orders-team"),
        catalog.publish(agent_card(), label="rival-team"),
    )
    assert sorted([first.status_code, second.status_code]) == [201, 403]
    loser = first if first.status_code == 403 else second
    assert error_of(loser)["errorMessage"] == "'orders' is owned by another publisher"
    versions = await catalog.store.versions_of("orders")
    assert len(versions) == 1

"""Keys, roles and visibility: who sees and publishes what, and that hidden names look
exactly like missing ones."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from llamon_agent.catalog.access import (
    ANONYMOUS,
    Caller,
    hash_key,
    key_from_headers,
    new_key,
    pattern_matches,
    pattern_problem,
)
from tests._support.catalog_app import Catalog, agent_card, served_catalog


@pytest.fixture
async def catalog(tmp_path: Path) -> Any:
    async with served_catalog(tmp_path) as served:
        await served.publish(agent_card("Orders"))
        await served.publish(agent_card("Orders Archive"))
        await served.publish(agent_card("Cart"), name="shop/cart")
        await served.publish(agent_card("Billing"), label="billing-team")
        yield served


# ------------------------------------------------------------------ keys and patterns


def test_a_new_key_is_lcat_and_43_urlsafe_characters_stored_as_sha256() -> None:
    key = new_key()
    assert re.fullmatch(r"lcat_[A-Za-z0-9_-]{43}", key)
    assert new_key() != key
    assert re.fullmatch(r"[0-9a-f]{64}", hash_key(key))
    assert hash_key(key) == hash_key(key)


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("orders", "orders", True),
        ("orders", "orders-archive", False),
        ("orders*", "orders-archive", True),
        ("shop/*", "shop/cart", True),
        ("shop/*", "shop", False),
        ("*", "shop/cart", True),
        ("order?", "orders", True),
        ("order?", "order", False),
        ("[a]*", "a", False),  # only * and ? are special
        ("o.ders", "orders", False),
    ],
)
def test_patterns_are_globs_of_star_and_question_mark(
    pattern: str, name: str, matches: bool
) -> None:
    assert pattern_matches(pattern, name) is matches


def test_pattern_problems_are_named() -> None:
    assert pattern_problem("shop/*") is None
    assert pattern_problem("") == "a name pattern is empty"
    assert pattern_problem("Orders") == (
        "'Orders' is not a name pattern: use lowercase letters, digits, '-', '/' and the "
        "wildcards '*' and '?'"
    )


def test_roles() -> None:
    admin = Caller("admin", "root")
    publisher = Caller("publisher", "team", ("orders*",))
    caller = Caller("caller", "shop", ("orders",))
    assert admin.visible is None
    assert admin.may_see("anything")
    assert admin.may_publish("anything", "someone-else")
    assert publisher.may_see("orders-archive")
    assert not publisher.may_see("billing")
    assert publisher.may_publish("orders", None)
    assert publisher.may_publish("orders", "team")
    assert not publisher.may_publish("orders", "rival")
    assert not publisher.may_publish("billing", None)
    assert caller.may_see("orders")
    assert not caller.may_see("orders-archive")
    assert not caller.may_publish("orders", None)
    assert ANONYMOUS.visible is None


@pytest.mark.parametrize(
    ("headers", "key"),
    [
        ({"authorization": "Bearer lcat_abc"}, "lcat_abc"),
        ({"authorization": "bearer  lcat_abc "}, "lcat_abc"),
        ({"x-api-key": "lcat_abc"}, "lcat_abc"),
        ({"authorization": "Basic dTpw", "x-api-key": "lcat_abc"}, "lcat_abc"),
        ({"authorization": "Basic dTpw"}, None),
        ({"x-api-key": "  "}, None),
        ({}, None),
    ],
)
def test_the_key_is_read_from_bearer_or_x_api_key(headers: dict[str, str], key: str | None) -> None:
    assert key_from_headers(headers) == key


# ------------------------------------------------------------------ over HTTP


@pytest.mark.reason("catalog_key_required")
async def test_no_key_is_catalog_key_required_with_www_authenticate(catalog: Catalog) -> None:
    response = await catalog.get("/v0/agents", None)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="llamon-catalog"'
    error = response.json()["error"]
    assert (error["errorCode"], error["errorReason"], error["retriable"]) == (
        "AUTH_REQUIRED",
        "catalog_key_required",
        False,
    )
    assert error["errorMessage"] == (
        "no catalog key was sent: send it in an Authorization header as a Bearer token, or in "
        "an X-API-Key header"
    )
    assert (await catalog.get("/v0/agents", "shop")).status_code == 200


async def test_an_unknown_key_is_catalog_key_required(catalog: Catalog) -> None:
    unknown = new_key()
    response = await catalog.http.get(
        catalog.url + "/v0/agents", headers={"Authorization": f"Bearer {unknown}"}
    )
    assert response.status_code == 401
    assert response.json()["error"]["errorMessage"] == (
        "the catalog key is not known: send it in an Authorization header as a Bearer token, "
        "or in an X-API-Key header"
    )
    assert unknown not in response.text
    publish = await catalog.http.post(
        catalog.url + "/v0/publish", json={"card": agent_card()}, headers={"X-API-Key": unknown}
    )
    assert publish.status_code == 401


async def test_x_api_key_works_like_bearer(catalog: Catalog) -> None:
    response = await catalog.http.get(
        catalog.url + "/v0/agents", headers={"X-API-Key": catalog.keys["shop"]}
    )
    assert response.status_code == 200


async def names(catalog: Catalog, label: str) -> list[str]:
    response = await catalog.get("/v0/agents", label)
    assert response.status_code == 200, response.text
    return [entry["name"] for entry in response.json()["agents"]]


async def test_each_key_sees_only_its_names(catalog: Catalog) -> None:
    assert await names(catalog, "admin") == ["billing", "orders", "orders-archive", "shop/cart"]
    assert await names(catalog, "shop") == ["orders", "shop/cart"]
    assert await names(catalog, "orders-team") == ["orders", "orders-archive", "shop/cart"]
    assert await names(catalog, "billing-team") == ["billing"]
    assert await names(catalog, "outsider") == []


@pytest.mark.reason("agent_not_found")
async def test_a_hidden_name_is_answered_exactly_like_a_missing_one(catalog: Catalog) -> None:
    for path in ("/v0/agents/{}/versions", "/v0/agents/{}/versions/1.0.0"):
        hidden = await catalog.get(path.format("billing"), "shop")
        missing = await catalog.get(path.format("nothing"), "shop")
        assert hidden.status_code == missing.status_code == 404
        hidden_error = hidden.json()["error"]
        missing_error = missing.json()["error"]
        assert hidden_error["errorReason"] == "agent_not_found"
        assert hidden_error["errorCode"] == "NOT_FOUND"
        assert hidden_error["errorMessage"] == "no agent named 'billing'"
        assert missing_error["errorMessage"] == "no agent named 'nothing'"
        assert hidden_error | {"errorMessage": ""} == missing_error | {"errorMessage": ""}
        assert set(hidden.headers) == set(missing.headers)
    latest = await catalog.get("/v0/agents/billing/versions/latest", "shop")
    assert latest.json()["error"]["errorMessage"] == "no agent named 'billing'"
    assert (await catalog.get("/v0/agents/billing/versions", "billing-team")).status_code == 200


async def test_a_hidden_name_cannot_have_its_status_changed(catalog: Catalog) -> None:
    response = await catalog.post(
        "/v0/agents/billing/versions/1.0.0/status", {"status": "deprecated"}, "orders-team"
    )
    assert response.status_code == 404
    assert response.json()["error"]["errorMessage"] == "no agent named 'billing'"


async def test_an_open_catalog_lets_keyless_reads_see_every_name(tmp_path: Path) -> None:
    async with served_catalog(tmp_path, open_read=True) as catalog:
        await catalog.publish(agent_card("Orders"))
        await catalog.publish(agent_card("Billing"), label="billing-team")
        assert await names(catalog, "outsider") == ["billing", "orders"]
        keyless = await catalog.get("/v0/agents", None)
        assert [e["name"] for e in keyless.json()["agents"]] == ["billing", "orders"]
        one = await catalog.get("/v0/agents/billing/versions/latest", None)
        assert one.status_code == 200
        write = await catalog.post("/v0/publish", {"card": agent_card("Weather")}, None)
        assert write.status_code == 401
        assert write.json()["error"]["errorReason"] == "catalog_key_required"
        wrong = await catalog.http.get(
            catalog.url + "/v0/agents", headers={"X-API-Key": "lcat_" + "x" * 43}
        )
        assert wrong.status_code == 401


async def test_keys_never_appear_in_responses_or_log_lines(
    catalog: Catalog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    texts: list[str] = []
    for label in catalog.keys:
        for response in (
            await catalog.get("/v0/agents", label),
            await catalog.get("/v0/agents/orders/versions/9.9.9", label),
            await catalog.publish(agent_card("Orders", "1.0.1"), label=label),
            await catalog.post("/v0/publish", [1], label),
            await catalog.http.post(
                catalog.url + "/v0/publish",
                content=b"{",
                headers={"X-API-Key": catalog.keys[label]},
            ),
        ):
            texts.append(response.text + str(response.headers))
    unknown = new_key()
    response = await catalog.http.get(catalog.url + "/v0/agents", headers={"X-API-Key": unknown})
    texts.append(response.text)
    everything = "\n".join(texts) + caplog.text
    for key in [*catalog.keys.values(), unknown]:
        assert key not in everything
        assert hash_key(key) not in everything


async def test_the_store_keeps_only_hashes(catalog: Catalog) -> None:
    stored = await catalog.store.list_keys()
    hashes = {key.key_hash for key in stored}
    assert hashes == {hash_key(key) for key in catalog.keys.values()}
    assert not hashes & set(catalog.keys.values())


async def test_a_request_with_both_headers_uses_bearer(catalog: Catalog) -> None:
    response = await catalog.http.get(
        catalog.url + "/v0/agents",
        headers={"Authorization": f"Bearer {catalog.keys['shop']}", "X-API-Key": "lcat_bad"},
    )
    assert response.status_code == 200
    assert isinstance(response, httpx.Response)

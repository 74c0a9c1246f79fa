"""The catalog's routes through a real server: search, versions, status changes, the
OpenAPI description, query checks, and failures of the database or of the service itself."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Route

from llamon_agent.catalog.app import create_catalog_app
from llamon_agent.catalog.openapi import ROUTES
from llamon_agent.catalog.records import Health
from llamon_agent.catalog.store_sqlite import catalog_path
from llamon_agent.client.catalog_wire import CatalogEntry, SearchPage, VersionList
from tests._support.a2a_server import running_server
from tests._support.catalog_app import Catalog, agent_card, served_catalog, skill
from tests._support.catalog_stores import open_test_catalog


@pytest.fixture
async def catalog(tmp_path: Path) -> Any:
    async with served_catalog(tmp_path) as served:
        yield served


def error_of(response: httpx.Response) -> dict[str, Any]:
    error: dict[str, Any] = response.json()["error"]
    return error


async def publish_orders(catalog: Catalog) -> None:
    """orders 1.0.0, 1.1.0 (adds track), 2.0.0 (drops cancel); billing 0.1.0."""
    for version, skills in (
        ("1.0.0", (skill("search"), skill("cancel"))),
        ("1.1.0", (skill("search"), skill("cancel"), skill("track", tags=["shipping"]))),
        ("2.0.0", (skill("search"), skill("track", tags=["shipping"]))),
    ):
        response = await catalog.publish(agent_card("Orders", version, *skills))
        assert response.status_code == 201, response.text
    billing = agent_card(
        "Billing", "0.1.0", skill("invoice", inputModes=["application/json"], tags=["money"])
    )
    assert (await catalog.publish(billing, label="billing-team")).status_code == 201


def found(response: httpx.Response) -> list[tuple[str, str]]:
    assert response.status_code == 200, response.text
    page = SearchPage.model_validate(response.json())
    assert page.metadata.count == len(page.agents)
    return [(entry.name, entry.version) for entry in page.agents]


# ------------------------------------------------------------------ public routes


async def test_healthz_needs_no_key(catalog: Catalog) -> None:
    response = await catalog.get("/healthz", None)
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


async def test_openapi_is_3_1_and_lists_every_route(catalog: Catalog) -> None:
    response = await catalog.get("/openapi.json", None)
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"] == "3.1.0"
    assert document["info"]["title"] == "llamon Agent Catalog"
    served = {(method, path) for path, item in document["paths"].items() for method in item}
    assert served == {
        ("get", "/v0/agents"),
        ("get", "/v0/agents/{name}/versions"),
        ("get", "/v0/agents/{name}/versions/{version}"),
        ("post", "/v0/publish"),
        ("post", "/v0/agents/{name}/versions/{version}/status"),
        ("get", "/healthz"),
        ("get", "/openapi.json"),
    }
    app_routes = {
        (method.lower(), route.path.replace("{name:path}", "{name}"))
        for route in create_catalog_app(catalog.store).routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }
    assert app_routes == served == {(route.method, route.path) for route in ROUTES}
    schemas = document["components"]["schemas"]
    refs: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("$ref"), str):
                refs.append(value["$ref"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(document)
    assert refs
    for ref in refs:
        assert ref.startswith("#/components/schemas/")
        assert ref.rsplit("/", 1)[1] in schemas
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert operation["responses"], (method, path)
            for parameter in operation.get("parameters", []):
                assert parameter["in"] in ("path", "query")
                if parameter["in"] == "path":
                    assert "{" + parameter["name"] + "}" in path
                    assert parameter["required"] is True
    assert "isLatest" in schemas["CatalogEntry"]["properties"]
    assert "errorReason" in schemas["ProtocolErrorData"]["properties"]
    publish = document["paths"]["/v0/publish"]["post"]
    assert set(publish["responses"]) >= {"201", "400", "401", "403", "409", "413", "502"}


async def test_an_unknown_route_is_answered_as_json(catalog: Catalog) -> None:
    response = await catalog.get("/v0/nothing")
    assert response.status_code == 404
    assert error_of(response)["errorReason"] == "invalid_catalog_request"
    wrong_method = await catalog.http.delete(catalog.url + "/v0/publish")
    assert wrong_method.status_code == 405
    assert error_of(wrong_method)["errorMessage"] == "DELETE is not allowed on /v0/publish"


# ------------------------------------------------------------------ search


async def test_search_gives_the_latest_version_of_each_agent_by_default(catalog: Catalog) -> None:
    await publish_orders(catalog)
    assert found(await catalog.get("/v0/agents")) == [("billing", "0.1.0"), ("orders", "2.0.0")]
    everything = found(await catalog.get("/v0/agents", versions="all"))
    assert everything == [
        ("billing", "0.1.0"),
        ("orders", "2.0.0"),
        ("orders", "1.1.0"),
        ("orders", "1.0.0"),
    ]


async def test_search_by_skill_tag_mode_and_text(catalog: Catalog) -> None:
    await publish_orders(catalog)
    assert found(await catalog.get("/v0/agents", skill="cancel", versions="all")) == [
        ("orders", "1.1.0"),
        ("orders", "1.0.0"),
    ]
    assert found(await catalog.get("/v0/agents", tag="MONEY")) == [("billing", "0.1.0")]
    assert found(await catalog.get("/v0/agents", input_mode="application/json")) == [
        ("billing", "0.1.0")
    ]
    assert found(await catalog.get("/v0/agents", search="invoice")) == [("billing", "0.1.0")]
    assert found(await catalog.get("/v0/agents", skill="nothing")) == []


async def test_search_pages_with_a_cursor(catalog: Catalog) -> None:
    await publish_orders(catalog)
    seen: list[tuple[str, str]] = []
    cursor = ""
    for _ in range(5):
        response = await catalog.get("/v0/agents", versions="all", limit="1", cursor=cursor)
        seen += found(response)
        cursor = response.json()["metadata"]["nextCursor"] or ""
        if not cursor:
            break
    assert seen == found(await catalog.get("/v0/agents", versions="all"))


async def test_search_by_status_and_health(catalog: Catalog) -> None:
    await publish_orders(catalog)
    await catalog.post("/v0/agents/billing/versions/0.1.0/status", {"status": "deprecated"})
    assert found(await catalog.get("/v0/agents")) == [("orders", "2.0.0")]
    assert found(await catalog.get("/v0/agents", status="deprecated")) == [("billing", "0.1.0")]
    assert found(await catalog.get("/v0/agents", status="any")) == [
        ("billing", "0.1.0"),
        ("orders", "2.0.0"),
    ]
    await catalog.store.record_health(
        "orders",
        "2.0.0",
        Health("unhealthy", 1.0, None, "UPSTREAM_UNAVAILABLE", "network_error", 3),
    )
    assert found(await catalog.get("/v0/agents")) == []
    response = await catalog.get("/v0/agents", health="any")
    assert found(response) == [("orders", "2.0.0")]
    health = response.json()["agents"][0]["health"]
    assert health["state"] == "unhealthy"
    assert health["errorReason"] == "network_error"
    assert health["failures"] == 3
    assert health["checkedAt"] == "1970-01-01T00:00:01Z"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"state": "x"},
            "unknown query parameter 'state' (this route takes: search, skill, tag, input_mode, "
            "output_mode, status, health, versions, limit, cursor)",
        ),
        (
            {"status": "gone"},
            "query parameter 'status' must be one of active, deprecated, any, not 'gone'",
        ),
        ({"health": "good"}, "query parameter 'health' must be one of any, not 'good'"),
        ({"versions": "3"}, "query parameter 'versions' must be one of latest, all, not '3'"),
        (
            {"limit": "0"},
            "query parameter 'limit' must be a whole number from 1 to 100, not '0'",
        ),
        (
            {"limit": "101"},
            "query parameter 'limit' must be a whole number from 1 to 100, not '101'",
        ),
        (
            {"limit": "ten"},
            "query parameter 'limit' must be a whole number from 1 to 100, not 'ten'",
        ),
        (
            {"cursor": "bogus"},
            "query parameter 'cursor' is not a cursor this catalog gave: search again without it",
        ),
    ],
)
async def test_bad_search_parameters_are_named(
    catalog: Catalog, params: dict[str, str], message: str
) -> None:
    response = await catalog.get("/v0/agents", **params)
    assert response.status_code == 400
    error = error_of(response)
    assert (error["errorCode"], error["errorReason"]) == (
        "INVALID_INPUT",
        "invalid_catalog_request",
    )
    assert error["errorMessage"] == message
    assert (await catalog.get("/v0/agents")).status_code == 200


async def test_a_repeated_parameter_is_refused(catalog: Catalog) -> None:
    response = await catalog.http.get(
        catalog.url + "/v0/agents?skill=a&skill=b", headers=catalog.auth("admin")
    )
    assert error_of(response)["errorMessage"] == "query parameter 'skill' is given more than once"


# ------------------------------------------------------------------ versions


async def test_versions_are_listed_newest_first_and_filtered_by_range(catalog: Catalog) -> None:
    await publish_orders(catalog)
    response = await catalog.get("/v0/agents/orders/versions", "shop")
    listed = VersionList.model_validate(response.json())
    assert listed.name == "orders"
    assert [e.version for e in listed.versions] == ["2.0.0", "1.1.0", "1.0.0"]
    assert [e.change for e in listed.versions] == ["major", "minor", "initial"]
    ranged = await catalog.get("/v0/agents/orders/versions", "shop", range="^1.0")
    assert [e["version"] for e in ranged.json()["versions"]] == ["1.1.0", "1.0.0"]


@pytest.mark.reason("invalid_version")
async def test_an_invalid_range_is_invalid_version(catalog: Catalog) -> None:
    await publish_orders(catalog)
    response = await catalog.get("/v0/agents/orders/versions", "shop", range="^^2")
    assert response.status_code == 400
    error = error_of(response)
    assert (error["errorCode"], error["errorReason"]) == ("INVALID_INPUT", "invalid_version")
    assert error["errorMessage"] == (
        "query parameter 'range': '^^2' is not a version range (e.g. 2.1.0, ^2.1, ~2.1, >=2 <3, "
        "2.x)"
    )
    bad_path = await catalog.get("/v0/agents/orders/versions/1.0", "shop")
    assert error_of(bad_path)["errorReason"] == "invalid_version"
    assert (await catalog.get("/v0/agents/orders/versions", "shop")).status_code == 200


@pytest.mark.reason("version_not_found")
async def test_a_missing_version_is_version_not_found(catalog: Catalog) -> None:
    await publish_orders(catalog)
    response = await catalog.get("/v0/agents/orders/versions/3.0.0", "shop")
    assert response.status_code == 404
    error = error_of(response)
    assert (error["errorCode"], error["errorReason"]) == ("NOT_FOUND", "version_not_found")
    assert error["errorMessage"] == "'orders' has no version 3.0.0"
    ranged = await catalog.get("/v0/agents/orders/versions", "shop", range="^3")
    assert ranged.status_code == 404
    assert error_of(ranged)["errorMessage"] == "'orders' has no version in the range '^3'"
    assert (await catalog.get("/v0/agents/orders/versions/2.0.0", "shop")).status_code == 200


async def test_one_version_and_latest(catalog: Catalog) -> None:
    await publish_orders(catalog)
    response = await catalog.get("/v0/agents/orders/versions/1.1.0", "shop")
    entry = CatalogEntry.model_validate(response.json())
    assert (entry.name, entry.version, entry.is_latest) == ("orders", "1.1.0", False)
    assert [s.id for s in entry.agent_card().skills] == ["search", "cancel", "track"]
    latest = await catalog.get("/v0/agents/orders/versions/latest", "shop")
    assert latest.json()["version"] == "2.0.0"
    assert latest.json()["isLatest"] is True


async def test_an_agent_without_an_active_version_has_no_latest(catalog: Catalog) -> None:
    await catalog.publish(agent_card())
    await catalog.post("/v0/agents/orders/versions/1.0.0/status", {"status": "deprecated"})
    response = await catalog.get("/v0/agents/orders/versions/latest", "shop")
    assert response.status_code == 404
    assert error_of(response)["errorMessage"] == (
        "'orders' has no active version to be its latest: ask for a version"
    )
    assert (await catalog.get("/v0/agents/orders/versions/1.0.0", "shop")).status_code == 200


async def test_an_upper_case_name_in_a_path_is_refused_naming_the_lowercase_form(
    catalog: Catalog,
) -> None:
    response = await catalog.get("/v0/agents/Orders/versions", "shop")
    assert response.status_code == 400
    assert error_of(response)["errorMessage"] == (
        "agent names are lowercase: use 'orders', not 'Orders'"
    )


# ------------------------------------------------------------------ status


async def test_deprecating_moves_latest_and_reactivating_moves_it_back(catalog: Catalog) -> None:
    await publish_orders(catalog)
    response = await catalog.post(
        "/v0/agents/orders/versions/2.0.0/status", {"status": "deprecated"}, "orders-team"
    )
    assert response.status_code == 200, response.text
    assert (response.json()["status"], response.json()["isLatest"]) == ("deprecated", False)
    latest = await catalog.get("/v0/agents/orders/versions/latest", "shop")
    assert latest.json()["version"] == "1.1.0"
    again = await catalog.post(
        "/v0/agents/orders/versions/2.0.0/status", {"status": "active"}, "orders-team"
    )
    assert again.json()["isLatest"] is True


async def test_deleted_versions_are_seen_by_an_admin_only(catalog: Catalog) -> None:
    await publish_orders(catalog)
    response = await catalog.post(
        "/v0/agents/orders/versions/1.0.0/status", {"status": "deleted"}, "orders-team"
    )
    assert response.json()["status"] == "deleted"
    shop = await catalog.get("/v0/agents/orders/versions", "shop")
    assert [e["version"] for e in shop.json()["versions"]] == ["2.0.0", "1.1.0"]
    gone = await catalog.get("/v0/agents/orders/versions/1.0.0", "shop")
    assert error_of(gone)["errorReason"] == "version_not_found"
    admin = await catalog.get("/v0/agents/orders/versions", "admin")
    assert [e["version"] for e in admin.json()["versions"]] == ["2.0.0", "1.1.0", "1.0.0"]
    assert (await catalog.get("/v0/agents/orders/versions/1.0.0", "admin")).status_code == 200


@pytest.mark.reason("invalid_status_change")
async def test_a_deleted_version_stays_deleted(catalog: Catalog) -> None:
    await catalog.publish(agent_card())
    path = "/v0/agents/orders/versions/1.0.0/status"
    await catalog.post(path, {"status": "deleted"}, "orders-team")
    response = await catalog.post(path, {"status": "active"}, "admin")
    assert response.status_code == 400
    error = error_of(response)
    assert (error["errorCode"], error["errorReason"]) == ("INVALID_INPUT", "invalid_status_change")
    assert error["errorMessage"] == (
        "'orders' 1.0.0 is deleted, and a deleted version stays deleted: publish a new version "
        "instead"
    )
    assert (await catalog.post(path, {"status": "deleted"}, "admin")).status_code == 200


async def test_only_the_owner_or_an_admin_changes_a_status(catalog: Catalog) -> None:
    await catalog.publish(agent_card())
    path = "/v0/agents/orders/versions/1.0.0/status"
    for label in ("shop", "rival-team"):
        response = await catalog.post(path, {"status": "deprecated"}, label)
        assert response.status_code == 403
        assert error_of(response)["errorMessage"] == (
            "only the publisher that owns 'orders' (or an admin) may change its versions"
        )
    assert (await catalog.post(path, {"status": "deprecated"}, "admin")).status_code == 200


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"status": "retired"},
            "'status' must be one of active, deprecated, deleted, not 'retired'",
        ),
        ({}, "'status' must be one of active, deprecated, deleted, not None"),
        (
            {"status": "deleted", "why": "x"},
            "unknown field(s) 'why': a status change has only 'status'",
        ),
        (["deleted"], 'the body must be a JSON object: {"status": "deprecated"}'),
    ],
)
async def test_bad_status_bodies_are_named(catalog: Catalog, body: Any, message: str) -> None:
    await catalog.publish(agent_card())
    response = await catalog.post("/v0/agents/orders/versions/1.0.0/status", body)
    assert response.status_code == 400
    assert error_of(response)["errorReason"] == "invalid_catalog_request"
    assert error_of(response)["errorMessage"] == message


async def test_a_status_change_of_a_missing_version_is_version_not_found(
    catalog: Catalog,
) -> None:
    await catalog.publish(agent_card())
    response = await catalog.post("/v0/agents/orders/versions/9.0.0/status", {"status": "deleted"})
    assert response.status_code == 404
    assert error_of(response)["errorReason"] == "version_not_found"


# ------------------------------------------------------------------ failures


async def test_a_locked_database_is_503_database_unavailable_then_answers_again(
    catalog: Catalog, tmp_path: Path
) -> None:
    blocker = sqlite3.connect(catalog_path(None, tmp_path), isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        response = await catalog.publish(agent_card())
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    error = error_of(response)
    assert (error["errorCode"], error["errorReason"], error["retriable"]) == (
        "UPSTREAM_UNAVAILABLE",
        "database_unavailable",
        True,
    )
    assert error["retryAfterMs"] == 1000
    assert str(tmp_path) not in response.text
    assert (await catalog.publish(agent_card())).status_code == 201


async def test_an_unexpected_failure_is_500_with_an_incident_id_and_no_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="llamon_agent.errors")
    async with open_test_catalog("sqlite", tmp_path) as store:
        app = create_catalog_app(store, open_read=True)
        async with running_server(app) as url, httpx.AsyncClient() as http:
            await store.close()  # every store call now fails with a RuntimeError
            response = await http.get(url + "/v0/agents")
            assert response.status_code == 500
            error = response.json()["error"]
            assert (error["errorCode"], error["errorReason"]) == (
                "INTERNAL_ERROR",
                "uncaught_server_error",
            )
            incident = error["incidentId"]
            assert error["errorMessage"] == f"Internal error (incident {incident})."
            assert "closed" not in response.text
            assert str(tmp_path) not in response.text
            assert (await http.get(url + "/healthz")).status_code == 200
    logged = [r for r in caplog.records if incident in r.getMessage()]
    assert len(logged) == 1
    assert "RuntimeError" in logged[0].getMessage()


class Prober:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def start(self) -> None:
        self.calls.append("start")

    async def stop(self) -> None:
        self.calls.append("stop")


async def test_the_prober_runs_while_the_app_serves(tmp_path: Path) -> None:
    prober = Prober()
    async with open_test_catalog("sqlite", tmp_path) as store:
        app = create_catalog_app(store, prober=prober, close_store=False)
        async with running_server(app) as url, httpx.AsyncClient() as http:
            assert (await http.get(url + "/healthz")).status_code == 200
            assert prober.calls == ["start"]
        assert prober.calls == ["start", "stop"]
        assert await store.versions_of("orders") == []  # not closed: not asked to


async def test_the_app_closes_the_store_when_asked(tmp_path: Path) -> None:
    async with open_test_catalog("sqlite", tmp_path) as store:
        async with running_server(create_catalog_app(store, close_store=True)):
            pass
        with pytest.raises(RuntimeError):
            await store.versions_of("orders")


def test_a_size_limit_below_one_byte_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_card_bytes must be a positive number of bytes"):
        create_catalog_app(None, max_card_bytes=0)  # type: ignore[arg-type]


# ------------------------------------------------------------------ both engines


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
async def test_publish_search_resolve_on_each_engine(tmp_path: Path, engine: str) -> None:
    async with served_catalog(tmp_path, engine) as catalog:
        await publish_orders(catalog)
        refused = await catalog.publish(agent_card("Orders", "2.1.0", skill("search")))
        assert error_of(refused)["errorReason"] == "version_understates_change"
        assert found(await catalog.get("/v0/agents", "shop", skill="track")) == [
            ("orders", "2.0.0")
        ]
        ranged = await catalog.get("/v0/agents/orders/versions", "shop", range="^1")
        assert [e["version"] for e in ranged.json()["versions"]] == ["1.1.0", "1.0.0"]
        hidden = await catalog.get("/v0/agents/billing/versions/latest", "shop")
        assert error_of(hidden)["errorReason"] == "agent_not_found"

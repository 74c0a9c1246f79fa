"""``CatalogClient`` against a real HTTP catalog stand-in on 127.0.0.1: resolution by
version and range, the mapping of every catalog answer to an exception, what is sent."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.types import AgentCard
from starlette.responses import PlainTextResponse

from llamon_agent.client import (
    AgentClient,
    CatalogClient,
    CatalogEntry,
    PublishResult,
    SearchPage,
)
from llamon_agent.client.auth import ApiKey, Bearer
from llamon_agent.client.catalog import parse_catalog_url
from llamon_agent.client.catalog_errors import CatalogRequestError
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode
from llamon_agent.exceptions import (
    ConfigValidationError,
    RegistryNotFoundError,
    RegistryTimeoutError,
    RegistryUnauthorizedError,
    RegistryUnavailableError,
)
from tests._support.a2a_server import running_server
from tests._support.catalog_fake import KEY, FakeCatalog, card_json


@pytest.fixture
def fake() -> FakeCatalog:
    catalog = FakeCatalog()
    catalog.add("orders", "1.4.0")
    catalog.add("orders", "2.0.0")
    catalog.add("orders", "2.1.0")
    catalog.add("orders", "2.3.0", status="deprecated")
    catalog.add("orders", "3.0.0", status="deleted")
    return catalog


@pytest.fixture
async def url(fake: FakeCatalog) -> AsyncIterator[str]:
    async with running_server(fake.app()) as base:
        yield base


@pytest.fixture
async def client(url: str, tmp_path: Path) -> AsyncIterator[CatalogClient]:
    async with CatalogClient(url, auth=KEY, cache_dir=tmp_path / "cache") as catalog:
        yield catalog


def _refused_port() -> str:
    """A loopback address where nothing listens (connection refused)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


# -- resolution -----------------------------------------------------------------------


async def test_a_range_resolves_to_the_highest_active_version_in_it(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    entry = await client.resolve_entry("orders", "^2")
    assert isinstance(entry, CatalogEntry)
    assert (entry.version, entry.status) == ("2.1.0", "active")
    assert fake.seen[-1].path == "/v0/agents/orders/versions"
    assert fake.seen[-1].params == {"range": "^2"}


async def test_a_range_with_only_deprecated_matches_resolves_to_the_highest_of_those(
    client: CatalogClient,
) -> None:
    entry = await client.resolve_entry("orders", "~2.3")
    assert (entry.version, entry.status) == ("2.3.0", "deprecated")


@pytest.mark.reason("version_not_found")
async def test_a_deleted_version_is_never_resolved(client: CatalogClient) -> None:
    with pytest.raises(RegistryNotFoundError) as raised:
        await client.resolve_entry("orders", "^3")
    assert raised.value.error_reason == "version_not_found"
    assert str(raised.value) == (
        "agent 'orders' (^3): no active or deprecated version in the range"
    )


async def test_latest_and_an_exact_version_ask_for_that_version(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    latest = await client.resolve_entry("orders")
    assert fake.seen[-1].path == "/v0/agents/orders/versions/latest"
    assert latest.version == "3.0.0"  # what the catalog calls latest
    exact = await client.resolve_entry("orders", "1.4.0")
    assert fake.seen[-1].path == "/v0/agents/orders/versions/1.4.0"
    assert exact.version == "1.4.0"


async def test_resolve_gives_the_card_as_an_agent_card(client: CatalogClient) -> None:
    card = await client.resolve("orders", "^1")
    assert isinstance(card, AgentCard)
    assert (card.name, card.version, card.url) == ("orders", "1.4.0", "http://127.0.0.1:1/")


async def test_a_namespaced_name_keeps_its_slash_in_the_path(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    fake.add("acme/orders", "1.2.5")
    entry = await client.resolve_entry("acme/orders", "~1.2")
    assert entry.version == "1.2.5"
    assert fake.seen[-1].path == "/v0/agents/acme/orders/versions"


@pytest.mark.reason("invalid_version")
async def test_an_invalid_range_is_refused_before_any_request(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    with pytest.raises(ConfigValidationError) as raised:
        await client.resolve_entry("orders", "^^2")
    assert isinstance(raised.value, CatalogRequestError)
    assert raised.value.error_reason == "invalid_version"
    assert str(raised.value).startswith("agent 'orders': '^^2' is not a version range")
    found = classify_exception(raised.value)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.INVALID_INPUT,
        "invalid_version",
        False,
    )
    assert fake.seen == []
    assert (await client.resolve_entry("orders", "^1")).version == "1.4.0"


@pytest.mark.reason("invalid_agent_name")
async def test_an_upper_case_name_is_refused_naming_the_lowercase_form(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    with pytest.raises(CatalogRequestError) as raised:
        await client.resolve_entry("Orders")
    assert raised.value.error_reason == "invalid_agent_name"
    assert str(raised.value) == (
        "'Orders' is not an agent name of the catalog: lowercase words joined by '-', "
        "optionally namespace/name; use 'orders'"
    )
    assert fake.seen == []


# -- the catalog's refusals -----------------------------------------------------------


@pytest.mark.reason("agent_not_found", "registry_not_found_error")
async def test_an_unknown_agent_raises_registry_not_found(client: CatalogClient) -> None:
    with pytest.raises(RegistryNotFoundError) as raised:
        await client.resolve_entry("ghost", "^1")
    error = raised.value
    assert (error.error_reason, error.http_status) == ("agent_not_found", 404)
    assert str(error) == "agent 'ghost' (^1): no agent 'ghost'"
    assert error.to_dict()["registry_reason"] == "agent_not_found"
    found = classify_exception(error)
    assert (found.code, found.reason) == (ErrorCode.NOT_FOUND, "registry_not_found_error")
    assert (await client.resolve_entry("orders", "^1")).version == "1.4.0"


@pytest.mark.reason("catalog_key_required", "registry_unauthorized_error")
async def test_a_wrong_key_raises_registry_unauthorized_without_naming_the_key(
    url: str, tmp_path: Path
) -> None:
    wrong = "lcat_" + "w" * 43
    async with CatalogClient(url, auth=wrong, cache_dir=tmp_path) as catalog:
        with pytest.raises(RegistryUnauthorizedError) as raised:
            await catalog.resolve_entry("orders")
    error = raised.value
    assert (error.error_reason, error.http_status) == ("catalog_key_required", 401)
    assert str(error) == "agent 'orders' (latest): send a catalog key"
    assert wrong not in repr(error.to_dict())
    found = classify_exception(error)
    assert (found.code, found.reason) == (ErrorCode.AUTH_REQUIRED, "registry_unauthorized_error")


@pytest.mark.reason("name_not_owned")
async def test_a_name_not_owned_raises_registry_unauthorized(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    fake.fail(403, "name_not_owned", "your key may not publish 'billing'")
    with pytest.raises(RegistryUnauthorizedError) as raised:
        await client.publish(card_json("billing", "1.0.0"))
    assert (raised.value.error_reason, raised.value.http_status) == ("name_not_owned", 403)
    assert str(raised.value) == "publish: your key may not publish 'billing'"
    assert (await client.publish(card_json("billing", "1.0.0"))).created


@pytest.mark.reason("invalid_card")
async def test_an_invalid_card_raises_config_validation_with_the_findings(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    finding = {"rule": "skill-description", "severity": "error", "path": "skills[0]",
               "message": "a skill needs a description"}  # fmt: skip
    fake.fail(400, "invalid_card", "the card fails 1 lint rule", findings=[finding])
    with pytest.raises(ConfigValidationError) as raised:
        await client.publish(card_json("orders", "9.0.0"))
    error = raised.value
    assert isinstance(error, CatalogRequestError)
    assert (error.error_reason, error.http_status) == ("invalid_card", 400)
    assert [f.to_wire() for f in error.findings] == [finding]
    found = classify_exception(error)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.INVALID_INPUT,
        "invalid_card",
        False,
    )


@pytest.mark.reason("version_understates_change")
async def test_an_understated_version_raises_with_the_catalogs_message(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    said = "skill 'search' was removed: that needs a major version (2.0.0 or higher), not 1.3.0"
    fake.fail(409, "version_understates_change", said)
    with pytest.raises(CatalogRequestError) as raised:
        await client.publish(card_json("orders", "1.3.0"))
    assert (raised.value.error_reason, raised.value.http_status) == (
        "version_understates_change",
        409,
    )
    assert str(raised.value) == f"publish: {said}"


@pytest.mark.reason("card_too_large")
async def test_a_card_too_large_raises_config_validation(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    fake.fail(413, "card_too_large", "the card is 300000 bytes; the limit is 262144")
    with pytest.raises(CatalogRequestError) as raised:
        await client.publish(card_json("orders", "4.0.0"))
    assert (raised.value.error_reason, raised.value.http_status) == ("card_too_large", 413)


@pytest.mark.reason("registry_unavailable_error")
async def test_a_server_error_raises_registry_unavailable(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    fake.fail(503, "database_unavailable", "the catalog's database does not answer")
    with pytest.raises(RegistryUnavailableError) as raised:
        await client.search()
    error = raised.value
    assert (error.error_reason, error.http_status) == ("database_unavailable", 503)
    assert str(error) == "search: the catalog's database does not answer"
    found = classify_exception(error)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        "registry_unavailable_error",
        True,
    )
    assert (await client.search()).metadata.next_cursor == "c2"


async def test_an_answer_that_is_not_json_raises_registry_unavailable(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    fake.answer(PlainTextResponse("<html>proxy</html>", status_code=200))
    with pytest.raises(RegistryUnavailableError) as raised:
        await client.search()
    assert str(raised.value) == "search: the catalog's answer is not JSON"


async def test_a_refused_connection_raises_registry_unavailable_without_the_address(
    tmp_path: Path,
) -> None:
    address = _refused_port()
    async with CatalogClient(address, auth=KEY, cache_dir=tmp_path) as catalog:
        with pytest.raises(RegistryUnavailableError) as raised:
            await catalog.resolve_entry("orders", "^2")
    assert str(raised.value) == "agent 'orders' (^2): the catalog could not be reached"
    assert address.split("//")[1] not in repr(raised.value.to_dict())


@pytest.mark.reason("registry_timeout_error")
async def test_no_answer_in_time_raises_registry_timeout(
    url: str, fake: FakeCatalog, tmp_path: Path
) -> None:
    release = fake.hold()
    async with CatalogClient(url, auth=KEY, timeout=0.2, cache_dir=tmp_path) as catalog:
        with pytest.raises(RegistryTimeoutError) as raised:
            await catalog.resolve_entry("orders", "^2")
    release.set()
    assert isinstance(raised.value, TimeoutError)
    assert str(raised.value) == "agent 'orders' (^2): the catalog did not answer in time"
    found = classify_exception(raised.value)
    assert (found.code, found.retriable) == (ErrorCode.UPSTREAM_TIMEOUT, True)


# -- what is sent ---------------------------------------------------------------------


async def test_search_sends_each_filter_as_its_query_parameter(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    page = await client.search(
        search="order",
        skill="refund",
        tag="billing",
        input_mode="text/plain",
        output_mode="application/json",
        status="any",
        include_unhealthy=True,
        all_versions=True,
        limit=10,
        cursor="c1",
    )
    assert isinstance(page, SearchPage)
    assert fake.seen[-1].params == {
        "search": "order",
        "skill": "refund",
        "tag": "billing",
        "input_mode": "text/plain",
        "output_mode": "application/json",
        "status": "any",
        "health": "any",
        "versions": "all",
        "limit": "10",
        "cursor": "c1",
    }
    await client.search()
    assert fake.seen[-1].params == {"limit": "50"}


async def test_a_limit_out_of_range_is_refused_before_any_request(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    with pytest.raises(CatalogRequestError) as raised:
        await client.search(limit=101)
    assert str(raised.value) == "search: limit must be 1..100, got 101"
    assert fake.seen == []


async def test_versions_lists_newest_first_with_the_range_sent(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    versions = await client.versions("orders", range="^2.1")
    assert [v.version for v in versions] == ["3.0.0", "2.3.0", "2.1.0", "2.0.0", "1.4.0"]
    assert fake.seen[-1].params == {"range": "^2.1"}


async def test_publish_sends_an_agent_card_as_its_json(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    card = AgentCard.model_validate(card_json("Billing Desk", "1.0.0"))
    result = await client.publish(card, name="billing-desk")
    assert isinstance(result, PublishResult)
    assert (result.entry.name, result.entry.version, result.created) == (
        "billing-desk",
        "1.0.0",
        True,
    )
    sent = fake.seen[-1].body
    assert sent["name"] == "billing-desk"
    assert sent["card"]["defaultInputModes"] == ["text/plain"]
    assert "url" not in sent


async def test_publish_by_url_sends_only_the_url(client: CatalogClient, fake: FakeCatalog) -> None:
    await client.publish(url="http://127.0.0.1:9/")
    assert fake.seen[-1].body == {"url": "http://127.0.0.1:9/"}


async def test_publish_needs_exactly_one_of_a_card_or_a_url(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    both = (card_json("a", "1.0.0"), "http://127.0.0.1:9/")
    for card, where in ((None, None), both):
        with pytest.raises(CatalogRequestError) as raised:
            await client.publish(card, url=where)
        assert str(raised.value) == "publish: give exactly one of a card or the url of an agent"
    assert fake.seen == []


async def test_set_status_posts_the_status(client: CatalogClient, fake: FakeCatalog) -> None:
    entry = await client.set_status("orders", "2.0.0", "deprecated")
    assert (entry.version, entry.status) == ("2.0.0", "deprecated")
    assert fake.seen[-1].path == "/v0/agents/orders/versions/2.0.0/status"
    assert fake.seen[-1].body == {"status": "deprecated"}


@pytest.mark.reason("invalid_status_change")
async def test_a_refused_status_change_raises_config_validation(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    fake.fail(400, "invalid_status_change", "orders 3.0.0 is deleted; deleted is final")
    with pytest.raises(CatalogRequestError) as raised:
        await client.set_status("orders", "3.0.0", "active")
    assert raised.value.error_reason == "invalid_status_change"
    assert str(raised.value) == "agent 'orders' (3.0.0): orders 3.0.0 is deleted; deleted is final"


async def test_a_string_key_is_sent_as_a_bearer_key(
    client: CatalogClient, fake: FakeCatalog
) -> None:
    await client.search()
    assert fake.seen[-1].headers["authorization"] == f"Bearer {KEY}"


async def test_an_api_key_is_sent_in_x_api_key(url: str, fake: FakeCatalog, tmp_path: Path) -> None:
    async with CatalogClient(url, auth=ApiKey(KEY), cache_dir=tmp_path) as catalog:
        await catalog.search()
    assert fake.seen[-1].headers["x-api-key"] == KEY
    assert "authorization" not in fake.seen[-1].headers


async def test_the_url_and_key_default_to_the_environment(
    url: str, fake: FakeCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMON_CATALOG_URL", url)
    monkeypatch.setenv("LLAMON_CATALOG_KEY", KEY)
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path))
    async with CatalogClient() as catalog:
        assert (await catalog.resolve_entry("orders", "^1")).version == "1.4.0"
    assert fake.seen[-1].headers["authorization"] == f"Bearer {KEY}"
    assert [p.parent.name for p in (tmp_path / "catalog-cache").iterdir()] == ["catalog-cache"]


def test_no_url_given_or_set_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLAMON_CATALOG_URL", raising=False)
    with pytest.raises(ConfigValidationError) as raised:
        CatalogClient()
    assert str(raised.value) == (
        "no Agent Catalog URL: pass CatalogClient(url) or set LLAMON_CATALOG_URL"
    )


# -- catalog:// URLs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("catalog://orders@^2", ("orders", "^2")),
        ("catalog://orders", ("orders", "latest")),
        ("catalog://acme/orders@~1.2", ("acme/orders", "~1.2")),
        ("catalog://orders@2.1.0", ("orders", "2.1.0")),
    ],
)
def test_a_catalog_url_names_an_agent_and_a_range(url: str, expected: tuple[str, str]) -> None:
    assert parse_catalog_url(url) == expected


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("catalog://", "'catalog://': '' is not an agent name of the catalog"),
        ("catalog://Orders@^2", "'catalog://Orders@^2': 'Orders' is not an agent name"),
        ("catalog://orders@", "'catalog://orders@': nothing after '@'"),
        ("catalog://orders@^^2", "'catalog://orders@^^2': agent 'orders': '^^2' is not a"),
        ("catalog://a/b/c", "'catalog://a/b/c': 'a/b/c' is not an agent name"),
    ],
)
def test_a_malformed_catalog_url_is_a_config_error_naming_it(url: str, message: str) -> None:
    with pytest.raises(ConfigValidationError) as raised:
        parse_catalog_url(url)
    assert str(raised.value).startswith(message)


async def test_a_bearer_with_a_refresh_callback_is_refreshed_once_after_a_401(
    url: str, fake: FakeCatalog, tmp_path: Path
) -> None:
    async def fresh_key() -> str:
        return KEY

    bearer = Bearer("lcat_" + "x" * 43, refresh=fresh_key)
    async with CatalogClient(url, auth=bearer, cache_dir=tmp_path) as catalog:
        assert (await catalog.resolve_entry("orders", "^1")).version == "1.4.0"
    assert [seen.headers["authorization"] for seen in fake.seen] == [
        "Bearer lcat_" + "x" * 43,
        f"Bearer {KEY}",
    ]


async def test_an_agent_client_of_a_catalog_url_uses_the_catalog_of_the_environment(
    url: str, fake: FakeCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMON_CATALOG_URL", url)
    monkeypatch.setenv("LLAMON_CATALOG_KEY", KEY)
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path))
    async with AgentClient("catalog://orders@^1") as agent:
        card = await agent.card()
        assert (card.version, card.url) == ("1.4.0", "http://127.0.0.1:1/")
        await agent.card()  # kept for card_ttl: not asked again
    assert [seen.path for seen in fake.seen] == ["/v0/agents/orders/versions"]

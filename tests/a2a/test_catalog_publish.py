"""Publishing the served card (``llamon serve --publish-to``): retried while the catalog is
unavailable, one INFO or WARNING line, deprecated only after a clean shutdown; the serve
command's checks of the publish options. Pauses are recorded, not slept."""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.types import AgentCard
from typer.testing import CliRunner

from llamon_agent.a2a.catalog_publish import CatalogPublisher, PublishTarget
from llamon_agent.cli import app
from tests._support.a2a_server import running_server
from tests._support.catalog_fake import KEY, FakeCatalog, card_json

LOGGER = "llamon_agent.a2a"
CARD = AgentCard.model_validate(card_json("orders", "1.2.0"))


class Pauses:
    """An ``asyncio.sleep`` stand-in that records each pause."""

    def __init__(self) -> None:
        self.taken: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.taken.append(seconds)


@pytest.fixture
def fake() -> FakeCatalog:
    return FakeCatalog()


@pytest.fixture
async def url(fake: FakeCatalog) -> AsyncIterator[str]:
    async with running_server(fake.app()) as base:
        yield base


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]


async def test_a_publish_is_retried_while_the_catalog_answers_5xx(
    url: str, fake: FakeCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    fake.fail(503, "database_unavailable", "down")
    fake.fail(502, "card_fetch_failed", "down")
    pauses = Pauses()
    publisher = CatalogPublisher(PublishTarget(url, key=KEY), sleep=pauses)
    result = await publisher.start(CARD)
    await publisher.finish(clean=True)
    assert result is not None
    assert pauses.taken == [0.5, 1.0]
    assert _lines(caplog) == [
        ("INFO", "published orders@1.2.0 to the Agent Catalog (change: initial)")
    ]
    assert fake.statuses == []  # not asked to deprecate


@pytest.mark.reason("registry_unavailable_error")
async def test_an_unreachable_catalog_gives_one_warning_after_the_last_try(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    nowhere = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()
    caplog.set_level(logging.INFO, logger=LOGGER)
    pauses = Pauses()
    publisher = CatalogPublisher(PublishTarget(nowhere, key=KEY), sleep=pauses)
    assert await publisher.start(CARD) is None
    await publisher.finish(clean=True)
    assert pauses.taken == [0.5, 1.0, 2.0, 4.0]
    assert _lines(caplog) == [
        (
            "WARNING",
            "could not publish the card of 'orders' 1.2.0 to the Agent Catalog after 5 tries "
            "(UPSTREAM_UNAVAILABLE registry_unavailable_error: publish: the catalog could not "
            "be reached); the agent keeps serving",
        )
    ]
    assert nowhere.split("//")[1] not in caplog.text


async def test_a_refusal_is_not_retried(
    url: str, fake: FakeCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    said = "skill 'search' was removed: that needs a major version (2.0.0 or higher), not 1.2.0"
    fake.fail(409, "version_understates_change", said)
    pauses = Pauses()
    publisher = CatalogPublisher(PublishTarget(url, key=KEY), sleep=pauses)
    assert await publisher.start(CARD) is None
    await publisher.finish(clean=True)
    assert pauses.taken == []
    assert _lines(caplog) == [
        (
            "WARNING",
            "could not publish the card of 'orders' 1.2.0 to the Agent Catalog "
            f"(INVALID_INPUT version_understates_change: publish: {said}); the agent keeps "
            "serving",
        )
    ]
    assert KEY not in caplog.text


async def test_a_clean_shutdown_deprecates_the_published_version(
    url: str, fake: FakeCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    target = PublishTarget(url, key=KEY, name="orders-api", deprecate_on_shutdown=True)
    publisher = CatalogPublisher(target)
    await publisher.start(CARD)
    await publisher.finish(clean=True)
    assert fake.statuses == [("orders-api", "1.2.0", "deprecated")]
    assert _lines(caplog)[-1] == ("INFO", "marked orders-api@1.2.0 deprecated in the Agent Catalog")


async def test_a_shutdown_that_is_not_clean_deprecates_nothing(url: str, fake: FakeCatalog) -> None:
    target = PublishTarget(url, key=KEY, deprecate_on_shutdown=True)
    publisher = CatalogPublisher(target)
    await publisher.start(CARD)
    await publisher.finish(clean=False)
    assert fake.statuses == []


async def test_a_failed_deprecation_is_one_warning(
    url: str, fake: FakeCatalog, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    publisher = CatalogPublisher(PublishTarget(url, key=KEY, deprecate_on_shutdown=True))
    await publisher.start(CARD)
    fake.fail(403, "name_not_owned", "not yours")
    await publisher.finish(clean=True)
    assert _lines(caplog)[-1] == (
        "WARNING",
        "could not mark orders@1.2.0 deprecated in the Agent Catalog (AUTH_REQUIRED "
        "registry_unauthorized_error: agent 'orders' (1.2.0): not yours)",
    )


async def test_a_publish_still_waiting_at_shutdown_is_stopped(url: str, fake: FakeCatalog) -> None:
    release = fake.hold()
    publisher = CatalogPublisher(PublishTarget(url, key=KEY, deprecate_on_shutdown=True))
    task = publisher.start(CARD)
    await publisher.finish(clean=True)
    release.set()
    assert task.cancelled()
    assert fake.statuses == []


runner = CliRunner()


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--publish-name", "orders"], "need --publish-to"),
        (["--deprecate-on-shutdown"], "need --publish-to"),
        (["--publish-to", "catalog.local:8700"], "is not an http:// or https:// URL"),
        (
            ["--publish-to", "http://127.0.0.1:9", "--publish-key-env", "NO_SUCH_KEY_VAR_XYZ"],
            "--publish-key-env NO_SUCH_KEY_VAR_XYZ: that environment variable is not set",
        ),
    ],
)
def test_serve_checks_the_publish_options(
    options: list[str], expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llamon_agent.demo import demo_agent_path

    path = demo_agent_path()
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path))
    monkeypatch.delenv("NO_SUCH_KEY_VAR_XYZ", raising=False)
    result = runner.invoke(
        app,
        ["serve", "--card", f"{path}:card", *options, f"{path}:agent"],
        env={"COLUMNS": "300"},
    )
    assert result.exit_code == 2
    assert expected in result.output

"""The resolution cache of ``CatalogClient``: the catalog unreachable -> the last good
resolution within the bound of age (one WARNING); older -> the original error saying so;
the catalog's own "no" never falls back; files 0600, opaque, one key never reading
another's; a corrupt file ignored. Time is an injected clock."""

from __future__ import annotations

import json
import logging
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from llamon_agent.client import CatalogClient
from llamon_agent.exceptions import (
    RegistryNotFoundError,
    RegistryTimeoutError,
    RegistryUnauthorizedError,
    RegistryUnavailableError,
)
from tests._support.a2a_server import running_server
from tests._support.catalog_fake import KEY, FakeCatalog

OTHER_KEY = "lcat_" + "o" * 43
LOGGER = "llamon_agent.client.catalog"


@dataclass
class Clock:
    """Wall-clock seconds the test moves by hand."""

    now: float = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake() -> FakeCatalog:
    catalog = FakeCatalog()
    catalog.add("orders", "2.0.0")
    catalog.add("orders", "2.1.0")
    return catalog


@pytest.fixture
async def url(fake: FakeCatalog) -> AsyncIterator[str]:
    async with running_server(fake.app()) as base:
        yield base


def _client(url: str, cache: Path, clock: Clock, **kwargs: object) -> CatalogClient:
    options: dict[str, object] = {"auth": KEY, "cache_dir": cache, "cache_max_age": 3600.0}
    options.update(kwargs)
    return CatalogClient(url, clock=clock, **options)  # type: ignore[arg-type]


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno >= 30]


def _files(directory: Path) -> list[Path]:
    return sorted(directory.iterdir())


@pytest.mark.reason("registry_unavailable_error")
async def test_an_unreachable_catalog_is_answered_from_the_cache_with_one_warning(
    url: str, fake: FakeCatalog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    caplog.set_level(logging.WARNING, logger=LOGGER)
    async with _client(url, tmp_path, clock) as catalog:
        assert (await catalog.resolve_entry("orders", "^2")).version == "2.1.0"
        clock.now += 120
        fake.fail(503, "database_unavailable", "the catalog's database does not answer")
        entry = await catalog.resolve_entry("orders", "^2")
    assert entry.version == "2.1.0"
    assert _warnings(caplog) == [
        "the catalog is unreachable; using the cached resolution of orders@^2 "
        "(version 2.1.0, cached 120 s ago)"
    ]
    assert url.split("//")[1] not in caplog.text
    assert KEY not in caplog.text


async def test_a_stopped_catalog_is_answered_from_the_file_an_earlier_client_wrote(
    fake: FakeCatalog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    async with running_server(fake.app()) as base, _client(base, tmp_path, clock) as catalog:
        await catalog.resolve_entry("orders", "^2")
    caplog.set_level(logging.WARNING, logger=LOGGER)
    clock.now += 30
    async with _client(base, tmp_path, clock) as fresh:  # the catalog is stopped now
        entry = await fresh.resolve_entry("orders", "^2")
    assert entry.version == "2.1.0"
    assert _warnings(caplog) == [
        "the catalog is unreachable; using the cached resolution of orders@^2 "
        "(version 2.1.0, cached 30 s ago)"
    ]


async def test_a_timeout_is_answered_from_the_cache(
    url: str, fake: FakeCatalog, tmp_path: Path
) -> None:
    clock = Clock()
    async with _client(url, tmp_path, clock, timeout=0.2) as catalog:
        await catalog.resolve_entry("orders", "^2")
        release = fake.hold()
        entry = await catalog.resolve_entry("orders", "^2")
        release.set()
    assert entry.version == "2.1.0"


async def test_a_resolution_older_than_the_bound_is_refused_with_the_original_error(
    url: str, fake: FakeCatalog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    caplog.set_level(logging.WARNING, logger=LOGGER)
    async with _client(url, tmp_path, clock) as catalog:
        await catalog.resolve_entry("orders", "^2")
        clock.now += 3601
        fake.fail(503, "database_unavailable", "the catalog's database does not answer")
        with pytest.raises(RegistryUnavailableError) as raised:
            await catalog.resolve_entry("orders", "^2")
        assert (await catalog.resolve_entry("orders", "^2")).version == "2.1.0"
    assert str(raised.value) == (
        "agent 'orders' (^2): the catalog's database does not answer; a cached resolution of "
        "orders@^2 exists but is 3601 s old, older than the bound of 3600 s"
    )
    assert (raised.value.error_reason, raised.value.http_status) == ("database_unavailable", 503)
    assert isinstance(raised.value.__cause__, RegistryUnavailableError)
    assert _warnings(caplog) == []


async def test_a_stale_timeout_stays_a_timeout(url: str, fake: FakeCatalog, tmp_path: Path) -> None:
    clock = Clock()
    async with _client(url, tmp_path, clock, timeout=0.2) as catalog:
        await catalog.resolve_entry("orders", "^2")
        clock.now += 7200
        release = fake.hold()
        with pytest.raises(RegistryTimeoutError) as raised:
            await catalog.resolve_entry("orders", "^2")
        release.set()
    assert "exists but is 7200 s old" in str(raised.value)


async def test_a_max_age_of_zero_never_uses_the_cache(
    url: str, fake: FakeCatalog, tmp_path: Path
) -> None:
    clock = Clock()
    async with _client(url, tmp_path, clock, cache_max_age=0) as catalog:
        await catalog.resolve_entry("orders", "^2")
        fake.fail(503, "database_unavailable", "down")
        with pytest.raises(RegistryUnavailableError) as raised:
            await catalog.resolve_entry("orders", "^2")
    assert str(raised.value) == "agent 'orders' (^2): down"


async def test_the_max_age_defaults_to_the_environment(
    url: str, fake: FakeCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMON_CATALOG_CACHE_MAX_AGE", "60")
    clock = Clock()
    async with CatalogClient(url, auth=KEY, cache_dir=tmp_path, clock=clock) as catalog:
        assert catalog.cache_max_age == 60.0
        await catalog.resolve_entry("orders", "^2")
        clock.now += 61
        fake.fail(503, "database_unavailable", "down")
        with pytest.raises(RegistryUnavailableError, match="older than the bound of 60 s"):
            await catalog.resolve_entry("orders", "^2")
    monkeypatch.delenv("LLAMON_CATALOG_CACHE_MAX_AGE")
    async with CatalogClient(url, auth=KEY, cache_dir=tmp_path) as default:
        assert default.cache_max_age == 86400.0


@pytest.mark.parametrize(
    ("status", "reason", "raised"),
    [
        (404, "agent_not_found", RegistryNotFoundError),
        (401, "catalog_key_required", RegistryUnauthorizedError),
        (403, "name_not_owned", RegistryUnauthorizedError),
    ],
)
async def test_the_catalogs_no_never_falls_back_to_the_cache(
    url: str,
    fake: FakeCatalog,
    tmp_path: Path,
    status: int,
    reason: str,
    raised: type[Exception],
) -> None:
    clock = Clock()
    async with _client(url, tmp_path, clock) as catalog:
        await catalog.resolve_entry("orders", "^2")
        fake.fail(status, reason, "no")
        with pytest.raises(raised):
            await catalog.resolve_entry("orders", "^2")
        assert (await catalog.resolve_entry("orders", "^2")).version == "2.1.0"


async def test_cache_files_are_private_and_reveal_nothing(
    url: str, fake: FakeCatalog, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    async with _client(url, cache, Clock()) as catalog:
        await catalog.resolve_entry("orders", "^2")
        await catalog.resolve_entry("orders", "latest")
    files = _files(cache)
    assert len(files) == 2
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    for file in files:
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
        assert file.name.endswith(".json")
        assert len(file.name) == 64 + 5
        assert "orders" not in file.name
        text = file.read_text()
        assert KEY not in text
        assert url.split("//")[1] not in text
        assert json.loads(text)["entry"]["name"] == "orders"


async def test_another_key_never_reads_this_keys_resolution(
    url: str, fake: FakeCatalog, tmp_path: Path
) -> None:
    clock = Clock()
    async with _client(url, tmp_path, clock) as catalog:
        await catalog.resolve_entry("orders", "^2")
    fake.fail(503, "database_unavailable", "down")
    async with _client(url, tmp_path, clock, auth=OTHER_KEY) as other:
        with pytest.raises(RegistryUnavailableError) as raised:
            await other.resolve_entry("orders", "^2")
    assert str(raised.value) == "agent 'orders' (^2): down"


async def test_another_range_is_another_resolution(
    url: str, fake: FakeCatalog, tmp_path: Path
) -> None:
    clock = Clock()
    async with _client(url, tmp_path, clock) as catalog:
        await catalog.resolve_entry("orders", "^2")
        fake.fail(503, "database_unavailable", "down")
        with pytest.raises(RegistryUnavailableError):
            await catalog.resolve_entry("orders", "~2.0")


async def test_a_corrupt_cache_file_is_ignored_and_logged_once(
    url: str, fake: FakeCatalog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    async with _client(url, tmp_path, clock) as catalog:
        await catalog.resolve_entry("orders", "^2")
    (file,) = _files(tmp_path)
    file.write_text('{"format": 1, "storedAt": "soon", "entr')
    caplog.set_level(logging.WARNING, logger=LOGGER)
    async with _client(url, tmp_path, clock) as fresh:
        for _ in range(2):
            fake.fail(503, "database_unavailable", "down")
            with pytest.raises(RegistryUnavailableError):
                await fresh.resolve_entry("orders", "^2")
        assert (await fresh.resolve_entry("orders", "^2")).version == "2.1.0"
    assert _warnings(caplog) == [
        "catalog cache: ignored the unreadable cached resolution of orders@^2 (not a cache file)"
    ]


async def test_a_cache_file_holding_no_entry_is_ignored(
    url: str, fake: FakeCatalog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    async with _client(url, tmp_path, clock) as catalog:
        await catalog.resolve_entry("orders", "^2")
    (file,) = _files(tmp_path)
    file.write_text(json.dumps({"format": 1, "storedAt": clock.now, "entry": {"name": 1}}))
    caplog.set_level(logging.WARNING, logger=LOGGER)
    fake.fail(503, "database_unavailable", "down")
    async with _client(url, tmp_path, clock) as fresh:
        with pytest.raises(RegistryUnavailableError):
            await fresh.resolve_entry("orders", "^2")
    assert _warnings(caplog) == [
        "catalog cache: ignored the unreadable cached resolution of orders@^2 (not a catalog entry)"
    ]


async def test_memory_only_keeps_no_file(url: str, fake: FakeCatalog, tmp_path: Path) -> None:
    clock = Clock()
    async with _client(url, tmp_path, clock, cache_dir=False) as catalog:
        await catalog.resolve_entry("orders", "^2")
        fake.fail(503, "database_unavailable", "down")
        assert (await catalog.resolve_entry("orders", "^2")).version == "2.1.0"
    assert _files(tmp_path) == []

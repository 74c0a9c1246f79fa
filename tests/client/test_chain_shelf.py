"""``ArtifactShelf``: each entry served at an unguessable URL, with its media type, until
it is removed or expires (an injected clock, no sleeps); bounded in entries and bytes."""

from __future__ import annotations

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from llamon_agent.client import ArtifactShelf, ArtifactTooLargeError, ShelfFullError
from llamon_agent.core.classify import classify_exception
from llamon_agent.core.codes import ErrorCode

BASE = "http://caller.test/artifacts"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _http(app: Starlette) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://caller.test")


async def test_an_entry_is_served_with_its_media_type_until_it_is_removed() -> None:
    shelf = ArtifactShelf(BASE)
    app = Starlette(routes=[Mount("/artifacts", app=shelf.app())])
    url = shelf.put(b'{"rows":3}', "application/json")
    other = shelf.put("héllo".encode(), "text/plain")
    assert url.startswith(BASE + "/")
    assert len(url.rsplit("/", 1)[-1]) == 43  # 32 random bytes, URL-safe base64
    async with _http(app) as http:
        found = await http.get(url)
        text = await http.get(other)
        guessed = await http.get(BASE + "/" + "A" * 43)
        shelf.remove(url)
        gone = await http.get(url)
        still = await http.get(other)
    assert (found.status_code, found.content) == (200, b'{"rows":3}')
    assert found.headers["content-type"] == "application/json"
    assert found.headers["cache-control"] == "no-store"
    assert text.text == "héllo"
    assert text.headers["content-type"] == "text/plain; charset=utf-8"
    assert guessed.status_code == 404
    assert gone.status_code == 404
    assert still.status_code == 200
    assert (len(shelf), shelf.size) == (1, len("héllo".encode()))


async def test_an_entry_expires_after_its_ttl() -> None:
    clock = Clock()
    shelf = ArtifactShelf(BASE, ttl=30.0, clock=clock)
    app = Starlette(routes=[Mount("/artifacts", routes=shelf.routes)])
    url = shelf.put(b"x", "text/plain")
    async with _http(app) as http:
        clock.now += 29.9
        fresh = await http.get(url)
        clock.now += 0.1
        expired = await http.get(url)
    assert (fresh.status_code, expired.status_code) == (200, 404)
    assert len(shelf) == 0


@pytest.mark.reason("shelf_full_error")
def test_a_full_shelf_refuses_until_room_is_made() -> None:
    clock = Clock()
    shelf = ArtifactShelf(BASE, max_entries=2, max_bytes=10, ttl=60.0, clock=clock)
    first = shelf.put(b"12345", "text/plain")
    shelf.put(b"123", "text/plain")
    with pytest.raises(ShelfFullError) as by_count:
        shelf.put(b"1", "text/plain")
    shelf.remove(first)
    with pytest.raises(ShelfFullError) as by_bytes:
        shelf.put(b"12345678", "text/plain")
    assert str(by_count.value) == (
        "the artifact shelf is full (2 of 2 entries, 8 of 10 bytes); "
        "an artifact of 1 bytes does not fit"
    )
    assert "3 of 10 bytes" in str(by_bytes.value)
    assert "caller.test" not in str(by_bytes.value)
    found = classify_exception(by_count.value)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.RATE_LIMITED,
        "shelf_full_error",
        True,
    )
    clock.now += 60.0  # the entries held expire: room again
    assert shelf.put(b"12345678", "text/plain").startswith(BASE)


@pytest.mark.reason("artifact_too_large_error")
def test_an_artifact_larger_than_the_shelf_is_refused() -> None:
    shelf = ArtifactShelf(BASE, max_bytes=4)
    with pytest.raises(ArtifactTooLargeError) as caught:
        shelf.put(b"12345", "application/octet-stream")
    assert str(caught.value) == "an artifact of 5 bytes is larger than the shelf (4 bytes)"
    assert isinstance(caught.value, ValueError)
    found = classify_exception(caught.value)
    assert (found.code, found.reason, found.retriable) == (
        ErrorCode.INVALID_INPUT,
        "artifact_too_large_error",
        False,
    )
    assert len(shelf) == 0


def test_a_shelf_without_its_address_refuses_to_store() -> None:
    shelf = ArtifactShelf()
    with pytest.raises(RuntimeError, match="base_url"):
        shelf.put(b"x", "text/plain")
    shelf.base_url = BASE + "/"
    assert shelf.put(b"x", "text/plain").startswith(BASE + "/")
    shelf.clear()
    assert len(shelf) == 0

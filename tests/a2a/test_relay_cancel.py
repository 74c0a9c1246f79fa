"""EventRelay's cancel requests: ``request_cancel`` publishes, ``listen_cancels`` hears
them, and a Redis that stops answering is logged once and retried."""

from __future__ import annotations

import asyncio
import logging

import pytest

from llamon_agent.a2a.relay import (
    DEFAULT_CANCEL_CHANNEL,
    EventRelay,
    RelayUnavailableError,
)
from llamon_agent.core.errors import error_data_for_exception
from tests._support.redis_server import SHARED_REDIS_URL, private_redis, unique_prefix

WAIT = 5.0


class _Heard:
    """The task ids a listener was handed; ``arrived`` once ``count`` were."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.ids: list[str] = []
        self.arrived = asyncio.Event()

    def __call__(self, task_id: str) -> None:
        self.ids.append(task_id)
        if len(self.ids) >= self.count:
            self.arrived.set()


class _Warnings(logging.Handler):
    """The WARNINGs starting with ``cancel requests:``; ``arrived`` at the first."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.arrived = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("cancel requests:"):
            self.messages.append(record.getMessage())
            self.arrived.set()


async def _stop(listener: asyncio.Task[None]) -> None:
    listener.cancel()
    with pytest.raises(asyncio.CancelledError):
        await listener


async def test_a_requested_cancel_reaches_every_listener_on_the_channel() -> None:
    channel = unique_prefix() + "cancel"
    asking = EventRelay(SHARED_REDIS_URL, cancel_channel=channel)
    listening = EventRelay(SHARED_REDIS_URL, cancel_channel=channel, block=0.2)
    heard = _Heard(2)
    listener = asyncio.create_task(listening.listen_cancels(heard))
    try:
        await asyncio.wait_for(listening.listening.wait(), WAIT)
        assert await asyncio.create_task(asking.request_cancel("t-1")) == 1
        assert await asking.request_cancel("t-2") == 1
        await asyncio.wait_for(heard.arrived.wait(), WAIT)
        assert heard.ids == ["t-1", "t-2"]
    finally:
        await _stop(listener)
        assert not listening.listening.is_set()
        await listening.aclose()
        await asking.aclose()


def test_the_default_cancel_channel() -> None:
    relay = EventRelay(SHARED_REDIS_URL)
    assert relay.cancel_channel == DEFAULT_CANCEL_CHANNEL == "llamon:cancel"
    with pytest.raises(ValueError, match="must be positive"):
        EventRelay(SHARED_REDIS_URL, retry_backoff=0)


async def test_redis_down_the_request_is_classified_and_the_listener_logs_once_then_resumes() -> (
    None
):
    warnings = _Warnings()
    logger = logging.getLogger("llamon_agent.a2a")
    logger.addHandler(warnings)
    async with private_redis() as server:
        relay = EventRelay(server.url, block=0.2, retry_backoff=0.05)
        heard = _Heard(1)
        listener = asyncio.create_task(relay.listen_cancels(heard))
        try:
            await asyncio.wait_for(relay.listening.wait(), WAIT)
            await server.stop()
            with pytest.raises(RelayUnavailableError) as raised:
                await relay.request_cancel("t-1")
            data = error_data_for_exception(raised.value)
            assert (data.error_code, data.error_reason, data.retriable) == (
                "UPSTREAM_UNAVAILABLE",
                "event_relay_unavailable",
                True,
            )
            await asyncio.wait_for(warnings.arrived.wait(), WAIT)
            assert not listener.done()  # it never raises: it tries again
            await server.start()  # the same port: Redis answers once more
            await asyncio.wait_for(relay.listening.wait(), WAIT)
            assert await relay.request_cancel("t-2") == 1
            await asyncio.wait_for(heard.arrived.wait(), WAIT)
            assert heard.ids == ["t-2"]
            assert len(warnings.messages) == 1, warnings.messages  # logged once
            assert warnings.messages[0].startswith("cancel requests: Redis did not answer (")
            assert str(server.port) not in warnings.messages[0]
            assert "127.0.0.1" not in warnings.messages[0]
        finally:
            logger.removeHandler(warnings)
            await _stop(listener)
            await relay.aclose()

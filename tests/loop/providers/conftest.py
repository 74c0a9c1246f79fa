from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.loop.providers.fakes import (
    AnthropicWire,
    FakeProvider,
    FakeSleep,
    OpenAIWire,
    Wire,
    fake_provider,
)


@pytest.fixture(params=[OpenAIWire(), AnthropicWire()], ids=lambda wire: wire.name)
def wire(request: pytest.FixtureRequest) -> Wire:
    """Each provider's wire format, for tests that hold for both adapters."""
    param = request.param
    assert isinstance(param, Wire)
    return param


@pytest.fixture
async def fake() -> AsyncIterator[FakeProvider]:
    async with fake_provider() as provider:
        yield provider


@pytest.fixture
def sleeper() -> FakeSleep:
    return FakeSleep()


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see a developer's real keys or base URLs."""
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)

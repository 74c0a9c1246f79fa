"""What both provider adapters share: the API key, who owns the client, the retry policy.

A subclass names its key variable and provider, and builds its SDK client in
``_new_client``; a client passed in is used with the SDK's own retries off and is never
closed by ``aclose``.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, Self, TypeVar

from llamon_agent.loop.providers._common import check_client_options, resolve_api_key
from llamon_agent.loop.providers._retry import RetryPolicy, SleepFn, safe_url

__all__ = ["ProviderModel"]

ClientT = TypeVar("ClientT")


class ProviderModel(Generic[ClientT]):
    """Base of ``OpenAIChatModel`` and ``AnthropicMessagesModel`` (life cycle only)."""

    api_key_env: ClassVar[str]
    provider: ClassVar[str]
    _client: ClientT

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
        client: ClientT | None = None,
        sleep: SleepFn | None = None,
    ) -> None:
        check_client_options(client, api_key, base_url)
        self.model = model
        self.timeout = float(timeout)
        self.retry_policy = (
            RetryPolicy(max_retries, sleep) if sleep is not None else RetryPolicy(max_retries)
        )
        self._owns_client = client is None
        if client is None:
            key = resolve_api_key(api_key, self.api_key_env, self.provider)
            self._client = self._new_client(key, base_url, self.timeout)
        else:
            owned: Any = client
            self._client = owned.with_options(max_retries=0)

    def _new_client(self, api_key: str, base_url: str | None, timeout: float) -> ClientT:
        """The SDK client, with the SDK's own retries off (we retry ourselves)."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        """The server's base URL (without user-info or query)."""
        client: Any = self._client
        return safe_url(client.base_url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    async def aclose(self) -> None:
        """Close the HTTP client this model created (a client passed in stays open)."""
        if self._owns_client:
            client: Any = self._client
            await client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

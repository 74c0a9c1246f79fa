"""``llamon serve --publish-to URL``: publish the served agent's card to an Agent Catalog.

The catalog is not on the serving path: publishing runs in the background once the server
listens, and its outcome is one log line, never a reason to stop serving.

* Success: one INFO line ``published NAME@VERSION to the Agent Catalog (change: minor)``
  (``already published`` when the catalog had that very card as that version).
* Failure: one WARNING line with the errorCode and reason (``UPSTREAM_UNAVAILABLE
  registry_unavailable_error``, ``INVALID_INPUT version_understates_change`` ...) and the
  catalog's message. A retriable failure (the catalog unreachable, slow, or answering
  5xx) is tried again first, ``PUBLISH_ATTEMPTS`` times in all with a growing pause.
* ``deprecate_on_shutdown``: on a clean shutdown (SIGINT/SIGTERM, or the shutdown event),
  the published version is marked ``deprecated`` in the catalog, bounded by
  ``DEPRECATE_TIMEOUT`` seconds; one INFO line, or one WARNING when it failed.

Neither line names the catalog's address or the key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from a2a.types import AgentCard

from llamon_agent.client.catalog import CatalogClient, PublishResult
from llamon_agent.core.classify import classify_exception
from llamon_agent.exceptions import LlamonError, RegistryTimeoutError, RegistryUnavailableError

__all__ = [
    "DEPRECATE_TIMEOUT",
    "PUBLISH_ATTEMPTS",
    "CatalogPublisher",
    "PublishTarget",
]

logger = logging.getLogger("llamon_agent.a2a")

PUBLISH_ATTEMPTS: Final = 5
"""Tries of one publish when the catalog is unreachable or answers a server error."""
PUBLISH_BACKOFF: Final = 0.5
"""Seconds before the second try; each further pause is twice the one before (max 8 s)."""
DEPRECATE_TIMEOUT: Final = 5.0
"""Seconds the deprecation on shutdown may take."""


@dataclass(frozen=True, slots=True)
class PublishTarget:
    """Where and as what the served card is published."""

    url: str
    key: str | None = field(default=None, repr=False)
    name: str | None = None
    deprecate_on_shutdown: bool = False


def _failure(exc: Exception) -> str:
    found = classify_exception(exc)
    detail = exc.message if isinstance(exc, LlamonError) else type(exc).__name__
    return f"{found.code.value} {found.reason}: {detail}"


class CatalogPublisher:
    """Publishes one card in the background and, if asked, deprecates it on shutdown."""

    def __init__(
        self,
        target: PublishTarget,
        *,
        catalog: CatalogClient | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.target = target
        self.catalog = catalog or CatalogClient(target.url, auth=target.key, cache_dir=False)
        self._sleep = sleep
        self._task: asyncio.Task[PublishResult | None] | None = None

    def start(self, card: AgentCard) -> asyncio.Task[PublishResult | None]:
        """Publish ``card`` in a background task (its result: what the catalog answered,
        or None after a failure, which was logged)."""
        self._task = asyncio.create_task(self.publish(card), name="llamon-catalog-publish")
        return self._task

    async def publish(self, card: AgentCard) -> PublishResult | None:
        """Publish ``card`` (retried on retriable failures); logs one line either way."""
        pause = PUBLISH_BACKOFF
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                result = await self.catalog.publish(card, name=self.target.name)
            except (RegistryUnavailableError, RegistryTimeoutError) as exc:
                if attempt < PUBLISH_ATTEMPTS:
                    await self._sleep(pause)
                    pause = min(pause * 2, 8.0)
                    continue
                self._warn_unpublished(card, exc, attempt)
                return None
            except Exception as exc:
                self._warn_unpublished(card, exc, attempt)
                return None
            entry = result.entry
            done = f"change: {result.change}" if result.created else "already published"
            logger.info(
                "published %s@%s to the Agent Catalog (%s)", entry.name, entry.version, done
            )
            return result
        return None  # pragma: no cover - the loop always returns

    def _warn_unpublished(self, card: AgentCard, exc: Exception, attempts: int) -> None:
        tries = f" after {attempts} tries" if attempts > 1 else ""
        logger.warning(
            "could not publish the card of %r %s to the Agent Catalog%s (%s); the agent "
            "keeps serving",
            card.name,
            card.version,
            tries,
            _failure(exc),
        )

    async def finish(self, *, clean: bool) -> None:
        """After serving: stop a publish still under way; on a ``clean`` shutdown with
        ``deprecate_on_shutdown``, mark the published version deprecated (bounded by
        ``DEPRECATE_TIMEOUT``); then close the catalog client."""
        try:
            task = self._task
            if task is None:
                return
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                return
            result = task.result()
            if result is None or not (clean and self.target.deprecate_on_shutdown):
                return
            await self._deprecate(result)
        finally:
            await self.catalog.aclose()

    async def _deprecate(self, result: PublishResult) -> None:
        entry = result.entry
        try:
            await asyncio.wait_for(
                self.catalog.set_status(entry.name, entry.version, "deprecated"),
                DEPRECATE_TIMEOUT,
            )
        except TimeoutError:
            logger.warning(
                "could not mark %s@%s deprecated in the Agent Catalog: no answer within %g s",
                entry.name,
                entry.version,
                DEPRECATE_TIMEOUT,
            )
        except Exception as exc:
            logger.warning(
                "could not mark %s@%s deprecated in the Agent Catalog (%s)",
                entry.name,
                entry.version,
                _failure(exc),
            )
        else:
            logger.info("marked %s@%s deprecated in the Agent Catalog", entry.name, entry.version)

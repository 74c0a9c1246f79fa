"""Stored versions as the HTTP API shows them (``client.catalog_wire`` bodies).

``entry_for(version)`` is the ``CatalogEntry`` of one ``AgentVersion``: times as ISO 8601
in UTC, lint warnings as ``LintFinding`` s, health as ``CatalogHealth``.
"""

from __future__ import annotations

from datetime import UTC, datetime

from llamon_agent.catalog.records import AgentVersion, Health
from llamon_agent.client.catalog_wire import CatalogEntry, CatalogHealth, LintFinding

__all__ = ["entry_for", "health_for", "when"]


def when(epoch: float | None) -> datetime | None:
    """Epoch seconds as an aware UTC datetime (``None`` stays ``None``)."""
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def health_for(health: Health) -> CatalogHealth:
    """The wire form of a version's health."""
    return CatalogHealth(
        state=health.state,
        checked_at=when(health.checked_at),
        last_seen=when(health.last_seen),
        error_code=health.error_code,
        error_reason=health.error_reason,
        failures=health.failures,
    )


def entry_for(version: AgentVersion) -> CatalogEntry:
    """The wire form of one published version."""
    return CatalogEntry(
        name=version.name,
        version=version.version,
        status=version.status,
        is_latest=version.is_latest,
        owner=version.owner,
        published_at=datetime.fromtimestamp(version.published_at, UTC),
        change=version.change,
        card_url=version.card_url,
        warnings=[LintFinding.model_validate(w) for w in version.warnings],
        health=health_for(version.health),
        card=version.card,
    )

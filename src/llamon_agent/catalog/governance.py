"""The governance view of a catalog: one row per agent, for ``llamon catalog list``.

What the operator sees, per agent:

* ``name``; ``versions``: how many versions are not deleted, and ``deleted``: how many are
  (counted apart, so a cleaned-up agent still shows its history); ``latest``: the version
  a caller resolving ``latest`` gets (``None`` when no version is active);
* ``status``: ``active`` when some version is active, else ``deprecated`` when some version
  is, else ``deleted``;
* ``health``: the probed health of the latest version (of the newest version that is not
  deleted when none is latest): ``unknown``, ``healthy`` or ``unhealthy``, and
  ``last_failure``: that version's last failed probe (``errorCode/reason``), if any;
* ``owner``: the label of the publisher key that first published the name;
* ``last_seen``: when any of its versions last answered a probe (epoch seconds).

Agents whose every version is deleted are left out unless ``include_deleted``.
``rows_json`` gives the same rows as JSON objects with stable camelCase keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from llamon_agent.catalog.records import (
    STATUSES,
    AgentVersion,
    CatalogQuery,
    HealthState,
    Status,
)
from llamon_agent.catalog.store import CatalogStore

__all__ = ["AgentRow", "governance_rows", "iso_time", "rows_json"]

_PAGE: Final = 100


@dataclass(frozen=True, slots=True)
class AgentRow:
    """One agent in the governance view (see the module docstring)."""

    name: str
    versions: int
    deleted: int
    latest: str | None
    status: Status
    health: HealthState
    last_failure: str | None
    owner: str
    last_seen: float | None


async def _every_version(store: CatalogStore) -> list[AgentVersion]:
    """Every stored version of every agent, whatever its status or health."""
    rows: list[AgentVersion] = []
    cursor: str | None = None
    while True:
        page = await store.search(
            CatalogQuery(
                statuses=STATUSES,
                include_unhealthy=True,
                latest_only=False,
                limit=_PAGE,
                cursor=cursor,
            )
        )
        rows += page.rows
        cursor = page.next_cursor
        if cursor is None or not page.rows:
            return rows


def _row(name: str, versions: list[AgentVersion], owner: str) -> AgentRow:
    """The row of one agent from its versions, newest first."""
    kept = [v for v in versions if v.status != "deleted"]
    latest = next((v for v in versions if v.is_latest), None)
    shown = latest or (kept[0] if kept else versions[0])
    statuses = {v.status for v in versions}
    status: Status = next(s for s in STATUSES if s in statuses)
    seen = [v.health.last_seen for v in versions if v.health.last_seen is not None]
    failure = None
    if shown.health.error_code is not None:
        failure = f"{shown.health.error_code}/{shown.health.error_reason or '-'}"
    return AgentRow(
        name=name,
        versions=len(kept),
        deleted=len(versions) - len(kept),
        latest=latest.version if latest is not None else None,
        status=status,
        health=shown.health.state,
        last_failure=failure,
        owner=owner,
        last_seen=max(seen) if seen else None,
    )


async def governance_rows(store: CatalogStore, *, include_deleted: bool = False) -> list[AgentRow]:
    """One ``AgentRow`` per agent in ``store``, by name (see the module docstring)."""
    by_name: dict[str, list[AgentVersion]] = {}
    for version in await _every_version(store):
        by_name.setdefault(version.name, []).append(version)
    rows: list[AgentRow] = []
    for name in sorted(by_name):
        versions = await store.versions_of(name)  # newest (SemVer) first
        if not versions or (not include_deleted and all(v.status == "deleted" for v in versions)):
            continue
        owner = await store.owner_of(name) or versions[-1].owner
        rows.append(_row(name, versions, owner))
    return rows


def iso_time(moment: float | None) -> str | None:
    """``moment`` (epoch seconds) as ISO 8601 in UTC to the second, or ``None``."""
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def rows_json(rows: list[AgentRow]) -> list[dict[str, Any]]:
    """``rows`` as JSON objects: ``name``, ``versions``, ``deleted``, ``latest``, ``status``,
    ``health``, ``lastFailure``, ``owner``, ``lastSeen`` (ISO 8601 or ``null``)."""
    return [
        {
            "name": row.name,
            "versions": row.versions,
            "deleted": row.deleted,
            "latest": row.latest,
            "status": row.status,
            "health": row.health,
            "lastFailure": row.last_failure,
            "owner": row.owner,
            "lastSeen": iso_time(row.last_seen),
        }
        for row in rows
    ]

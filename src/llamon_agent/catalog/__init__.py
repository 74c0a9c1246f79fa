"""The Agent Catalog: a registry where agents publish versioned cards, callers find them by
skill and resolve them by SemVer range, access is per key, and health is probed.

``llamon catalog serve`` runs the service (``llamon_agent.catalog.app``); callers use
``llamon_agent.client.CatalogClient`` (or ``AgentClient("catalog://name@^2")``). See
docs/catalog.md.
"""

from __future__ import annotations

from llamon_agent.catalog.records import (
    AgentVersion,
    CatalogKey,
    CatalogPage,
    CatalogQuery,
    Health,
)
from llamon_agent.catalog.store import (
    CatalogStore,
    NameOwned,
    VersionTaken,
    open_catalog_store,
)

__all__ = [
    "AgentVersion",
    "CatalogKey",
    "CatalogPage",
    "CatalogQuery",
    "CatalogStore",
    "Health",
    "NameOwned",
    "VersionTaken",
    "open_catalog_store",
]

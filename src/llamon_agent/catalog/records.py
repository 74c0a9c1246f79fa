"""What the Agent Catalog keeps: published versions, their health, and access keys.

What the caller sees:

* ``AgentVersion``: one published version of one agent: its catalog ``name`` (lowercase,
  ``[a-z0-9-]`` words, optionally ``namespace/name``), SemVer ``version``, ``status``
  (``active`` → ``deprecated`` → ``deleted``), the card as published (JSON object, wire
  names), where the card was read from (``card_url``), who published it (``owner``: the
  publisher key's label), when, the card's lint warnings, the change it made against the
  version before it (``change``: ``initial``/``patch``/``minor``/``major``), and its
  ``Health``.
* ``Health``: ``unknown`` until probed, then ``healthy`` or ``unhealthy`` with the last
  time the agent answered, the last failure's errorCode and reason, the consecutive failures
  and when the next probe is due.
* ``CatalogKey``: an API key's stored form: the SHA-256 of the key (never the key), its
  ``role`` (``publisher``, ``caller`` or ``admin``), a label, and the name patterns
  (``*`` and ``?`` globs) it may publish (publisher) or see (caller). An admin sees and
  changes everything.
* ``CatalogQuery`` / ``CatalogPage``: a search and one page of its answer (cursor paging).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from llamon_agent.client.catalog_wire import NAME_PATTERN

__all__ = [
    "HEALTH_STATES",
    "NAME_PATTERN",
    "ROLES",
    "STATUSES",
    "AgentVersion",
    "CatalogKey",
    "CatalogPage",
    "CatalogQuery",
    "ChangeKind",
    "Health",
    "HealthState",
    "Role",
    "Status",
    "skill_terms",
]

Status = Literal["active", "deprecated", "deleted"]
STATUSES: Final[tuple[Status, ...]] = ("active", "deprecated", "deleted")

HealthState = Literal["unknown", "healthy", "unhealthy"]
HEALTH_STATES: Final[tuple[HealthState, ...]] = ("unknown", "healthy", "unhealthy")

Role = Literal["publisher", "caller", "admin"]
ROLES: Final[tuple[Role, ...]] = ("publisher", "caller", "admin")

ChangeKind = Literal["initial", "patch", "minor", "major"]


@dataclass(frozen=True, slots=True)
class Health:
    """What the last probes of one version found."""

    state: HealthState = "unknown"
    checked_at: float | None = None
    """When it was last probed (epoch seconds)."""
    last_seen: float | None = None
    """When it last answered a probe."""
    error_code: str | None = None
    """The last failed probe's errorCode (``None`` once it answers again)."""
    error_reason: str | None = None
    failures: int = 0
    """Probes failed in a row."""
    next_check: float | None = None
    """When the next probe is due (epoch seconds); ``None``: as soon as possible."""


@dataclass(frozen=True, slots=True)
class AgentVersion:
    """One published version of one agent (see the module docstring)."""

    name: str
    version: str
    status: Status
    card: dict[str, Any]
    owner: str
    published_at: float
    change: ChangeKind = "initial"
    card_url: str | None = None
    warnings: tuple[dict[str, str], ...] = ()
    health: Health = field(default_factory=Health)
    is_latest: bool = False
    """Whether this is the agent's latest version (the highest ``active`` release; the
    highest ``active`` version when there is no release)."""


@dataclass(frozen=True, slots=True)
class CatalogKey:
    """An API key as the catalog stores it: its hash, never the key."""

    key_hash: str
    role: Role
    label: str
    patterns: tuple[str, ...] = ()
    created_at: float = 0.0


@dataclass(frozen=True, slots=True)
class CatalogQuery:
    """A search of the catalog; every filter is optional and they all must hold.

    ``visible`` is the caller's name patterns (``*``/``?`` globs; ``None``: every name);
    ``latest_only`` keeps one row per agent (its latest version among the statuses asked),
    ``include_unhealthy`` keeps versions whose health is ``unhealthy``.
    """

    search: str | None = None
    """Case-insensitive substring of the name, the description or a skill's name/description."""
    skill: str | None = None
    """A skill id."""
    tag: str | None = None
    """A tag of a skill."""
    input_mode: str | None = None
    """A media type some skill accepts (its own input modes, or the card's default)."""
    output_mode: str | None = None
    statuses: tuple[Status, ...] = ("active",)
    include_unhealthy: bool = False
    latest_only: bool = True
    visible: tuple[str, ...] | None = None
    name: str | None = None
    """Only this agent's versions."""
    limit: int = 50
    cursor: str | None = None


@dataclass(frozen=True, slots=True)
class CatalogPage:
    """One page of a search, ordered by name then newest version first."""

    rows: list[AgentVersion]
    next_cursor: str | None = None


def _effective(modes: object, default: object) -> list[str]:
    chosen = modes if isinstance(modes, list) and modes else default
    return [m for m in chosen if isinstance(m, str)] if isinstance(chosen, list) else []


def skill_terms(card: dict[str, Any]) -> set[tuple[str, str]]:
    """The ``(kind, value)`` pairs a card is found by: ``skill`` ids, ``tag`` s, and the
    ``input``/``output`` modes of each skill (its own, or the card's defaults)."""
    terms: set[tuple[str, str]] = set()
    skills = card.get("skills")
    for skill in skills if isinstance(skills, list) else []:
        if not isinstance(skill, dict):
            continue
        if isinstance(skill.get("id"), str):
            terms.add(("skill", skill["id"]))
        tags = skill.get("tags")
        for tag in tags if isinstance(tags, list) else []:
            if isinstance(tag, str):
                terms.add(("tag", tag.lower()))
        for mode in _effective(skill.get("inputModes"), card.get("defaultInputModes")):
            terms.add(("input", mode.lower()))
        for mode in _effective(skill.get("outputModes"), card.get("defaultOutputModes")):
            terms.add(("output", mode.lower()))
    return terms

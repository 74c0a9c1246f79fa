"""The catalog's SQL, shared by the SQLite and PostgreSQL stores: tables, statements, and
the conversion between rows and records.

What the caller sees:

* ``schema(dialect)``: the statements that create the ``llamon_catalog_*`` tables and
  indexes (idempotent). The column types differ per engine (PostgreSQL's text columns
  use the ``"C"`` collation, so names and version keys sort by code point as on SQLite);
  every other statement is the same text on both engines, with named parameters.
* ``search_statement(query)``: the ``SELECT`` of one page (``limit + 1`` rows, so the
  caller knows whether a next page exists); ``page_of(rows, query)`` turns the rows into a
  ``CatalogPage`` with its opaque cursor. A cursor this module did not write raises
  ``ValueError`` naming it.
* The latest version of an agent is its highest ``active`` release, else its highest
  ``active`` pre-release (``RECOMPUTE_LATEST`` keeps the ``is_latest`` column so). A query
  with ``latest_only`` and any other set of statuses keeps, per agent, the highest
  version among those statuses by the same rule, before the other filters apply: the
  filters select agents by their latest version, never an older one in its place.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any, Final, Literal, cast

from llamon_agent.catalog.records import (
    AgentVersion,
    CatalogKey,
    CatalogPage,
    CatalogQuery,
    ChangeKind,
    Health,
    HealthState,
    Role,
    Status,
    skill_terms,
)
from llamon_agent.core.semver import Version

__all__ = [
    "ADD_TERM",
    "AGENTS",
    "CATALOG_SCHEMA_VERSION",
    "DELETE_KEYS",
    "DUE_FOR_PROBE",
    "INSERT_AGENT",
    "INSERT_VERSION",
    "KEYS",
    "LIST_KEYS",
    "LOCK_AGENT",
    "RECOMPUTE_LATEST",
    "RECORD_HEALTH",
    "SELECT_KEY",
    "SELECT_OWNER",
    "SELECT_VERSION",
    "SELECT_VERSIONS_OF",
    "SET_STATUS",
    "TERMS",
    "UPSERT_KEY",
    "VERSIONS",
    "Dialect",
    "health_params",
    "key_of",
    "key_params",
    "newer_schema_message",
    "page_of",
    "schema",
    "search_statement",
    "term_params",
    "version_of",
    "version_params",
]

Dialect = Literal["sqlite", "postgresql"]

CATALOG_SCHEMA_VERSION: Final = 1
"""The catalog schema this module writes (SQLite ``PRAGMA user_version``, PostgreSQL's
``llamon_catalog_schema`` row); a database with a newer one is refused."""

AGENTS: Final = "llamon_catalog_agents"
VERSIONS: Final = "llamon_catalog_versions"
TERMS: Final = "llamon_catalog_terms"
KEYS: Final = "llamon_catalog_keys"

_TYPES: Final[dict[Dialect, dict[str, str]]] = {
    "sqlite": {"text": "TEXT", "real": "REAL", "without_rowid": " WITHOUT ROWID"},
    "postgresql": {"text": 'TEXT COLLATE "C"', "real": "DOUBLE PRECISION", "without_rowid": ""},
}


def schema(dialect: Dialect) -> tuple[str, ...]:
    """The statements creating the catalog's tables and indexes on ``dialect`` (each one
    ``IF NOT EXISTS``)."""
    text, real, without_rowid = (_TYPES[dialect][k] for k in ("text", "real", "without_rowid"))
    return (
        f"""CREATE TABLE IF NOT EXISTS {AGENTS} (
            name {text} PRIMARY KEY,
            owner {text} NOT NULL,
            created_at {real} NOT NULL
        )""",
        f"""CREATE TABLE IF NOT EXISTS {VERSIONS} (
            name {text} NOT NULL,
            version {text} NOT NULL,
            sort_key {text} NOT NULL,
            status {text} NOT NULL,
            card {text} NOT NULL,
            card_url {text},
            owner {text} NOT NULL,
            published_at {real} NOT NULL,
            change {text} NOT NULL,
            warnings {text} NOT NULL,
            is_latest INTEGER NOT NULL DEFAULT 0,
            search_text {text} NOT NULL,
            health_state {text} NOT NULL DEFAULT 'unknown',
            health_checked_at {real},
            health_last_seen {real},
            health_error_code {text},
            health_error_reason {text},
            health_failures INTEGER NOT NULL DEFAULT 0,
            health_next_check {real},
            PRIMARY KEY (name, version)
        )""",
        # the default search (active, latest only) walks this one in result order
        f"""CREATE INDEX IF NOT EXISTS {VERSIONS}_latest
            ON {VERSIONS} (name, sort_key DESC, version DESC) WHERE is_latest = 1""",
        f"""CREATE INDEX IF NOT EXISTS {VERSIONS}_order
            ON {VERSIONS} (name, sort_key DESC, version DESC)""",
        f"""CREATE INDEX IF NOT EXISTS {VERSIONS}_due
            ON {VERSIONS} (health_next_check) WHERE status = 'active'""",
        f"""CREATE TABLE IF NOT EXISTS {TERMS} (
            kind {text} NOT NULL,
            value {text} NOT NULL,
            name {text} NOT NULL,
            version {text} NOT NULL,
            PRIMARY KEY (kind, value, name, version)
        ){without_rowid}""",
        f"""CREATE TABLE IF NOT EXISTS {KEYS} (
            key_hash {text} PRIMARY KEY,
            role {text} NOT NULL,
            label {text} NOT NULL,
            patterns {text} NOT NULL,
            created_at {real} NOT NULL
        )""",
    )


def newer_schema_message(where: str, found: int) -> str:
    """The one line refusing a catalog database written by a newer llamon."""
    return (
        f"{where} was written by a newer llamon (catalog schema version {found}; this one"
        f" reads up to {CATALOG_SCHEMA_VERSION}): upgrade llamon-agent, or use another"
        " catalog database"
    )


# --- statements -----------------------------------------------------------------------------

_VERSION_COLUMNS: Final = (
    "name",
    "version",
    "sort_key",
    "status",
    "card",
    "card_url",
    "owner",
    "published_at",
    "change",
    "warnings",
    "search_text",
    "health_state",
    "health_checked_at",
    "health_last_seen",
    "health_error_code",
    "health_error_reason",
    "health_failures",
    "health_next_check",
)
_SELECTED: Final = (
    "v.name, v.version, v.status, v.card, v.card_url, v.owner, v.published_at, v.change,"
    " v.warnings, v.is_latest, v.health_state, v.health_checked_at, v.health_last_seen,"
    " v.health_error_code, v.health_error_reason, v.health_failures, v.health_next_check,"
    " v.sort_key"
)
_FROM: Final = f"SELECT {_SELECTED} FROM {VERSIONS} v"  # noqa: S608 - constants

INSERT_AGENT: Final = (
    f"INSERT INTO {AGENTS} (name, owner, created_at) VALUES (:name, :owner, :created_at)"  # noqa: S608
    " ON CONFLICT (name) DO NOTHING"
)
SELECT_OWNER: Final = f"SELECT owner FROM {AGENTS} WHERE name = :name"  # noqa: S608
LOCK_AGENT: Final = f"{SELECT_OWNER} FOR UPDATE"
"""PostgreSQL: the agent's row locked until the transaction ends, so two writers of one
agent's versions take turns and each recomputes the latest over the other's rows (SQLite's
single writer needs no lock)."""
INSERT_VERSION: Final = (
    f"INSERT INTO {VERSIONS} ({', '.join(_VERSION_COLUMNS)})"  # noqa: S608 - constants
    f" VALUES ({', '.join(':' + column for column in _VERSION_COLUMNS)})"
    " ON CONFLICT (name, version) DO NOTHING"
)
ADD_TERM: Final = (
    f"INSERT INTO {TERMS} (kind, value, name, version)"  # noqa: S608 - constants
    " VALUES (:kind, :value, :name, :version)"
    " ON CONFLICT DO NOTHING"
)

# A sort key is "MMMMMMMMM.mmmmmmmmm.ppppppppp" then "~" for a release or "!" and the
# pre-release identifiers (core.semver.Version.sort_key): its 30th character ranks every
# release above every pre-release, whatever their numbers.
_RELEASE = "substr({t}.sort_key, 30, 1)"


def _beats(newer: str, older: str) -> str:
    """SQL: version row ``newer`` ranks above ``older`` for "latest" (release first, then
    precedence, then the version text for equal precedence)."""
    rn, ro = _RELEASE.format(t=newer), _RELEASE.format(t=older)
    return (
        f"({rn} > {ro} OR ({rn} = {ro} AND ({newer}.sort_key > {older}.sort_key"
        f" OR ({newer}.sort_key = {older}.sort_key AND {newer}.version > {older}.version))))"
    )


RECOMPUTE_LATEST: Final = (
    f"UPDATE {VERSIONS} SET is_latest = CASE WHEN version = ("  # noqa: S608 - constants
    f"SELECT o.version FROM {VERSIONS} o WHERE o.name = :name AND o.status = 'active'"
    f" ORDER BY {_RELEASE.format(t='o')} DESC, o.sort_key DESC, o.version DESC LIMIT 1"
    ") THEN 1 ELSE 0 END WHERE name = :name"
)
SELECT_VERSION: Final = f"{_FROM} WHERE v.name = :name AND v.version = :version"
SELECT_VERSIONS_OF: Final = f"{_FROM} WHERE v.name = :name ORDER BY v.sort_key DESC, v.version DESC"
SET_STATUS: Final = (
    f"UPDATE {VERSIONS} SET status = :status"  # noqa: S608 - constants
    " WHERE name = :name AND version = :version"
)
DUE_FOR_PROBE: Final = (
    f"{_FROM} WHERE v.status = 'active'"
    " AND (v.health_next_check IS NULL OR v.health_next_check <= :now)"
    " ORDER BY v.health_next_check ASC NULLS FIRST, v.name, v.version LIMIT :limit"
)
RECORD_HEALTH: Final = (
    f"UPDATE {VERSIONS} SET health_state = :health_state,"  # noqa: S608 - constants
    " health_checked_at = :health_checked_at, health_last_seen = :health_last_seen,"
    " health_error_code = :health_error_code, health_error_reason = :health_error_reason,"
    " health_failures = :health_failures, health_next_check = :health_next_check"
    " WHERE name = :name AND version = :version AND status <> 'deleted'"
)
UPSERT_KEY: Final = (
    f"INSERT INTO {KEYS} (key_hash, role, label, patterns, created_at)"  # noqa: S608
    " VALUES (:key_hash, :role, :label, :patterns, :created_at)"
    " ON CONFLICT (key_hash) DO UPDATE SET role = excluded.role, label = excluded.label,"
    " patterns = excluded.patterns, created_at = excluded.created_at"
)
_KEY_COLUMNS: Final = "key_hash, role, label, patterns, created_at"
SELECT_KEY: Final = f"SELECT {_KEY_COLUMNS} FROM {KEYS} WHERE key_hash = :key_hash"  # noqa: S608
LIST_KEYS: Final = f"SELECT {_KEY_COLUMNS} FROM {KEYS} ORDER BY created_at, key_hash"  # noqa: S608
DELETE_KEYS: Final = f"DELETE FROM {KEYS} WHERE label = :label"  # noqa: S608


# --- records <-> rows -----------------------------------------------------------------------


def _search_text(name: str, card: dict[str, Any]) -> str:
    """What ``search=`` looks in, lowercased: the catalog name, the card's name and
    description, and each skill's name and description."""
    parts = [name, card.get("name"), card.get("description")]
    skills = card.get("skills")
    for skill in skills if isinstance(skills, list) else []:
        if isinstance(skill, dict):
            parts += [skill.get("name"), skill.get("description")]
    return "\n".join(part for part in parts if isinstance(part, str)).lower()


def health_params(health: Health) -> dict[str, Any]:
    """The ``health_*`` columns of ``health``."""
    return {
        "health_state": health.state,
        "health_checked_at": health.checked_at,
        "health_last_seen": health.last_seen,
        "health_error_code": health.error_code,
        "health_error_reason": health.error_reason,
        "health_failures": health.failures,
        "health_next_check": health.next_check,
    }


def version_params(version: AgentVersion) -> dict[str, Any]:
    """The parameters of ``INSERT_VERSION`` for ``version``."""
    return {
        "name": version.name,
        "version": version.version,
        "sort_key": Version.parse(version.version).sort_key,
        "status": version.status,
        "card": json.dumps(version.card, ensure_ascii=False, separators=(",", ":")),
        "card_url": version.card_url,
        "owner": version.owner,
        "published_at": version.published_at,
        "change": version.change,
        "warnings": json.dumps(list(version.warnings), ensure_ascii=False),
        "search_text": _search_text(version.name, version.card),
        **health_params(version.health),
    }


def term_params(version: AgentVersion) -> list[dict[str, str]]:
    """The rows of ``ADD_TERM`` for ``version``'s card (``records.skill_terms``)."""
    return [
        {"kind": kind, "value": value, "name": version.name, "version": version.version}
        for kind, value in sorted(skill_terms(version.card))
    ]


def version_of(row: Sequence[Any]) -> AgentVersion:
    """The record of one row selected by this module's ``SELECT`` statements."""
    (name, version, status, card, card_url, owner, published_at, change, warnings, is_latest,
     state, checked_at, last_seen, error_code, error_reason, failures, next_check,
     _sort_key) = row  # fmt: skip
    return AgentVersion(
        name=name,
        version=version,
        status=cast(Status, status),
        card=json.loads(card),
        owner=owner,
        published_at=float(published_at),
        change=cast(ChangeKind, change),
        card_url=card_url,
        warnings=tuple(json.loads(warnings)),
        health=Health(
            state=cast(HealthState, state),
            checked_at=_float(checked_at),
            last_seen=_float(last_seen),
            error_code=error_code,
            error_reason=error_reason,
            failures=int(failures),
            next_check=_float(next_check),
        ),
        is_latest=bool(is_latest),
    )


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def key_params(key: CatalogKey) -> dict[str, Any]:
    """The parameters of ``UPSERT_KEY`` for ``key``."""
    return {
        "key_hash": key.key_hash,
        "role": key.role,
        "label": key.label,
        "patterns": json.dumps(list(key.patterns), ensure_ascii=False),
        "created_at": key.created_at,
    }


def key_of(row: Sequence[Any]) -> CatalogKey:
    """The record of one row of ``SELECT_KEY`` / ``LIST_KEYS``."""
    key_hash, role, label, patterns, created_at = row
    return CatalogKey(
        key_hash=key_hash,
        role=cast(Role, role),
        label=label,
        patterns=tuple(json.loads(patterns)),
        created_at=float(created_at),
    )


# --- search ---------------------------------------------------------------------------------

_TERM_FILTERS: Final = (
    ("skill", "skill", False),
    ("tag", "tag", True),
    ("input_mode", "input", True),
    ("output_mode", "output", True),
)
_CURSOR_TAG: Final = "c1"


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _glob_to_like(pattern: str) -> str:
    """A ``*``/``?`` name glob as a ``LIKE`` pattern (escape ``\\``)."""
    return _like_escape(pattern).replace("*", "%").replace("?", "_")


def _encode_cursor(name: str, sort_key: str, version: str) -> str:
    raw = json.dumps([_CURSOR_TAG, name, sort_key, version], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[str, str, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        found = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, binascii.Error, UnicodeError):
        found = None
    if (
        isinstance(found, list)
        and len(found) == 4
        and found[0] == _CURSOR_TAG
        and all(isinstance(part, str) for part in found)
    ):
        return found[1], found[2], found[3]
    raise ValueError(f"cursor {cursor!r} was not returned by this catalog's search")


def _status_list(statuses: Sequence[str], prefix: str, params: dict[str, Any]) -> str:
    names = []
    for index, status in enumerate(dict.fromkeys(statuses)):
        params[f"{prefix}{index}"] = status
        names.append(f":{prefix}{index}")
    return ", ".join(names)


def _status_conditions(query: CatalogQuery, params: dict[str, Any]) -> list[str]:
    """``status`` and ``latest_only``: the indexed ``is_latest`` for the default search,
    else the highest version per agent among the statuses asked."""
    if not query.statuses:
        return ["1 = 0"]
    if query.latest_only and set(query.statuses) == {"active"}:
        return ["v.is_latest = 1"]
    listed = _status_list(query.statuses, "status", params)
    conditions = [f"v.status IN ({listed})"]
    if query.latest_only:
        conditions.append(
            f"NOT EXISTS (SELECT 1 FROM {VERSIONS} o WHERE o.name = v.name"  # noqa: S608
            f" AND o.status IN ({listed}) AND {_beats('o', 'v')})"
        )
    return conditions


def _visible_condition(visible: tuple[str, ...], params: dict[str, Any]) -> str:
    """Names matching one of the ``visible`` globs (names are lowercase, so a pattern with
    an upper-case letter matches none, on both engines)."""
    alternatives = []
    for index, pattern in enumerate(p for p in dict.fromkeys(visible) if p == p.lower()):
        params[f"visible{index}"] = _glob_to_like(pattern)
        alternatives.append(f"v.name LIKE :visible{index} ESCAPE '\\'")
    return f"({' OR '.join(alternatives)})" if alternatives else "1 = 0"


def _conditions(query: CatalogQuery, params: dict[str, Any]) -> list[str]:
    conditions = _status_conditions(query, params)
    if not query.include_unhealthy:
        conditions.append("v.health_state <> 'unhealthy'")
    if query.name is not None:
        params["name"] = query.name
        conditions.append("v.name = :name")
    if query.visible is not None:
        conditions.append(_visible_condition(query.visible, params))
    if query.search:
        params["search"] = f"%{_like_escape(query.search.lower())}%"
        conditions.append("v.search_text LIKE :search ESCAPE '\\'")
    for field, kind, lowered in _TERM_FILTERS:
        value = getattr(query, field)
        if value is None:
            continue
        params[f"{field}_kind"] = kind
        params[field] = value.lower() if lowered else value
        conditions.append(
            f"(v.name, v.version) IN (SELECT t.name, t.version FROM {TERMS} t"  # noqa: S608
            f" WHERE t.kind = :{field}_kind AND t.value = :{field})"
        )
    if query.cursor is not None:
        params["c_name"], params["c_sort"], params["c_version"] = _decode_cursor(query.cursor)
        conditions.append(
            "(v.name > :c_name OR (v.name = :c_name AND (v.sort_key < :c_sort"
            " OR (v.sort_key = :c_sort AND v.version < :c_version))))"
        )
    return conditions


def search_statement(query: CatalogQuery) -> tuple[str, dict[str, Any]]:
    """The ``SELECT`` of one page of ``query`` (up to ``limit + 1`` rows) and its
    parameters; ``ValueError`` naming a cursor this module did not write."""
    params: dict[str, Any] = {"limit": max(query.limit, 0) + 1}
    where = " AND ".join(_conditions(query, params))
    sql = f"{_FROM} WHERE {where} ORDER BY v.name, v.sort_key DESC, v.version DESC LIMIT :limit"
    return sql, params


def page_of(rows: Sequence[Sequence[Any]], query: CatalogQuery) -> CatalogPage:
    """The page of ``rows`` (as selected by ``search_statement(query)``): at most
    ``query.limit`` versions, and a cursor when more follow."""
    limit = max(query.limit, 0)
    shown = rows[:limit]
    if len(rows) <= limit or not shown:
        return CatalogPage(rows=[version_of(row) for row in shown])
    last = shown[-1]
    cursor = _encode_cursor(last[0], last[-1], last[1])
    return CatalogPage(rows=[version_of(row) for row in shown], next_cursor=cursor)

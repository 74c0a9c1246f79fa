"""``llamon catalog keys|list|serve`` through the real ``llamon`` app (typer's ``CliRunner``)
on a real SQLite catalog under a temporary ``--home``, and ``serve`` in a process of its own
against a PostgreSQL port nobody listens on."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from typer.testing import CliRunner, Result

from llamon_agent.catalog.access import hash_key
from llamon_agent.catalog.cli_serve import exposure_warnings
from llamon_agent.catalog.records import AgentVersion, CatalogKey, Health
from llamon_agent.catalog.store import CatalogStore, open_catalog_store
from llamon_agent.cli import app
from tests._support.catalog_app import agent_card, served_catalog
from tests._support.serve import llamon_cli

T = TypeVar("T")
KEY = re.compile(r"^lcat_[A-Za-z0-9_-]{43}$")
NOON = 1_764_590_400.0
"""2025-12-01T12:00:00Z."""

runner = CliRunner()


def _cli(home: Path, *args: str) -> Result:
    return runner.invoke(app, ["catalog", *args, "--home", str(home)], env={"COLUMNS": "200"})


def _on_store(home: Path, use: Callable[[CatalogStore], Awaitable[T]]) -> T:
    async def run() -> T:
        store = await open_catalog_store(home=home)
        try:
            return await use(store)
        finally:
            await store.close()

    return asyncio.run(run())


def _table(text: str) -> list[list[str]]:
    """The cells of a rich table's rows (the header first)."""
    lines = [line.replace("┃", "│") for line in text.splitlines()]
    return [[cell.strip() for cell in line.split("│")[1:-1]] for line in lines if "│" in line]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "llamon"


# keys ------------------------------------------------------------------------------------


def test_keys_add_prints_only_the_key_on_stdout_and_stores_only_its_hash(home: Path) -> None:
    result = _cli(home, "keys", "add", "--role", "publisher", "--label", "billing",
                  "--pattern", "billing-*", "--pattern", "shared/*")  # fmt: skip
    assert result.exit_code == 0, result.output
    key = result.stdout.strip()
    assert result.stdout == key + "\n"
    assert KEY.fullmatch(key)
    assert result.stderr.splitlines() == [
        "llamon catalog keys add: added a publisher key labelled 'billing' (billing-*, "
        "shared/*). It is shown once, below; only its hash is stored."
    ]
    (stored,) = _on_store(home, lambda store: store.list_keys())
    assert (stored.key_hash, stored.role, stored.label, stored.patterns) == (
        hash_key(key),
        "publisher",
        "billing",
        ("billing-*", "shared/*"),
    )
    assert key not in (home / "catalog.db").read_bytes().decode("latin-1")


def test_keys_add_twice_gives_two_keys_and_says_the_label_is_shared(home: Path) -> None:
    first = _cli(home, "keys", "add", "--role", "admin", "--label", "ops")
    second = _cli(home, "keys", "add", "--role", "admin", "--label", "ops")
    assert (first.exit_code, second.exit_code) == (0, 0)
    assert first.stdout != second.stdout
    assert second.stderr.splitlines()[1] == (
        "  2 keys are now labelled 'ops'; keys revoke --label ops removes them all."
    )
    assert len(_on_store(home, lambda store: store.list_keys())) == 2


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--role", "owner", "--label", "x"],
            "--role 'owner' is not known. Use one of: publisher, caller, admin.",
        ),
        (
            ["--role", "caller", "--label", "x", "--pattern", "Orders"],
            "--pattern: 'Orders' is not a name pattern: use lowercase letters, digits, '-', '/' "
            "and the wildcards '*' and '?'.",
        ),
        (
            ["--role", "caller", "--label", "x", "--pattern", "team-[ab]"],
            "--pattern: 'team-[ab]' is not a name pattern: use lowercase letters, digits, '-', "
            "'/' and the wildcards '*' and '?'.",
        ),
        (
            ["--role", "caller", "--label", "x"],
            "a caller key needs --pattern: the names it may see and resolve.",
        ),
        (
            ["--role", "publisher", "--label", "x"],
            "a publisher key needs --pattern: the names it may publish.",
        ),
        (
            ["--role", "admin", "--label", "x", "--pattern", "*"],
            "an admin key sees and changes every name; leave out --pattern.",
        ),
        (["--role", "admin", "--label", " "], "--label must not be empty."),
    ],
    ids=[
        "role",
        "uppercase",
        "brackets",
        "caller-bare",
        "publisher-bare",
        "admin-pattern",
        "label",
    ],
)
def test_keys_add_refuses_bad_input_in_one_line(home: Path, args: list[str], line: str) -> None:
    result = _cli(home, "keys", "add", *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [f"llamon catalog keys add: {line}"]
    assert not (home / "catalog.db").exists()
    after = _cli(home, "keys", "add", "--role", "caller", "--label", "x", "--pattern", "a")
    assert after.exit_code == 0


def test_keys_list_shows_label_role_patterns_and_time_never_key_or_hash(home: Path) -> None:
    async def add(store: CatalogStore) -> None:
        await store.add_key(CatalogKey("a" * 64, "admin", "ops", (), created_at=NOON))
        await store.add_key(CatalogKey("b" * 64, "caller", "shop", ("orders", "pay-*"), NOON + 61))

    _on_store(home, add)
    listed = _cli(home, "keys", "list", "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == [
        {"label": "ops", "role": "admin", "patterns": [], "created": "2025-12-01T12:00:00Z"},
        {
            "label": "shop",
            "role": "caller",
            "patterns": ["orders", "pay-*"],
            "created": "2025-12-01T12:01:01Z",
        },
    ]
    table = _cli(home, "keys", "list")
    assert table.exit_code == 0
    assert _table(table.stdout) == [
        ["label", "role", "patterns", "created"],
        ["ops", "admin", "*", "2025-12-01T12:00:00Z"],
        ["shop", "caller", "orders pay-*", "2025-12-01T12:01:01Z"],
    ]
    assert "aaaa" not in table.output + listed.output
    assert "bbbb" not in table.output + listed.output


def test_keys_list_of_no_keys_says_how_to_add_one(home: Path) -> None:
    result = _cli(home, "keys", "list")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == (
        "No keys. Create one: llamon catalog keys add --role admin --label NAME\n"
    )


def test_keys_revoke_removes_every_key_with_the_label(home: Path) -> None:
    for _ in range(2):
        _cli(home, "keys", "add", "--role", "caller", "--label", "shop", "--pattern", "orders")
    _cli(home, "keys", "add", "--role", "admin", "--label", "ops")
    result = _cli(home, "keys", "revoke", "--label", "shop")
    assert result.exit_code == 0
    assert result.stderr == "llamon catalog keys revoke: removed 2 key(s) labelled 'shop'.\n"
    labels = [k.label for k in _on_store(home, lambda store: store.list_keys())]
    assert labels == ["ops"]


def test_keys_revoke_of_an_unknown_label_fails_in_one_line(home: Path) -> None:
    _cli(home, "keys", "add", "--role", "admin", "--label", "ops")
    result = _cli(home, "keys", "revoke", "--label", "shop")
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "llamon catalog keys revoke: no key is labelled 'shop' (llamon catalog keys list)."
    ]
    assert len(_on_store(home, lambda store: store.list_keys())) == 1


# list ------------------------------------------------------------------------------------


def _card(name: str, version: str, *skills: str) -> dict[str, Any]:
    return {
        "name": name,
        "version": version,
        "description": f"{name} for the governance view.",
        "url": "http://127.0.0.1:1/",
        "skills": [{"id": s, "name": s, "description": s, "tags": []} for s in skills],
    }


def _version(name: str, version: str, owner: str, *skills: str) -> AgentVersion:
    return AgentVersion(
        name=name,
        version=version,
        status="active",
        card=_card(name, version, *skills),
        owner=owner,
        published_at=NOON,
    )


async def _governed(store: CatalogStore) -> None:
    """orders: 1.0.0, 1.1.0, 2.0.0 (deleted), healthy then failing; pay: one deprecated
    version never probed; gone: its only version deleted."""
    for version in ("1.0.0", "1.1.0", "2.0.0"):
        await store.add_version(_version("orders", version, "billing", "search"))
    await store.set_status("orders", "2.0.0", "deleted")
    await store.record_health(
        "orders", "1.0.0", Health("healthy", checked_at=NOON + 10, last_seen=NOON + 10)
    )
    await store.record_health(
        "orders",
        "1.1.0",
        Health(
            "unhealthy",
            checked_at=NOON + 90,
            last_seen=NOON + 30,
            error_code="UPSTREAM_UNAVAILABLE",
            error_reason="connection_refused",
            failures=2,
        ),
    )
    await store.add_version(_version("pay", "0.1.0", "payments", "charge"))
    await store.set_status("pay", "0.1.0", "deprecated")
    await store.add_version(_version("gone", "1.0.0", "billing", "x"))
    await store.set_status("gone", "1.0.0", "deleted")


ORDERS = {
    "name": "orders",
    "versions": 2,
    "deleted": 1,
    "latest": "1.1.0",
    "status": "active",
    "health": "unhealthy",
    "lastFailure": "UPSTREAM_UNAVAILABLE/connection_refused",
    "owner": "billing",
    "lastSeen": "2025-12-01T12:00:30Z",
}
PAY = {
    "name": "pay",
    "versions": 1,
    "deleted": 0,
    "latest": None,
    "status": "deprecated",
    "health": "unknown",
    "lastFailure": None,
    "owner": "payments",
    "lastSeen": None,
}
GONE = {
    "name": "gone",
    "versions": 0,
    "deleted": 1,
    "latest": None,
    "status": "deleted",
    "health": "unknown",
    "lastFailure": None,
    "owner": "billing",
    "lastSeen": None,
}


def test_list_json_gives_one_row_per_agent_with_deleted_versions_counted_apart(
    home: Path,
) -> None:
    _on_store(home, _governed)
    result = _cli(home, "list", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [ORDERS, PAY]


def test_list_all_also_gives_the_agents_whose_every_version_is_deleted(home: Path) -> None:
    _on_store(home, _governed)
    result = _cli(home, "list", "--json", "--all")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [GONE, ORDERS, PAY]


def test_list_prints_the_governance_table(home: Path) -> None:
    _on_store(home, _governed)
    result = _cli(home, "list")
    assert result.exit_code == 0, result.output
    assert _table(result.stdout) == [
        ["name", "versions", "latest", "status", "health", "owner", "last seen"],
        [
            "orders",
            "2 (+1 deleted)",
            "1.1.0",
            "active",
            "unhealthy UPSTREAM_UNAVAILABLE/connection_refused",
            "billing",
            "2025-12-01T12:00:30Z",
        ],
        ["pay", "1", "-", "deprecated", "unknown", "payments", "never"],
    ]


def test_list_of_an_empty_catalog_says_how_to_publish(home: Path) -> None:
    result = _cli(home, "list")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == (
        "No agents. Publish one: llamon catalog publish --url CATALOG --card FILE\n"
    )
    assert json.loads(_cli(home, "list", "--json").stdout) == []


def test_list_refuses_a_database_url_that_is_not_sqlite_or_postgres(home: Path) -> None:
    result = _cli(home, "list", "--database-url", "mysql://root@127.0.0.1/catalog")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "llamon catalog list: --database-url: the catalog stores in SQLite or PostgreSQL, not "
        "'mysql' (postgresql://user@host/db, or leave it out for SQLite under LLAMON_HOME)."
    ]


# serve -----------------------------------------------------------------------------------


async def test_serve_refuses_an_unreachable_postgres_in_one_line(tmp_path: Path) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    port = closed.getsockname()[1]
    try:
        code, out, err = await llamon_cli(
            "catalog", "serve", "--port", "0", "--home", str(tmp_path),
            "--database-url", f"postgresql://llamon:s3cret@127.0.0.1:{port}/catalog",
        )  # fmt: skip
    finally:
        closed.close()
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "llamon catalog serve: PostgreSQL at the address in --database-url (or "
        "LLAMON_DATABASE_URL) refused the connection. Start the database server, or fix "
        "the host and port in the URL."
    ]
    assert "s3cret" not in err
    assert str(port) not in err


def test_serve_refuses_a_catalog_written_by_a_newer_llamon(home: Path) -> None:
    import sqlite3

    _on_store(home, lambda store: store.list_keys())
    database = home / "catalog.db"
    with sqlite3.connect(database) as connection:
        connection.execute("PRAGMA user_version = 999")
    connection.close()
    result = _cli(home, "serve", "--port", "0")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("llamon catalog serve: ")
    assert "999" in line
    assert "Traceback" not in result.output


def test_serve_warns_on_an_address_that_is_not_loopback_without_any_key() -> None:
    everywhere = "0.0.0.0"  # noqa: S104 - the address the warning is about
    assert exposure_warnings(everywhere, keys=0, open_read=False) == [
        "warning: listening on 0.0.0.0 with no key configured: every /v0 request is refused "
        "until you add one (llamon catalog keys add --role admin --label NAME)."
    ]
    assert exposure_warnings(everywhere, keys=1, open_read=True) == [
        "warning: --open-read on 0.0.0.0: anyone who reaches this address can search and "
        "resolve every agent."
    ]
    assert exposure_warnings(everywhere, keys=1, open_read=False) == []
    assert exposure_warnings("127.0.0.1", keys=0, open_read=True) == []
    assert exposure_warnings("localhost", keys=0, open_read=False) == []


# publish ---------------------------------------------------------------------------------


@pytest.mark.reason("invalid_card")
async def test_publish_of_a_card_refused_by_lint_prints_each_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    card = agent_card()
    card["description"] = " "
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    async with served_catalog(tmp_path) as catalog:
        monkeypatch.setenv("TEST_PUBLISH_KEY", catalog.keys["orders-team"])
        publish = ("catalog", "publish", "--url", catalog.url, "--key-env", "TEST_PUBLISH_KEY")
        code, out, err = await llamon_cli(*publish, "--card", str(path))
        assert (code, out) == (1, "")
        lines = err.splitlines()
        assert lines[0].startswith("llamon catalog publish: INVALID_INPUT/invalid_card: ")
        assert lines[1:] == [
            "  error: description_empty at description: description is blank",
            "  warning: auth_not_declared at securitySchemes: no security schemes declared; "
            "clients cannot tell how to authenticate",
        ]
        card["description"] = "Looks up orders by number and reports their shipping state."
        path.write_text(json.dumps(card))
        code, out, err = await llamon_cli(*publish, "--card", str(path))
        assert (code, out) == (0, "orders@1.0.0 (initial)\n")


async def test_publish_without_the_key_variable_or_with_two_sources_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VARIABLE", raising=False)
    base = ("catalog", "publish", "--url", "http://127.0.0.1:9/")
    code, out, err = await llamon_cli(
        *base, "--card", "x.json", "--key-env", "NO_SUCH_KEY_VARIABLE"
    )
    assert (code, out, err) == (
        2,
        "",
        "llamon catalog publish: --key-env NO_SUCH_KEY_VARIABLE: the variable is not set "
        "(a publisher key).\n",
    )
    code, out, err = await llamon_cli(*base, "--card", "x.json", "--agent-url", "http://a/")
    assert (code, err) == (
        2,
        "llamon catalog publish: give exactly one of --card FILE or --agent-url URL.\n",
    )

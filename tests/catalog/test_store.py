"""The catalog store on SQLite and PostgreSQL: every method, the latest rule, ownership,
each search filter, visibility globs and cursor paging, the same answers on both engines."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from llamon_agent.catalog.records import (
    AgentVersion,
    CatalogKey,
    CatalogQuery,
    Health,
    Status,
)
from llamon_agent.catalog.store import CatalogStore, NameOwned, VersionTaken
from tests._support.catalog_stores import catalog_store

__all__ = ["catalog_store"]

Skill = dict[str, Any]


def skill(skill_id: str, **fields: Any) -> Skill:
    return {"id": skill_id, "name": skill_id.title(), "description": f"does {skill_id}", **fields}


def card(name: str = "Orders", *skills: Skill, description: str = "Finds orders") -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "url": "http://127.0.0.1:9/",
        "version": "1.0.0",
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["application/json"],
        "skills": list(skills) or [skill("lookup")],
    }


def version(
    name: str,
    number: str,
    *skills: Skill,
    status: Status = "active",
    owner: str = "acme",
    description: str = "Finds orders",
    at: float = 1_000.0,
) -> AgentVersion:
    return AgentVersion(
        name=name,
        version=number,
        status=status,
        card=card(name.title(), *skills, description=description),
        owner=owner,
        published_at=at,
    )


async def add(store: CatalogStore, *versions: AgentVersion) -> None:
    for each in versions:
        await store.add_version(each)


def listed(rows: list[AgentVersion]) -> list[tuple[str, str]]:
    return [(row.name, row.version) for row in rows]


async def found(store: CatalogStore, **query: Any) -> list[tuple[str, str]]:
    return listed((await store.search(CatalogQuery(**query))).rows)


# --- versions -------------------------------------------------------------------------------


async def test_a_version_comes_back_as_stored(catalog_store: CatalogStore) -> None:
    stored = AgentVersion(
        name="acme/orders",
        version="1.2.3-beta.1+build.7",
        status="active",
        card=card("Orders", skill("lookup", tags=["Sales"]), description="Bestellungen 注文 ✓"),
        owner="acme",
        published_at=1_700_000_000.5,
        change="minor",
        card_url="http://127.0.0.1:9/.well-known/agent-card.json",
        warnings=({"rule": "no-examples", "message": "skill lookup has no examples"},),
    )
    returned = await catalog_store.add_version(stored)
    expected = dataclasses.replace(stored, is_latest=True)
    assert returned == expected
    assert await catalog_store.get_version("acme/orders", "1.2.3-beta.1+build.7") == expected
    assert await catalog_store.get_version("acme/orders", "1.2.3") is None
    assert await catalog_store.get_version("acme/other", "1.2.3-beta.1+build.7") is None
    assert await catalog_store.owner_of("acme/orders") == "acme"
    assert await catalog_store.owner_of("acme/other") is None


async def test_versions_of_lists_every_version_newest_first(catalog_store: CatalogStore) -> None:
    await add(
        catalog_store,
        version("orders", "1.10.0"),
        version("orders", "1.9.0"),
        version("orders", "2.0.0-rc.2"),
        version("orders", "2.0.0-rc.10"),
        version("orders", "1.0.0", status="deleted"),
        version("billing", "3.0.0"),
    )
    rows = await catalog_store.versions_of("orders")
    assert [row.version for row in rows] == [
        "2.0.0-rc.10",
        "2.0.0-rc.2",
        "1.10.0",
        "1.9.0",
        "1.0.0",
    ]
    assert [row.is_latest for row in rows] == [False, False, True, False, False]
    assert await catalog_store.versions_of("nobody") == []


async def test_deprecating_the_latest_makes_the_previous_latest(
    catalog_store: CatalogStore,
) -> None:
    await add(catalog_store, version("orders", "1.0.0"), version("orders", "1.1.0"))
    changed = await catalog_store.set_status("orders", "1.1.0", "deprecated")
    assert changed is not None
    assert (changed.status, changed.is_latest) == ("deprecated", False)
    assert await found(catalog_store) == [("orders", "1.0.0")]
    reactivated = await catalog_store.set_status("orders", "1.1.0", "active")
    assert reactivated is not None
    assert reactivated.is_latest
    assert await found(catalog_store) == [("orders", "1.1.0")]


async def test_a_release_is_latest_over_a_higher_pre_release(catalog_store: CatalogStore) -> None:
    await add(catalog_store, version("orders", "1.5.0"), version("orders", "2.0.0-rc.1"))
    assert await found(catalog_store) == [("orders", "1.5.0")]


async def test_an_agent_with_only_pre_releases_has_its_highest_as_latest(
    catalog_store: CatalogStore,
) -> None:
    await add(
        catalog_store,
        version("orders", "1.0.0-alpha.2"),
        version("orders", "1.0.0-alpha.10"),
        version("orders", "1.0.0-alpha"),
    )
    assert await found(catalog_store) == [("orders", "1.0.0-alpha.10")]


async def test_an_agent_with_no_active_version_has_no_latest(catalog_store: CatalogStore) -> None:
    await add(catalog_store, version("orders", "1.0.0"))
    await catalog_store.set_status("orders", "1.0.0", "deleted")
    assert [row.is_latest for row in await catalog_store.versions_of("orders")] == [False]
    assert await found(catalog_store) == []


async def test_concurrent_writers_of_one_agent_leave_exactly_one_latest(
    catalog_store: CatalogStore,
) -> None:
    numbers = [f"1.{minor}.0" for minor in range(12)]
    await asyncio.gather(*(catalog_store.add_version(version("orders", n)) for n in numbers))
    rows = await catalog_store.versions_of("orders")
    assert [row.version for row in rows if row.is_latest] == ["1.11.0"]
    await asyncio.gather(
        *(catalog_store.set_status("orders", n, "deprecated") for n in numbers[6:]),
        *(catalog_store.set_status("orders", n, "deleted") for n in numbers[4:6]),
    )
    rows = await catalog_store.versions_of("orders")
    assert [row.version for row in rows if row.is_latest] == ["1.3.0"]
    assert await found(catalog_store) == [("orders", "1.3.0")]


async def test_set_status_of_an_absent_version_is_none(catalog_store: CatalogStore) -> None:
    await add(catalog_store, version("orders", "1.0.0"))
    assert await catalog_store.set_status("orders", "9.9.9", "deprecated") is None
    assert await catalog_store.set_status("nobody", "1.0.0", "deprecated") is None
    assert await found(catalog_store) == [("orders", "1.0.0")]


async def test_publishing_an_existing_version_raises_version_taken(
    catalog_store: CatalogStore,
) -> None:
    await add(catalog_store, version("orders", "1.0.0", description="first"))
    await catalog_store.set_status("orders", "1.0.0", "deleted")
    with pytest.raises(VersionTaken, match=r"^orders 1\.0\.0 is already published$"):
        await catalog_store.add_version(version("orders", "1.0.0", description="second"))
    kept = await catalog_store.get_version("orders", "1.0.0")
    assert kept is not None
    assert (kept.status, kept.card["description"]) == ("deleted", "first")
    await catalog_store.add_version(version("orders", "1.0.1"))  # the next one is answered
    assert await found(catalog_store) == [("orders", "1.0.1")]


async def test_the_first_publisher_keeps_the_name_under_a_race(
    catalog_store: CatalogStore,
) -> None:
    first, second = await asyncio.gather(
        catalog_store.add_version(version("orders", "1.0.0", owner="acme")),
        catalog_store.add_version(version("orders", "1.1.0", owner="rival")),
    )
    owner = await catalog_store.owner_of("orders")
    assert owner in ("acme", "rival")
    await catalog_store.add_version(version("orders", "1.2.0", owner="third"))
    assert await catalog_store.owner_of("orders") == owner
    assert (first.owner, second.owner) == ("acme", "rival")  # each version keeps its publisher


async def test_owned_by_lets_exactly_one_racing_publisher_have_a_new_name(
    catalog_store: CatalogStore,
) -> None:
    outcomes = await asyncio.gather(
        catalog_store.add_version(version("orders", "1.0.0", owner="acme"), owned_by="acme"),
        catalog_store.add_version(version("orders", "1.1.0", owner="rival"), owned_by="rival"),
        return_exceptions=True,
    )
    won = [o for o in outcomes if isinstance(o, AgentVersion)]
    lost = [o for o in outcomes if isinstance(o, NameOwned)]
    assert (len(won), len(lost)) == (1, 1)
    assert await catalog_store.owner_of("orders") == won[0].owner
    assert (lost[0].name, lost[0].owner) == ("orders", won[0].owner)
    assert str(lost[0]) == "'orders' is owned by another publisher"
    assert listed(await catalog_store.versions_of("orders")) == [("orders", won[0].version)]
    again = await catalog_store.add_version(
        version("orders", "2.0.0", owner=won[0].owner), owned_by=won[0].owner
    )
    assert again.is_latest


# --- search filters -------------------------------------------------------------------------


@pytest.fixture
async def shelf(catalog_store: CatalogStore) -> CatalogStore:
    """Three agents: orders (1.0.0, 1.1.0), billing (2.0.0), chat (0.1.0)."""
    await add(
        catalog_store,
        version("orders", "1.0.0", skill("lookup", tags=["Sales"])),
        version(
            "orders",
            "1.1.0",
            skill("lookup", tags=["Sales"]),
            skill("refund", tags=["money"], inputModes=["Application/PDF"]),
        ),
        version("billing", "2.0.0", skill("invoice", tags=["money"], outputModes=["text/csv"])),
        version("chat", "0.1.0", skill("talk"), description="Small talk"),
    )
    return catalog_store


async def test_the_default_search_lists_each_agents_latest_by_name(shelf: CatalogStore) -> None:
    assert await found(shelf) == [("billing", "2.0.0"), ("chat", "0.1.0"), ("orders", "1.1.0")]


async def test_skill_finds_the_versions_with_that_skill_id(shelf: CatalogStore) -> None:
    assert await found(shelf, skill="refund") == [("orders", "1.1.0")]
    assert await found(shelf, skill="lookup", latest_only=False) == [
        ("orders", "1.1.0"),
        ("orders", "1.0.0"),
    ]
    assert await found(shelf, skill="nothing") == []


async def test_tag_compares_lowercased(shelf: CatalogStore) -> None:
    assert await found(shelf, tag="MONEY") == [("billing", "2.0.0"), ("orders", "1.1.0")]
    assert await found(shelf, tag="sales") == [("orders", "1.1.0")]


async def test_input_mode_matches_a_skills_own_or_the_cards_default(shelf: CatalogStore) -> None:
    assert await found(shelf, input_mode="application/pdf") == [("orders", "1.1.0")]
    assert await found(shelf, input_mode="Text/Plain") == [
        ("billing", "2.0.0"),
        ("chat", "0.1.0"),
        ("orders", "1.1.0"),
    ]


async def test_output_mode_matches_a_skills_own_or_the_cards_default(shelf: CatalogStore) -> None:
    assert await found(shelf, output_mode="text/csv") == [("billing", "2.0.0")]
    assert await found(shelf, output_mode="application/json") == [
        ("chat", "0.1.0"),
        ("orders", "1.1.0"),
    ]


async def test_every_filter_must_hold(shelf: CatalogStore) -> None:
    assert await found(shelf, skill="refund", input_mode="application/pdf") == [("orders", "1.1.0")]
    assert await found(shelf, skill="lookup", input_mode="application/pdf") == [("orders", "1.1.0")]
    assert await found(shelf, tag="money", output_mode="text/csv") == [("billing", "2.0.0")]
    assert await found(shelf, skill="talk", tag="money") == []


async def test_search_matches_name_description_and_skills_case_insensitively(
    shelf: CatalogStore,
) -> None:
    assert await found(shelf, search="SMALL TALK") == [("chat", "0.1.0")]  # description
    assert await found(shelf, search="bill") == [("billing", "2.0.0")]  # name
    assert await found(shelf, search="Refund") == [("orders", "1.1.0")]  # a skill's name
    assert await found(shelf, search="does invoice") == [("billing", "2.0.0")]  # its description
    assert await found(shelf, search="nowhere") == []


async def test_search_reads_percent_and_underscore_literally(catalog_store: CatalogStore) -> None:
    await add(
        catalog_store,
        version("discount", "1.0.0", description="gives 50% off_peak"),
        version("other", "1.0.0", description="gives 50 percent offXpeak"),
    )
    assert await found(catalog_store, search="50%") == [("discount", "1.0.0")]
    assert await found(catalog_store, search="off_peak") == [("discount", "1.0.0")]
    assert await found(catalog_store, search="%") == [("discount", "1.0.0")]
    assert await found(catalog_store, search="\\") == []


async def test_search_finds_unicode_text(catalog_store: CatalogStore) -> None:
    await add(
        catalog_store,
        version("shop", "1.0.0", description="Übersetzt BESTELLUNGEN für 東京 🚚"),
        version("other", "1.0.0", description="plain"),
    )
    assert await found(catalog_store, search="übersetzt") == [("shop", "1.0.0")]
    assert await found(catalog_store, search="bestellungen für 東京") == [("shop", "1.0.0")]
    assert await found(catalog_store, search="🚚") == [("shop", "1.0.0")]
    (row,) = (await catalog_store.search(CatalogQuery(search="東京"))).rows
    assert row.card["description"] == "Übersetzt BESTELLUNGEN für 東京 🚚"


async def test_name_keeps_one_agents_versions(shelf: CatalogStore) -> None:
    assert await found(shelf, name="orders", latest_only=False) == [
        ("orders", "1.1.0"),
        ("orders", "1.0.0"),
    ]
    assert await found(shelf, name="nobody") == []


async def test_latest_only_with_deprecated_keeps_the_highest_deprecated_per_agent(
    shelf: CatalogStore,
) -> None:
    await add(shelf, version("orders", "0.9.0", status="deprecated"))
    await add(shelf, version("orders", "0.8.0", status="deprecated"))
    await shelf.set_status("billing", "2.0.0", "deprecated")
    assert await found(shelf, statuses=("deprecated",)) == [
        ("billing", "2.0.0"),
        ("orders", "0.9.0"),
    ]
    assert await found(shelf, statuses=("deprecated",), latest_only=False) == [
        ("billing", "2.0.0"),
        ("orders", "0.9.0"),
        ("orders", "0.8.0"),
    ]


async def test_latest_only_with_active_and_deprecated_keeps_the_highest_of_either(
    shelf: CatalogStore,
) -> None:
    await add(shelf, version("orders", "3.0.0", status="deprecated"))
    await add(shelf, version("chat", "0.2.0-rc.1", status="deprecated"))
    assert await found(shelf, statuses=("active", "deprecated")) == [
        ("billing", "2.0.0"),
        ("chat", "0.1.0"),  # a release ranks above a pre-release
        ("orders", "3.0.0"),
    ]


async def test_filters_select_agents_by_their_latest_version_only(shelf: CatalogStore) -> None:
    await add(shelf, version("orders", "2.0.0", skill("lookup")))  # refund removed
    assert await found(shelf, skill="refund") == []
    assert await found(shelf, skill="refund", latest_only=False) == [("orders", "1.1.0")]


async def test_deleted_versions_are_found_only_when_asked_for(shelf: CatalogStore) -> None:
    await shelf.set_status("chat", "0.1.0", "deleted")
    assert await found(shelf) == [("billing", "2.0.0"), ("orders", "1.1.0")]
    assert await found(shelf, statuses=("deleted",)) == [("chat", "0.1.0")]
    assert await found(shelf, statuses=()) == []


async def test_unhealthy_versions_are_left_out_unless_asked_for(shelf: CatalogStore) -> None:
    await shelf.record_health("chat", "0.1.0", Health(state="unhealthy", failures=3))
    await shelf.record_health("billing", "2.0.0", Health(state="healthy", last_seen=5.0))
    assert await found(shelf) == [("billing", "2.0.0"), ("orders", "1.1.0")]
    assert await found(shelf, include_unhealthy=True) == [
        ("billing", "2.0.0"),
        ("chat", "0.1.0"),
        ("orders", "1.1.0"),
    ]


# --- visibility -----------------------------------------------------------------------------


@pytest.fixture
async def names(catalog_store: CatalogStore) -> CatalogStore:
    for name in ("orders", "orders-eu", "acme/orders", "acme/billing", "a", "ab", "x"):
        await catalog_store.add_version(version(name, "1.0.0"))
    return catalog_store


async def visible(store: CatalogStore, *patterns: str) -> list[str]:
    return [name for name, _ in await found(store, visible=patterns)]


async def test_a_trailing_star_glob_sees_names_with_that_prefix(names: CatalogStore) -> None:
    assert await visible(names, "orders*") == ["orders", "orders-eu"]


async def test_a_namespace_glob_sees_that_namespace(names: CatalogStore) -> None:
    assert await visible(names, "acme/*") == ["acme/billing", "acme/orders"]


async def test_a_question_mark_glob_sees_one_character(names: CatalogStore) -> None:
    assert await visible(names, "?") == ["a", "x"]
    assert await visible(names, "a?") == ["ab"]


async def test_several_globs_see_their_union(names: CatalogStore) -> None:
    assert await visible(names, "x", "acme/o*", "orders") == ["acme/orders", "orders", "x"]
    assert await visible(names, "*") == [
        "a", "ab", "acme/billing", "acme/orders", "orders", "orders-eu", "x",
    ]  # fmt: skip


async def test_no_globs_or_upper_case_globs_see_nothing(names: CatalogStore) -> None:
    assert await visible(names) == []
    assert await visible(names, "ORDERS*", "Acme/*") == []
    assert await visible(names, "%", "_", "orders_eu") == []


# --- pages ----------------------------------------------------------------------------------


async def test_paging_by_seven_through_250_versions_has_no_gap_or_duplicate(
    catalog_store: CatalogStore,
) -> None:
    expected: list[tuple[str, str]] = []
    for agent in range(50):
        name = f"agent-{agent:02d}"
        numbers = ["1.0.0", "1.0.1", "1.1.0-rc.1", "1.1.0", "10.0.0"]
        for number in numbers:
            await catalog_store.add_version(version(name, number))
        expected += [(name, n) for n in ("10.0.0", "1.1.0", "1.1.0-rc.1", "1.0.1", "1.0.0")]
    seen: list[tuple[str, str]] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await catalog_store.search(CatalogQuery(latest_only=False, limit=7, cursor=cursor))
        assert len(page.rows) <= 7
        seen += listed(page.rows)
        pages += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == expected
    assert pages == 36  # 35 full pages and the last 5


async def test_a_page_holds_at_most_limit_rows(shelf: CatalogStore) -> None:
    page = await shelf.search(CatalogQuery(limit=2))
    assert listed(page.rows) == [("billing", "2.0.0"), ("chat", "0.1.0")]
    assert page.next_cursor is not None
    last = await shelf.search(CatalogQuery(limit=2, cursor=page.next_cursor))
    assert (listed(last.rows), last.next_cursor) == ([("orders", "1.1.0")], None)
    exact = await shelf.search(CatalogQuery(limit=3))
    assert (len(exact.rows), exact.next_cursor) == (3, None)


@pytest.mark.parametrize(
    "cursor",
    ["not-a-cursor", "", "eyJ0aW1lIjogMSwgImlkIjogMn0", "WyJjMSIsMSwyLDNd", "%%%"],
    ids=["text", "empty", "foreign-json", "wrong-types", "not-base64"],
)
async def test_a_foreign_cursor_is_refused_naming_it(shelf: CatalogStore, cursor: str) -> None:
    with pytest.raises(ValueError, match="was not returned") as info:
        await shelf.search(CatalogQuery(cursor=cursor))
    assert str(info.value) == f"cursor {cursor!r} was not returned by this catalog's search"
    assert await found(shelf, limit=1) == [("billing", "2.0.0")]  # the next search is answered


# --- health ---------------------------------------------------------------------------------


async def test_due_for_probe_lists_active_versions_most_overdue_first(
    shelf: CatalogStore,
) -> None:
    await shelf.record_health("orders", "1.0.0", Health(state="healthy", next_check=50.0))
    await shelf.record_health("orders", "1.1.0", Health(state="healthy", next_check=10.0))
    await shelf.record_health("billing", "2.0.0", Health(state="unhealthy", next_check=200.0))
    await shelf.set_status("chat", "0.1.0", "deprecated")
    due = await shelf.due_for_probe(100.0, 10)
    assert listed(due) == [("orders", "1.1.0"), ("orders", "1.0.0")]
    await add(shelf, version("fresh", "1.0.0"))  # never probed: due first
    assert listed(await shelf.due_for_probe(100.0, 2)) == [("fresh", "1.0.0"), ("orders", "1.1.0")]
    assert listed(await shelf.due_for_probe(300.0, 10))[-1] == ("billing", "2.0.0")


async def test_record_health_stores_every_field(shelf: CatalogStore) -> None:
    health = Health(
        state="unhealthy",
        checked_at=100.25,
        last_seen=40.5,
        error_code="UPSTREAM_TIMEOUT",
        error_reason="card_fetch_failed",
        failures=4,
        next_check=160.0,
    )
    await shelf.record_health("orders", "1.1.0", health)
    stored = await shelf.get_version("orders", "1.1.0")
    assert stored is not None
    assert stored.health == health
    await shelf.record_health("orders", "1.1.0", Health(state="healthy", last_seen=170.0))
    stored = await shelf.get_version("orders", "1.1.0")
    assert stored is not None
    assert stored.health == Health(state="healthy", last_seen=170.0)


async def test_record_health_leaves_a_deleted_version_alone(shelf: CatalogStore) -> None:
    await shelf.set_status("chat", "0.1.0", "deleted")
    await shelf.record_health("chat", "0.1.0", Health(state="healthy", failures=0, last_seen=9.0))
    await shelf.record_health("nobody", "1.0.0", Health(state="healthy"))
    stored = await shelf.get_version("chat", "0.1.0")
    assert stored is not None
    assert stored.health == Health()


# --- keys -----------------------------------------------------------------------------------


async def test_keys_are_stored_listed_replaced_and_deleted(catalog_store: CatalogStore) -> None:
    publisher = CatalogKey("a" * 64, "publisher", "acme", ("acme/*", "orders"), created_at=2.0)
    caller = CatalogKey("b" * 64, "caller", "shop", ("orders*",), created_at=1.0)
    admin = CatalogKey("c" * 64, "admin", "ops", created_at=3.0)
    for key in (publisher, caller, admin):
        await catalog_store.add_key(key)
    assert await catalog_store.get_key("a" * 64) == publisher
    assert await catalog_store.get_key("d" * 64) is None
    assert await catalog_store.list_keys() == [caller, publisher, admin]
    narrowed = CatalogKey("b" * 64, "caller", "shop", ("orders",), created_at=1.0)
    await catalog_store.add_key(narrowed)
    assert await catalog_store.get_key("b" * 64) == narrowed
    second = CatalogKey("e" * 64, "publisher", "acme", ("acme/*",), created_at=4.0)
    await catalog_store.add_key(second)
    assert await catalog_store.delete_keys("acme") == 2
    assert await catalog_store.delete_keys("acme") == 0
    assert await catalog_store.list_keys() == [narrowed, admin]


async def test_close_is_safe_twice(catalog_store: CatalogStore) -> None:
    await catalog_store.close()
    await catalog_store.close()

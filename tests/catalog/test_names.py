"""Catalog names: valid ones, refusals naming the rule, and a card's default name."""

from __future__ import annotations

import pytest

from llamon_agent.catalog.errors import CatalogRefusal
from llamon_agent.catalog.names import MAX_NAME_CHARS, check_name, name_for_card, slug


@pytest.mark.parametrize("name", ["orders", "order-desk-2", "team-a/orders", "a", "0x/y"])
def test_valid_names_pass(name: str) -> None:
    assert check_name(name) == name


def refusal(name: object) -> str:
    with pytest.raises(CatalogRefusal) as caught:
        check_name(name)
    assert caught.value.reason == "invalid_agent_name"
    return caught.value.message


def test_an_upper_case_name_is_refused_naming_the_lowercase_form() -> None:
    assert refusal("Orders") == "agent names are lowercase: use 'orders', not 'Orders'"
    assert refusal("Team-A/Orders") == (
        "agent names are lowercase: use 'team-a/orders', not 'Team-A/Orders'"
    )


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "order desk",
            "'order desk' is not an agent name: use lowercase letters and digits in words "
            "joined by '-', optionally namespace/name (e.g. 'order-desk')",
        ),
        (
            "-orders",
            "'-orders' is not an agent name: use lowercase letters and digits in words joined "
            "by '-', optionally namespace/name (e.g. 'orders')",
        ),
        (
            "a/b/c",
            "'a/b/c' is not an agent name: use lowercase letters and digits in words joined by "
            "'-', optionally namespace/name (e.g. 'a/b-c')",
        ),
        (
            "",
            "the agent name is empty: use lowercase letters and digits in words joined by '-', "
            "optionally namespace/name",
        ),
        (7, "an agent name is a string, got int"),
        ("a" * (MAX_NAME_CHARS + 1), f"an agent name is at most {MAX_NAME_CHARS} characters"),
    ],
)
def test_invalid_names_are_refused_with_the_rule(name: object, message: str) -> None:
    assert refusal(name) == message


@pytest.mark.parametrize(
    ("title", "expected"),
    [
        ("Orders", "orders"),
        ("Order Desk v2", "order-desk-v2"),
        ("  Café -- Menü!  ", "cafe-menu"),
        ("Team/Orders", "team-orders"),
    ],
)
def test_a_cards_default_name_is_the_slug_of_its_name(title: str, expected: str) -> None:
    assert slug(title) == expected
    assert name_for_card({"name": title}) == expected


def test_a_card_name_that_leaves_nothing_asks_for_an_explicit_name() -> None:
    with pytest.raises(CatalogRefusal) as caught:
        name_for_card({"name": "注文"})
    assert caught.value.reason == "invalid_agent_name"
    assert caught.value.message == (
        "the card's name '注文' gives no catalog name: publish with an explicit 'name' "
        "(lowercase letters and digits in words joined by '-', optionally namespace/name)"
    )

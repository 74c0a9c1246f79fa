"""Catalog names: which are valid, and the name a card gets when the publisher gives none.

What the caller sees:

* A name is lowercase ASCII words of letters and digits joined by ``-``, optionally
  prefixed by a namespace the same way (``orders``, ``team-a/orders``), at most
  ``MAX_NAME_CHARS`` characters. ``check_name`` refuses anything else with
  ``invalid_agent_name``; a name that differs from a valid one only by case (``Orders``)
  is refused naming the lowercase form, so two names never collide by case.
* ``name_for_card(card)`` is the default name: the card's ``name`` in lowercase, accents
  dropped, every run of other characters turned into one ``-`` (``"Order Desk v2"`` ->
  ``order-desk-v2``). A card name that leaves nothing (``"注文"``) is refused asking for
  an explicit ``name``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any, Final

from llamon_agent.catalog.errors import CatalogRefusal
from llamon_agent.catalog.records import NAME_PATTERN

__all__ = ["MAX_NAME_CHARS", "check_name", "name_for_card", "slug"]

MAX_NAME_CHARS: Final = 128
_RULE: Final = "lowercase letters and digits in words joined by '-', optionally namespace/name"
_NOT_WORD: Final = re.compile(r"[^a-z0-9]+")


def _refuse(message: str) -> CatalogRefusal:
    return CatalogRefusal("invalid_agent_name", message)


def slug(text: str) -> str:
    """``text`` as lowercase words joined by ``-`` (accents dropped, other runs one ``-``)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return _NOT_WORD.sub("-", ascii_text.lower()).strip("-")


def check_name(name: object) -> str:
    """``name`` if it is a valid catalog name; ``CatalogRefusal("invalid_agent_name")``
    naming the rule (and the lowercase form of a name in the wrong case) otherwise."""
    if not isinstance(name, str) or not name:
        return _fail_empty(name)
    if len(name) > MAX_NAME_CHARS:
        raise _refuse(f"an agent name is at most {MAX_NAME_CHARS} characters")
    if NAME_PATTERN.fullmatch(name):
        return name
    lower = name.lower()
    if NAME_PATTERN.fullmatch(lower):
        raise _refuse(f"agent names are lowercase: use {lower!r}, not {name!r}")
    suggestion = "/".join(slug(part) for part in name.split("/", 1))
    hint = f" (e.g. {suggestion!r})" if NAME_PATTERN.fullmatch(suggestion) else ""
    raise _refuse(f"{name!r} is not an agent name: use {_RULE}{hint}")


def _fail_empty(name: object) -> str:
    if isinstance(name, str):
        raise _refuse(f"the agent name is empty: use {_RULE}")
    raise _refuse(f"an agent name is a string, got {type(name).__name__}")


def name_for_card(card: Mapping[str, Any]) -> str:
    """The default catalog name of ``card``: the slug of its ``name``; ``CatalogRefusal``
    (``invalid_agent_name``) when that leaves no valid name."""
    title = card.get("name")
    derived = slug(title)[:MAX_NAME_CHARS].strip("-") if isinstance(title, str) else ""
    if not derived:
        raise _refuse(
            f"the card's name {title!r} gives no catalog name: publish with an explicit "
            f"'name' ({_RULE})"
        )
    return derived

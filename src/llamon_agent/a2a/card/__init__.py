"""Agent Cards: build one, check it the way another agent's LLM will read it, load one.

* ``build_agent_card(...)`` / ``skill(...)`` / ``build_extended_card(...)`` (``build``):
  a real ``a2a.types.AgentCard``; ``auth_spec_from_card`` reads its auth declaration back.
* ``lint_agent_card(card)`` (``lint``): ``CardFinding`` values with stable rule ids in
  ``CARD_RULES``; ``mode_problems(card)``: the modes that are not MIME types.
* ``load_agent_card(source)`` (``load``): a file or a URL; every failure a
  ``CardLoadError`` naming the source.
* ``llamon card lint`` (``cli``).
"""

from __future__ import annotations

from llamon_agent.a2a.card.build import (
    PROTOCOL_VERSION,
    AuthSpec,
    auth_spec_from_card,
    build_agent_card,
    build_extended_card,
    skill,
)
from llamon_agent.a2a.card.lint import (
    CARD_RULES,
    MIN_DESCRIPTION_CHARS,
    MIN_DESCRIPTION_WORDS,
    CardFinding,
    CardRule,
    Severity,
    lint_agent_card,
    mode_problems,
)
from llamon_agent.a2a.card.load import CardLoadError, load_agent_card

__all__ = [
    "CARD_RULES",
    "MIN_DESCRIPTION_CHARS",
    "MIN_DESCRIPTION_WORDS",
    "PROTOCOL_VERSION",
    "AuthSpec",
    "CardFinding",
    "CardLoadError",
    "CardRule",
    "Severity",
    "auth_spec_from_card",
    "build_agent_card",
    "build_extended_card",
    "lint_agent_card",
    "load_agent_card",
    "mode_problems",
    "skill",
]

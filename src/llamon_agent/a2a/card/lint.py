"""Check an Agent Card the way another agent's LLM will read it.

``lint_agent_card(card)`` returns ``CardFinding`` values and never raises. Each rule has a
stable id in ``CARD_RULES`` (a specific description, one task per skill, explicit MIME
modes, SemVer, declared auth, ...). Errors make the card wrong or unusable; warnings make
it harder for a client's LLM to choose this agent correctly. ``mode_problems(card)``: the
modes that are not MIME types (``"text"`` instead of ``"text/plain"``) with what to write
instead; a server refuses to start with them, since no message part could ever match such
a mode.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from a2a.types import (
    AgentCard,
    AgentSkill,
)
from pydantic import ValidationError

from llamon_agent.a2a.card.build import PROTOCOL_VERSION
from llamon_agent.core.validation_errors import format_validation_error

__all__ = [
    "CARD_RULES",
    "MIN_DESCRIPTION_CHARS",
    "MIN_DESCRIPTION_WORDS",
    "CardFinding",
    "CardRule",
    "Severity",
    "lint_agent_card",
    "mode_problems",
]

MIN_DESCRIPTION_CHARS: Final = 40
MIN_DESCRIPTION_WORDS: Final = 8
"""A card description shorter than both thresholds gets ``description_too_short``."""

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class CardRule:
    """One lint rule: its stable id, severity and the advice behind it."""

    id: str
    severity: Severity
    advice: str


def _rules(*rows: tuple[str, Severity, str]) -> Mapping[str, CardRule]:
    return {rule_id: CardRule(rule_id, severity, advice) for rule_id, severity, advice in rows}


CARD_RULES: Final[Mapping[str, CardRule]] = _rules(
    ("invalid_card", "error", "The JSON must validate as an A2A 0.3 AgentCard."),
    ("name_missing", "error", "Give the agent a human- and LLM-readable name."),
    ("description_empty", "error", "Say what the agent does; clients choose agents by it."),
    (
        "description_too_short",
        "warning",
        "Describe scope and abilities in at least ~40 characters or 8 words.",
    ),
    (
        "description_vague",
        "warning",
        "Replace vague words ('helpful', 'various', '관련 작업') with concrete tasks.",
    ),
    ("skills_empty", "warning", "List at least one skill so clients know when to call you."),
    ("skill_field_missing", "error", "Every skill needs a non-blank id, name and description."),
    ("skill_tags_missing", "warning", "Give every skill a few tags for discovery."),
    ("skill_duplicate_id", "error", "Skill ids must be unique within the card."),
    (
        "skill_multiple_tasks",
        "warning",
        "One skill, one task: split a skill whose name or description joins several.",
    ),
    ("skill_no_examples", "warning", "Give every skill example requests."),
    (
        "skill_json_output_undescribed",
        "warning",
        "A skill that outputs application/json should describe the JSON in its description.",
    ),
    (
        "modes_missing",
        "error",
        "Declare defaultInputModes and defaultOutputModes explicitly (non-empty).",
    ),
    ("mode_not_mime", "error", "Modes are MIME types such as text/plain or application/json."),
    ("version_not_semver", "error", "Version the card with SemVer (MAJOR.MINOR.PATCH)."),
    ("auth_not_declared", "warning", "Declare securitySchemes (and security) for your auth."),
    (
        "security_requirement_missing",
        "warning",
        "Schemes are declared but no `security` entry says which one is required.",
    ),
    (
        "security_scheme_undeclared",
        "error",
        "Every scheme named in `security` must be declared in securitySchemes.",
    ),
    ("url_not_absolute", "error", "The endpoint url must be an absolute http(s) URL."),
    ("protocol_version_missing", "error", "State the A2A protocolVersion (e.g. 0.3.0)."),
)
"""Every lint rule by id, in the order the linter runs them."""


@dataclass(frozen=True, slots=True)
class CardFinding:
    """One problem found in a card: rule id, severity, JSON path (wire names), message."""

    rule: str
    severity: Severity
    path: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """``{"rule", "severity", "path", "message"}``, JSON-ready."""
        return {
            "rule": self.rule,
            "severity": self.severity,
            "path": self.path,
            "message": self.message,
        }


def _finding(rule_id: str, path: str, message: str) -> CardFinding:
    return CardFinding(rule_id, CARD_RULES[rule_id].severity, path, message)


# --------------------------------------------------------------------------- lint checks

_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?"
)
_MIME_PART = r"(?:\*|[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*)"
_MIME = re.compile(rf"{_MIME_PART}/{_MIME_PART}(?:\s*;.*)?")
_JSON_MIME = re.compile(r"application/(?:[\w.+-]*\+)?json\b", re.IGNORECASE)
_JSON_DESCRIBED = re.compile(r"json|schema|스키마|필드|\bfields?\b|\{", re.IGNORECASE)
_VAGUE = re.compile(
    r"\bhelpful\b|\bvarious\b|\banything\b|\beverything\b|\ball kinds of\b"
    r"|\bgeneral[- ]purpose\b|\bstuff\b|\bthings\b|\betc\b|\band (?:so on|more)\b"
    r"|\bmisc(?:ellaneous)?\b|\b(?:data|task)[- ]related\b|\brelated tasks\b"
    r"|\bany tasks?\b|\bmany tasks\b"
    r"|관련\s*(?:작업|업무|일)|다양한|모든\s*(?:작업|일|것)|여러\s*가지|각종|기타|등등|무엇이든|뭐든",
    re.IGNORECASE,
)
_NAME_JOINERS = re.compile(r"\s+and\s+|\s+&\s+|/|,|및|그리고", re.IGNORECASE)
_TASK_VERB = (
    r"(?:book|cancel|creat|delet|remov|updat|edit|send|translat|summari[sz]|analy[sz]"
    r"|generat|search|find|classif|convert|export|import|schedul|writ|review|upload"
    r"|download|publish|deploy|refund|pay|order|notif|transcrib|compar|recommend|answer"
    r"|execut|monitor|track|manag|sav|fetch|retriev|extract|validat|approv)\w*"
)
_DESCRIPTION_JOINERS = re.compile(
    rf"\band\s+(?:then\s+|also\s+)?{_TASK_VERB}\b|\bas well as\b|그리고|\s및\s|\w+하고\s",
    re.IGNORECASE,
)


def _check_name(card: AgentCard) -> Iterator[CardFinding]:
    if not card.name.strip():
        yield _finding("name_missing", "name", "name is blank")


def _check_description(card: AgentCard) -> Iterator[CardFinding]:
    text = card.description.strip()
    if not text:
        yield _finding("description_empty", "description", "description is blank")
        return
    if len(text) < MIN_DESCRIPTION_CHARS and len(text.split()) < MIN_DESCRIPTION_WORDS:
        yield _finding(
            "description_too_short",
            "description",
            f"description has {len(text)} characters; say what the agent does, on what, "
            "and what it returns so a client's LLM can choose it",
        )
    yield from _check_vague(text, "description")


def _check_vague(text: str, path: str) -> Iterator[CardFinding]:
    vague = sorted({m.group(0).lower() for m in _VAGUE.finditer(text)})
    if vague:
        words = ", ".join(repr(w) for w in vague)
        yield _finding("description_vague", path, f"vague wording {words}; name concrete tasks")


def _check_skills(card: AgentCard) -> Iterator[CardFinding]:
    if not card.skills:
        yield _finding("skills_empty", "skills", "the card lists no skills")
    seen: set[str] = set()
    for index, item in enumerate(card.skills):
        path = f"skills[{index}]"
        if item.id in seen and item.id.strip():
            yield _finding("skill_duplicate_id", f"{path}.id", f"skill id {item.id!r} repeats")
        seen.add(item.id)
        yield from _check_skill(item, path)


def _check_skill(item: AgentSkill, path: str) -> Iterator[CardFinding]:
    for field in ("id", "name", "description"):
        if not str(getattr(item, field)).strip():
            yield _finding("skill_field_missing", f"{path}.{field}", f"skill {field} is blank")
    if not [tag for tag in item.tags if tag.strip()]:
        yield _finding("skill_tags_missing", f"{path}.tags", "skill has no tags")
    yield from _check_one_task(item, path)
    if item.description.strip():
        yield from _check_vague(item.description, f"{path}.description")
    if not item.examples:
        yield _finding("skill_no_examples", f"{path}.examples", "skill has no examples")
    yield from _check_json_described(item, path)
    for field, modes in (("inputModes", item.input_modes), ("outputModes", item.output_modes)):
        if modes is not None:
            yield from _check_modes(modes, f"{path}.{field}")


def _check_one_task(item: AgentSkill, path: str) -> Iterator[CardFinding]:
    for field, text, pattern in (
        ("name", item.name, _NAME_JOINERS),
        ("description", item.description, _DESCRIPTION_JOINERS),
    ):
        match = pattern.search(text)
        if match is not None:
            yield _finding(
                "skill_multiple_tasks",
                f"{path}.{field}",
                f"skill {field} joins tasks ({match.group(0).strip()!r}); "
                "if one sentence cannot say what it does, split it",
            )


def _check_json_described(item: AgentSkill, path: str) -> Iterator[CardFinding]:
    outputs = item.output_modes or []
    if any(_JSON_MIME.match(mode) for mode in outputs) and not _JSON_DESCRIBED.search(
        item.description
    ):
        yield _finding(
            "skill_json_output_undescribed",
            f"{path}.description",
            "skill outputs JSON but its description does not describe the JSON's fields",
        )


def _check_card_modes(card: AgentCard) -> Iterator[CardFinding]:
    yield from _check_modes(card.default_input_modes, "defaultInputModes")
    yield from _check_modes(card.default_output_modes, "defaultOutputModes")


_SHORT_MODES: Final = {
    "text": "'text/plain'",
    "data": "'application/json'",
    "file": "the file types you accept, such as 'application/pdf' or 'image/*' ('*/*' for any)",
}
"""Short names some samples use for modes, and the MIME types to write instead."""


def _not_mime(mode: str) -> str:
    instead = _SHORT_MODES.get(mode.strip().lower())
    if instead is not None:
        return f"{mode!r} is a short name, not a MIME type: write {instead}"
    return f"{mode!r} is not a MIME type"


def _check_modes(modes: Sequence[str], path: str) -> Iterator[CardFinding]:
    if not modes:
        yield _finding("modes_missing", path, f"{path} is empty")
    for index, mode in enumerate(modes):
        if not _MIME.fullmatch(mode.strip()):
            yield _finding("mode_not_mime", f"{path}[{index}]", _not_mime(mode))


def mode_problems(card: AgentCard) -> list[CardFinding]:
    """The card's and its skills' modes that are not MIME types (rule ``mode_not_mime``).

    A message part's media type (``text/plain``, ``application/json``, a file's type) is
    matched against the card's modes, so a mode such as ``"text"`` refuses every message
    (-32005). Each finding says what to write instead.
    """
    declared = [
        ("defaultInputModes", card.default_input_modes),
        ("defaultOutputModes", card.default_output_modes),
    ]
    for index, item in enumerate(card.skills):
        declared.append((f"skills[{index}].inputModes", item.input_modes or []))
        declared.append((f"skills[{index}].outputModes", item.output_modes or []))
    return [
        finding
        for path, modes in declared
        for finding in _check_modes(modes, path)
        if finding.rule == "mode_not_mime"
    ]


def _check_version(card: AgentCard) -> Iterator[CardFinding]:
    if not _SEMVER.fullmatch(card.version):
        yield _finding(
            "version_not_semver",
            "version",
            f"version {card.version!r} is not SemVer MAJOR.MINOR.PATCH (e.g. '1.0.0')",
        )


def _check_auth(card: AgentCard) -> Iterator[CardFinding]:
    declared = card.security_schemes or {}
    if not declared:
        yield _finding(
            "auth_not_declared",
            "securitySchemes",
            "no security schemes declared; clients cannot tell how to authenticate",
        )
    required = [("security", card.security or [])] + [
        (f"skills[{i}].security", item.security or []) for i, item in enumerate(card.skills)
    ]
    if declared and not any(requirements for _, requirements in required):
        yield _finding(
            "security_requirement_missing",
            "security",
            f"schemes {sorted(declared)} are declared but `security` requires none of them",
        )
    for path, requirements in required:
        for index, requirement in enumerate(requirements):
            for name in requirement:
                if name not in declared:
                    yield _finding(
                        "security_scheme_undeclared",
                        f"{path}[{index}].{name}",
                        f"security requires scheme {name!r}, not declared in securitySchemes",
                    )


def _check_urls(card: AgentCard) -> Iterator[CardFinding]:
    urls = [("url", card.url)] + [
        (f"additionalInterfaces[{i}].url", item.url)
        for i, item in enumerate(card.additional_interfaces or [])
    ]
    for path, url in urls:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            yield _finding("url_not_absolute", path, f"{url!r} is not an absolute http(s) URL")


def _check_protocol_version(declared: object) -> Iterator[CardFinding]:
    if not isinstance(declared, str) or not declared.strip():
        yield _finding(
            "protocol_version_missing",
            "protocolVersion",
            f"protocolVersion is missing; declare the A2A version, e.g. {PROTOCOL_VERSION!r}",
        )


def _lint_model(card: AgentCard, protocol_version: object) -> list[CardFinding]:
    return [
        *_check_name(card),
        *_check_description(card),
        *_check_skills(card),
        *_check_card_modes(card),
        *_check_version(card),
        *_check_auth(card),
        *_check_urls(card),
        *_check_protocol_version(protocol_version),
    ]


def _invalid(exc: ValidationError) -> CardFinding:
    return _finding(
        "invalid_card", "$", "not a valid A2A AgentCard: " + format_validation_error(exc)
    )


def lint_agent_card(card: AgentCard | Mapping[str, Any]) -> list[CardFinding]:
    """Every finding for ``card`` (an ``AgentCard`` or its JSON object); never raises.

    A mapping that does not validate as an ``AgentCard`` gives exactly one
    ``invalid_card`` error naming the failing field paths. An empty list means the card
    follows every rule in ``CARD_RULES``.
    """
    if isinstance(card, AgentCard):
        return _lint_model(card, card.protocol_version)
    if not isinstance(card, Mapping):
        kind = type(card).__name__
        return [_finding("invalid_card", "$", f"an AgentCard is a JSON object, got {kind}")]
    try:
        model = AgentCard.model_validate(dict(card))
    except ValidationError as exc:
        return [_invalid(exc)]
    return _lint_model(model, card.get("protocolVersion", card.get("protocol_version")))


# --------------------------------------------------------------------------- loading

"""The catalog's versioning rule: how big a change a new card makes, and whether its
version number says so.

What the caller sees (skills are matched by ``id``):

* ``classify_change(previous_card, new_card)`` -> ``Change``: ``major`` when a skill was
  removed or a skill's effective input or output modes changed (its own modes, or the
  card's ``defaultInputModes``/``defaultOutputModes`` when it has none; compared as sets,
  case-insensitively); ``minor`` when a skill was added; ``patch`` for anything else
  (descriptions, names, tags, examples, other card fields). ``Change.skills`` lists every
  skill change found, in skill-id order.
* ``predecessor(existing, new)`` is the version a new one is compared with: the highest
  existing version below it, whatever its status. Pre-releases of the new version's own
  ``MAJOR.MINOR.PATCH`` are drafts of it and are passed over, so ``2.0.0`` after
  ``2.0.0-rc.1`` is compared with ``1.x``. A backport (``1.4.1`` while ``2.0.0`` exists)
  is compared with its own predecessor (``1.4.0``).
* ``check_bump(previous, new, change)`` -> ``None`` when ``new`` is a big enough bump
  over ``previous``, else the refusal message naming the skill and the smallest version
  accepted: ``skill 'search' was removed: that needs a major version (2.0.0 or higher),
  not 1.3.0``. A major change needs ``MAJOR+1.0.0``, a minor one ``MAJOR.MINOR+1.0``
  (a pre-release of such a version counts as it: ``2.0.0-rc.1`` is a major bump); a
  patch change any higher version.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from llamon_agent.core.semver import Version

__all__ = [
    "Bump",
    "Change",
    "SkillChange",
    "bump_between",
    "check_bump",
    "classify_change",
    "minimum_version",
    "predecessor",
]

Bump = Literal["patch", "minor", "major"]
_ORDER: Final[Mapping[Bump, int]] = {"patch": 0, "minor": 1, "major": 2}

Modes = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SkillChange:
    """One skill's change: ``removed``, ``added`` or ``modes_changed`` (with the old and
    new effective input and output modes, sorted)."""

    skill: str
    what: Literal["removed", "added", "modes_changed"]
    old_modes: tuple[Modes, Modes] | None = None
    new_modes: tuple[Modes, Modes] | None = None

    @property
    def needs(self) -> Bump:
        """The bump this change needs on its own."""
        return "minor" if self.what == "added" else "major"

    def describe(self) -> str:
        """``skill 'search' was removed`` and the like."""
        if self.what != "modes_changed":
            return f"skill {self.skill!r} was {self.what}"
        old_modes = self.old_modes or ((), ())
        new_modes = self.new_modes or ((), ())
        parts = [
            f"{kind} modes from {list(old)} to {list(new)}"
            for kind, old, new in zip(("input", "output"), old_modes, new_modes, strict=True)
            if old != new
        ]
        return f"skill {self.skill!r} changed its " + " and its ".join(parts)


@dataclass(frozen=True, slots=True)
class Change:
    """What a new card changes against the one before it (see the module docstring)."""

    kind: Bump
    skills: tuple[SkillChange, ...] = ()

    @property
    def driver(self) -> SkillChange | None:
        """The first skill change that needs ``kind`` (``None`` for a patch)."""
        return next((item for item in self.skills if item.needs == self.kind), None)


def _modes(value: object, default: object) -> Modes:
    chosen = value if isinstance(value, list) and value else default
    if not isinstance(chosen, list):
        return ()
    return tuple(sorted({m.strip().lower() for m in chosen if isinstance(m, str)}))


def _skills(card: Mapping[str, Any]) -> dict[str, tuple[Modes, Modes]]:
    """Each skill id with its effective (input, output) modes."""
    found: dict[str, tuple[Modes, Modes]] = {}
    skills = card.get("skills")
    default_in, default_out = card.get("defaultInputModes"), card.get("defaultOutputModes")
    for skill in skills if isinstance(skills, list) else []:
        if isinstance(skill, Mapping) and isinstance(skill.get("id"), str):
            found.setdefault(
                skill["id"],
                (
                    _modes(skill.get("inputModes"), default_in),
                    _modes(skill.get("outputModes"), default_out),
                ),
            )
    return found


def classify_change(previous_card: Mapping[str, Any], new_card: Mapping[str, Any]) -> Change:
    """The change from ``previous_card`` to ``new_card`` (cards as JSON, wire names)."""
    old, new = _skills(previous_card), _skills(new_card)
    changes: list[SkillChange] = []
    for skill in sorted(old.keys() | new.keys()):
        if skill not in new:
            changes.append(SkillChange(skill, "removed"))
        elif skill not in old:
            changes.append(SkillChange(skill, "added"))
        elif old[skill] != new[skill]:
            changes.append(SkillChange(skill, "modes_changed", old[skill], new[skill]))
    kind: Bump = "patch"
    for item in changes:
        if _ORDER[item.needs] > _ORDER[kind]:
            kind = item.needs
    return Change(kind, tuple(changes))


def predecessor(existing: Iterable[Version], new: Version) -> Version | None:
    """The version ``new`` is compared with (see the module docstring), or ``None``."""
    below = [
        version
        for version in existing
        if version < new and not (version.is_prerelease and version.release == new.release)
    ]
    return max(below) if below else None


def bump_between(previous: Version, new: Version) -> Bump:
    """How big a bump ``new`` is over ``previous`` (by its ``MAJOR.MINOR.PATCH``)."""
    if new.major > previous.major:
        return "major"
    if new.major == previous.major and new.minor > previous.minor:
        return "minor"
    return "patch"


def minimum_version(previous: Version, kind: Bump) -> Version:
    """The smallest release a change of ``kind`` after ``previous`` may be published as."""
    if kind == "major":
        return Version(previous.major + 1, 0, 0)
    if kind == "minor":
        return Version(previous.major, previous.minor + 1, 0)
    if previous.is_prerelease:
        return Version(*previous.release)
    return Version(previous.major, previous.minor, previous.patch + 1)


def check_bump(previous: Version, new: Version, change: Change) -> str | None:
    """``None`` if ``new`` may follow ``previous`` with ``change``, else why not (naming
    the skill and the smallest version accepted)."""
    if change.kind == "patch" or _ORDER[bump_between(previous, new)] >= _ORDER[change.kind]:
        return None
    smallest = minimum_version(previous, change.kind)
    driver = change.driver
    what = driver.describe() if driver is not None else f"the card made a {change.kind} change"
    return f"{what}: that needs a {change.kind} version ({smallest} or higher), not {new}"

"""Semantic versions (SemVer 2.0.0) and the version ranges callers ask for.

What the caller sees:

* ``Version.parse("2.1.0-rc.1+build.5")`` reads a strict SemVer 2.0.0 version (no leading
  ``v``, no leading zeros, three numbers); anything else raises ``InvalidVersionError``
  (a ``ValueError``) naming the text and the rule it broke. Versions order by SemVer
  precedence (build metadata ignored): ``1.0.0-alpha < 1.0.0-alpha.1 < 1.0.0-beta < 1.0.0``.
* ``VersionRange.parse("^2.1")`` reads the range forms of npm and Cargo:

  ==================  ==========================================
  ``2.1.3``            exactly that version (``=2.1.3`` too)
  ``^2.1``             ``>=2.1.0 <3.0.0`` (``^0.3`` is ``>=0.3.0 <0.4.0``)
  ``~2.1``             ``>=2.1.0 <2.2.0``
  ``2`` / ``2.x``      ``>=2.0.0 <3.0.0``; ``2.1`` / ``2.1.x``: ``>=2.1.0 <2.2.0``
  ``>=2.1 <3``         every comparator must hold (``>``, ``>=``, ``<``, ``<=``, ``=``)
  ``^1.4 || ^2``       either side
  ``*`` / ``latest``   any version
  ==================  ==========================================

  A pre-release (``2.2.0-rc.1``) matches only a range that names a pre-release of the
  same ``major.minor.patch``, as npm does; ``range.best(versions)`` is the highest match.
* ``Version.sort_key`` is a string whose plain text order is SemVer precedence, for an
  ``ORDER BY`` in SQL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import total_ordering
from typing import Final

__all__ = [
    "InvalidVersionError",
    "InvalidVersionRangeError",
    "Version",
    "VersionRange",
]

_NUMBER: Final = r"0|[1-9]\d*"
_IDENT: Final = r"(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_VERSION_RE: Final = re.compile(
    rf"^(?P<major>{_NUMBER})\.(?P<minor>{_NUMBER})\.(?P<patch>{_NUMBER})"
    rf"(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?"
    r"(?:\+(?P<build>[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_MAX_TEXT: Final = 256
_MAX_NUMBER: Final = 999_999_999
"""Largest major, minor or patch number read (nine digits: the sort key's width)."""


class InvalidVersionError(ValueError):
    """A text is not a SemVer 2.0.0 version; the message names it and the rule."""


class InvalidVersionRangeError(ValueError):
    """A text is not a version range; the message names it and the form expected."""


def _why_not_version(text: str) -> str:
    if not text:
        return "it is empty"
    if text[0] in "vV":
        return f"drop the leading {text[0]!r}"
    core = re.split(r"[-+]", text, maxsplit=1)[0]
    numbers = core.split(".")
    if len(numbers) != 3:
        return "it needs three numbers, MAJOR.MINOR.PATCH (e.g. 1.0.0)"
    for number in numbers:
        if not number.isdigit():
            return f"{number!r} is not a number"
        if len(number) > 1 and number.startswith("0"):
            return f"{number!r} has a leading zero"
    return "its pre-release or build part is not dot-separated [0-9A-Za-z-] identifiers"


@total_ordering
@dataclass(frozen=True, slots=True)
class Version:
    """One SemVer 2.0.0 version; ordered by precedence, equal when precedence is equal."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: str = field(default="", compare=False)

    @classmethod
    def parse(cls, text: str) -> Version:
        """Read ``text``; ``InvalidVersionError`` names what is wrong with it."""
        if not isinstance(text, str):
            raise InvalidVersionError(f"a version is a string, got {type(text).__name__}")
        if len(text) > _MAX_TEXT:
            raise InvalidVersionError(f"a version is at most {_MAX_TEXT} characters")
        match = _VERSION_RE.match(text)
        if match is None:
            raise InvalidVersionError(
                f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH): " + _why_not_version(text)
            )
        major, minor, patch = (int(match[name]) for name in ("major", "minor", "patch"))
        if max(major, minor, patch) > _MAX_NUMBER:
            raise InvalidVersionError(f"{text!r}: each number is at most {_MAX_NUMBER}")
        pre = tuple(match["pre"].split(".")) if match["pre"] else ()
        return cls(major, minor, patch, prerelease=pre, build=match["build"] or "")

    @property
    def release(self) -> tuple[int, int, int]:
        """``(major, minor, patch)``."""
        return (self.major, self.minor, self.patch)

    @property
    def is_prerelease(self) -> bool:
        """Whether the version has a pre-release part (``1.0.0-rc.1``)."""
        return bool(self.prerelease)

    def _precedence(self) -> tuple[object, ...]:
        if not self.prerelease:
            return (*self.release, 1, ())
        ids = tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in self.prerelease)
        return (*self.release, 0, ids)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._precedence() < other._precedence()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._precedence() == other._precedence()

    def __hash__(self) -> int:
        return hash(self._precedence())

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + self.build
        return text

    @property
    def sort_key(self) -> str:
        """Text whose ordinary string order is SemVer precedence (build ignored)."""
        head = f"{self.major:09d}.{self.minor:09d}.{self.patch:09d}"
        if not self.prerelease:
            return head + "~"
        ids = [f"0{int(i):09d}" if i.isdigit() else f"1{i}" for i in self.prerelease]
        return head + "!" + "\x01".join(ids)


_COMPARATOR_RE: Final = re.compile(r"^(?P<op>\^|~|>=|<=|>|<|=)?\s*(?P<version>\S+)$")
_PARTIAL_RE: Final = re.compile(
    rf"^(?P<major>{_NUMBER}|[xX*])(?:\.(?P<minor>{_NUMBER}|[xX*]))?"
    rf"(?:\.(?P<patch>{_NUMBER}|[xX*]))?"
    rf"(?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?(?:\+[0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*)?$"
)

_Bound = tuple[str, Version]
"""One comparator: an operator among ``>=``, ``>``, ``<``, ``<=``, ``=`` and a version."""


def _wild(part: str | None) -> bool:
    return part is None or part in ("x", "X", "*")


def _expand(op: str, text: str, whole: str) -> list[_Bound]:
    """One comparator of a range as plain bounds."""
    match = _PARTIAL_RE.match(text)
    if match is None:
        raise InvalidVersionRangeError(
            f"{whole!r}: {text!r} is not a version or a partial version (2, 2.1, 2.1.x)"
        )
    parts = [match["major"], match["minor"], match["patch"]]
    if _wild(parts[0]):
        if op in ("", "=", ">=", "<=", "^", "~"):
            return []
        raise InvalidVersionRangeError(f"{whole!r}: {op}{text} matches nothing")
    known = 1 if _wild(parts[1]) else 2 if _wild(parts[2]) else 3
    if any(not _wild(p) for p in parts[known:]):
        raise InvalidVersionRangeError(f"{whole!r}: {text!r} has a number after a wildcard")
    major = int(parts[0] or 0)
    minor = int(parts[1]) if known > 1 else 0
    patch = int(parts[2]) if known > 2 else 0
    pre = tuple(match["pre"].split(".")) if match["pre"] and known == 3 else ()
    low = Version(major, minor, patch, pre)

    def up(level: int) -> Version:
        if level == 0:
            return Version(major + 1, 0, 0, ("0",))
        if level == 1:
            return Version(major, minor + 1, 0, ("0",))
        return Version(major, minor, patch + 1, ("0",))

    if op == "^":
        if major > 0 or known == 1:
            return [(">=", low), ("<", up(0))]
        if minor > 0 or known == 2:
            return [(">=", low), ("<", up(1))]
        return [(">=", low), ("<", up(2))]
    if op == "~":
        return [(">=", low), ("<", up(0 if known == 1 else 1))]
    if op in ("", "="):
        if known == 3:
            return [("=", low)]
        return [(">=", low), ("<", up(known - 1))]
    if op == ">=":
        return [(">=", low)]
    if op == "<":
        return [("<", low if known == 3 else Version(major, minor, patch, ("0",)))]
    if op == ">":
        return [(">", low)] if known == 3 else [(">=", up(known - 1))]
    # "<=": a partial version includes everything it names
    return [("<=", low)] if known == 3 else [("<", up(known - 1))]


def _holds(bound: _Bound, version: Version) -> bool:
    op, edge = bound
    if op == "=":
        return version == edge
    if op == ">=":
        return version >= edge
    if op == ">":
        return version > edge
    if op == "<":
        return version < edge
    return version <= edge


@dataclass(frozen=True, slots=True)
class VersionRange:
    """A set of versions written the npm/Cargo way; ``text`` is what was parsed."""

    text: str
    alternatives: tuple[tuple[_Bound, ...], ...]

    @classmethod
    def parse(cls, text: str) -> VersionRange:
        """Read ``text``; ``InvalidVersionRangeError`` names what is wrong with it."""
        if not isinstance(text, str):
            raise InvalidVersionRangeError(f"a range is a string, got {type(text).__name__}")
        if len(text) > _MAX_TEXT:
            raise InvalidVersionRangeError(f"a range is at most {_MAX_TEXT} characters")
        stripped = text.strip()
        if stripped in ("", "*", "latest"):
            return cls(text, ((),))
        alternatives: list[tuple[_Bound, ...]] = []
        for side in stripped.split("||"):
            tokens = re.findall(r"(?:\^|~|>=|<=|>|<|=)?\s*[^\s^~<>=|]+", side.strip())
            if not tokens or "".join(t.replace(" ", "") for t in tokens) != side.replace(" ", ""):
                raise InvalidVersionRangeError(
                    f"{text!r} is not a version range (e.g. 2.1.0, ^2.1, ~2.1, >=2 <3, 2.x)"
                )
            bounds: list[_Bound] = []
            for token in tokens:
                match = _COMPARATOR_RE.match(token.strip())
                if match is None:  # pragma: no cover - the token pattern guarantees it
                    raise InvalidVersionRangeError(f"{text!r}: cannot read {token!r}")
                bounds.extend(_expand(match["op"] or "", match["version"], text))
            alternatives.append(tuple(bounds))
        return cls(text, tuple(alternatives))

    def matches(self, version: Version) -> bool:
        """Whether ``version`` is in the range (pre-releases only where one is named)."""
        for bounds in self.alternatives:
            if not all(_holds(bound, version) for bound in bounds):
                continue
            if not version.prerelease:
                return True
            if any(
                edge.prerelease and edge.prerelease != ("0",) and edge.release == version.release
                for _, edge in bounds
            ):
                return True
        return False

    def best(self, versions: Iterable[Version]) -> Version | None:
        """The highest of ``versions`` in the range, or ``None``."""
        matching = [v for v in versions if self.matches(v)]
        return max(matching) if matching else None

    def __str__(self) -> str:
        return self.text

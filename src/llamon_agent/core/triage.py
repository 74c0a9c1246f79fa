"""The triage guide: for each failure reason, its symptom, where to look first and the fix.

The guide is data: ``triage_guide.toml`` ships in this package, one ``[[row]]`` per
reason of the reason catalog, each with four text fields::

    [[row]]
    reason = "timeout"
    symptom = "..."      # what the operator or the caller sees
    look_first = "..."   # which log, record field, event or component to read first
    fix = "..."          # what usually resolves it

Your own guide (``LLAMON_TRIAGE_GUIDE=path.toml`` or ``llamon triage --guide FILE``) has
the same format; its rows add to the shipped ones, and a row whose reason the shipped
guide has replaces that row as a whole. A file that is not TOML, a row with an unknown or
a missing key, a field that is not a non-empty string, or a reason given twice in one
file raises ``TriageGuideError`` naming the file and the row.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Final

from llamon_agent.core.settings import TRIAGE_GUIDE_ENV

__all__ = [
    "PACKAGE_GUIDE",
    "TriageGuide",
    "TriageGuideError",
    "TriageRow",
    "load_guide",
    "package_guide",
    "parse_guide",
    "triage_guide",
]

PACKAGE_GUIDE: Final = "triage_guide.toml"
"""The shipped guide's file name in ``llamon_agent.core``."""


class TriageGuideError(ValueError):
    """A guide file that cannot be read; the message names the file and the row."""


@dataclass(frozen=True, slots=True)
class TriageRow:
    """One reason's triage: what is seen, where to look first, and the fix."""

    reason: str
    symptom: str
    look_first: str
    fix: str

    def to_dict(self) -> dict[str, str]:
        """The row as JSON keys (``reason``, ``symptom``, ``lookFirst``, ``fix``)."""
        return {
            "reason": self.reason,
            "symptom": self.symptom,
            "lookFirst": self.look_first,
            "fix": self.fix,
        }


_KEYS: Final = tuple(f.name for f in fields(TriageRow))


@dataclass(frozen=True, slots=True)
class TriageGuide:
    """Triage rows by reason (in file order; a user's new reasons come last)."""

    rows: Mapping[str, TriageRow]

    def row(self, reason: str) -> TriageRow | None:
        """The row for ``reason``, or None."""
        return self.rows.get(reason)

    def reasons(self) -> list[str]:
        """Every reason the guide has a row for."""
        return list(self.rows)

    def extended(self, other: TriageGuide) -> TriageGuide:
        """This guide with ``other``'s rows added; ``other`` wins for a reason both have."""
        return TriageGuide(MappingProxyType({**self.rows, **other.rows}))


def _row(source: str, index: int, raw: object) -> TriageRow:
    where = f"{source}: row {index}"
    if not isinstance(raw, dict):
        raise TriageGuideError(f"{where}: expected a table ([[row]]), got {type(raw).__name__}")
    reason = raw.get("reason")
    if isinstance(reason, str) and reason.strip():
        where = f"{where} (reason {reason!r})"
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        raise TriageGuideError(
            f"{where}: unknown key(s) {', '.join(unknown)}; a row has {', '.join(_KEYS)}"
        )
    missing = [key for key in _KEYS if key not in raw]
    if missing:
        raise TriageGuideError(f"{where}: missing key(s) {', '.join(missing)}")
    for key in _KEYS:
        value = raw[key]
        if not isinstance(value, str) or not value.strip():
            raise TriageGuideError(f"{where}: {key} must be a non-empty string")
    return TriageRow(**{key: " ".join(str(raw[key]).split()) for key in _KEYS})


def parse_guide(text: str, source: str) -> TriageGuide:
    """The guide in the TOML ``text``; ``source`` names it in errors."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TriageGuideError(f"{source}: not valid TOML ({exc})") from None
    extra = sorted(set(document) - {"row"})
    if extra:
        raise TriageGuideError(
            f"{source}: unknown top-level key(s) {', '.join(extra)}; use [[row]] tables"
        )
    raw_rows = document.get("row", [])
    if not isinstance(raw_rows, list):
        raise TriageGuideError(f"{source}: row must be an array of tables ([[row]])")
    rows: dict[str, TriageRow] = {}
    for index, raw in enumerate(raw_rows, start=1):
        row = _row(source, index, raw)
        if row.reason in rows:
            raise TriageGuideError(f"{source}: row {index}: reason {row.reason!r} given twice")
        rows[row.reason] = row
    return TriageGuide(MappingProxyType(rows))


def load_guide(path: Path | str) -> TriageGuide:
    """The guide in the TOML file ``path``; ``TriageGuideError`` naming the file if it
    cannot be read or a row is wrong."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8"
        raise TriageGuideError(f"{file}: cannot read the triage guide ({detail})") from None
    return parse_guide(text, str(file))


def package_guide() -> TriageGuide:
    """The guide shipped with llamon-agent (one row per built-in catalog reason)."""
    text = resources.files("llamon_agent.core").joinpath(PACKAGE_GUIDE).read_text("utf-8")
    return parse_guide(text, PACKAGE_GUIDE)


def triage_guide(extra: Iterable[Path | str] = ()) -> TriageGuide:
    """The shipped guide extended by ``LLAMON_TRIAGE_GUIDE`` (when set), then by each of
    ``extra`` in order; a later file's row replaces an earlier one for the same reason."""
    guide = package_guide()
    configured = os.environ.get(TRIAGE_GUIDE_ENV, "").strip()
    for path in ([configured] if configured else []) + list(extra):
        guide = guide.extended(load_guide(path))
    return guide

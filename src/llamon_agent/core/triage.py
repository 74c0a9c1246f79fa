"""The triage guide: for each failure reason, its symptom, where to look first and the fix.

The guide is data: ``triage_guide.toml`` ships in this package, one ``[[row]]`` per
reason of the reason catalog, each with four text fields::

    [[row]]
    reason = "timeout"
    symptom = "..."      # what the operator or the caller sees
    look_first = "..."   # which log, record field, event or component to read first
    fix = "..."          # what usually resolves it

A reason with no row of its own (an unmapped exception's reason is the snake_case of
its type, e.g. ``runtime_error``) falls back to the row of its errorCode: one
``[[error_code]]`` table per ``ErrorCode``, with ``error_code`` in place of ``reason``.

Your own guide (``LLAMON_TRIAGE_GUIDE=path.toml`` or ``llamon triage --guide FILE``) has
the same format; its rows add to the shipped ones, and a row whose reason (or errorCode)
the shipped guide has replaces that row as a whole. A file that is not TOML, a row with
an unknown or a missing key, a field that is not a non-empty string, an unknown
errorCode, or a reason given twice in one file raises ``TriageGuideError`` naming the
file and the row.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Final

from llamon_agent.core.codes import ErrorCode
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
    """One reason's triage: what is seen, where to look first, and the fix (for an
    errorCode's fallback row, ``reason`` is the errorCode's name)."""

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
_TABLES: Final = {"row": "reason", "error_code": "error_code"}
"""Top-level arrays of tables, and the key that names each of their rows."""


@dataclass(frozen=True, slots=True)
class TriageGuide:
    """Triage rows by reason (in file order; a user's new reasons come last), and the
    fallback rows by errorCode name."""

    rows: Mapping[str, TriageRow]
    code_rows: Mapping[str, TriageRow] = field(default_factory=lambda: MappingProxyType({}))

    def row(self, reason: str) -> TriageRow | None:
        """The row for ``reason``, or None."""
        return self.rows.get(reason)

    def row_for(self, reason: str, error_code: str) -> tuple[TriageRow, bool] | None:
        """The row for ``reason``, else the fallback row of ``error_code``; with True when
        the row is the reason's own. None when neither exists."""
        own = self.rows.get(reason)
        if own is not None:
            return own, True
        fallback = self.code_rows.get(error_code)
        return (fallback, False) if fallback is not None else None

    def reasons(self) -> list[str]:
        """Every reason the guide has a row for."""
        return list(self.rows)

    def extended(self, other: TriageGuide) -> TriageGuide:
        """This guide with ``other``'s rows added; ``other`` wins for a reason (or an
        errorCode) both have."""
        return TriageGuide(
            MappingProxyType({**self.rows, **other.rows}),
            MappingProxyType({**self.code_rows, **other.code_rows}),
        )


def _row(source: str, table: str, index: int, raw: object) -> TriageRow:
    name = _TABLES[table]
    keys = (name, *_KEYS[1:])
    where = f"{source}: {table} {index}"
    if not isinstance(raw, dict):
        raise TriageGuideError(f"{where}: expected a table ([[{table}]]), got {type(raw).__name__}")
    value = raw.get(name)
    if isinstance(value, str) and value.strip():
        where = f"{where} ({name} {value!r})"
    unknown = sorted(set(raw) - set(keys))
    if unknown:
        raise TriageGuideError(
            f"{where}: unknown key(s) {', '.join(unknown)};"
            f" {'an' if table[0] in 'aeiou' else 'a'} {table} has {', '.join(keys)}"
        )
    missing = [key for key in keys if key not in raw]
    if missing:
        raise TriageGuideError(f"{where}: missing key(s) {', '.join(missing)}")
    for key in keys:
        text = raw[key]
        if not isinstance(text, str) or not text.strip():
            raise TriageGuideError(f"{where}: {key} must be a non-empty string")
    if table == "error_code" and raw[name] not in ErrorCode.__members__:
        known = ", ".join(code.value for code in ErrorCode)
        raise TriageGuideError(f"{where}: unknown errorCode; use one of {known}")
    return TriageRow(*(" ".join(str(raw[key]).split()) for key in keys))


def parse_guide(text: str, source: str) -> TriageGuide:
    """The guide in the TOML ``text``; ``source`` names it in errors."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TriageGuideError(f"{source}: not valid TOML ({exc})") from None
    extra = sorted(set(document) - set(_TABLES))
    if extra:
        raise TriageGuideError(
            f"{source}: unknown top-level key(s) {', '.join(extra)};"
            " use [[row]] and [[error_code]] tables"
        )
    found: dict[str, dict[str, TriageRow]] = {}
    for table in _TABLES:
        raw_rows = document.get(table, [])
        if not isinstance(raw_rows, list):
            raise TriageGuideError(f"{source}: {table} must be an array of tables ([[{table}]])")
        rows = found.setdefault(table, {})
        for index, raw in enumerate(raw_rows, start=1):
            row = _row(source, table, index, raw)
            if row.reason in rows:
                raise TriageGuideError(
                    f"{source}: {table} {index}: {_TABLES[table]} {row.reason!r} given twice"
                )
            rows[row.reason] = row
    return TriageGuide(MappingProxyType(found["row"]), MappingProxyType(found["error_code"]))


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

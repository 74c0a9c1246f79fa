"""Every markdown table in the README and docs/ renders: each row has its header's cells.

A row with more or fewer cells than its header (a ``|`` too many, two rows run together)
is shown garbled or cut by every markdown renderer.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
DELIMITER_ROW = re.compile(r"\|(\s*:?-+:?\s*\|)+")


def _cells(row: str) -> int:
    """Cells of a table row; ``\\|`` is a literal bar (also inside code spans)."""
    return len(re.split(r"(?<!\\)\|", row.strip().strip("|")))


def _bad_rows(text: str) -> list[str]:
    lines = text.splitlines()
    bad: list[str] = []
    in_code = False
    for number, line in enumerate(lines):
        if line.startswith("```"):
            in_code = not in_code
        following = lines[number + 1].strip() if number + 1 < len(lines) else ""
        if in_code or not line.startswith("|") or not DELIMITER_ROW.fullmatch(following):
            continue
        width = _cells(line)
        for offset, row in enumerate(lines[number + 2 :], start=number + 3):
            if not row.startswith("|"):
                break
            if _cells(row) != width:
                bad.append(f"line {offset}: {row[:80]}")
    return bad


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_table_row_has_the_headers_cells(document: Path) -> None:
    assert _bad_rows(document.read_text(encoding="utf-8")) == []

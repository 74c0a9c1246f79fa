"""One per-errorCode table: default message, meaning, client and operator action."""

from __future__ import annotations

import re
from pathlib import Path

from llamon_agent.core.catalog import DEFAULT_OPERATOR_ACTIONS
from llamon_agent.core.codes import DEFAULT_MESSAGES, ERROR_CODE_TABLE, ErrorCode

ROOT = Path(__file__).parents[2]
SRC = ROOT / "src" / "llamon_agent"


def test_one_row_per_code_in_enum_order() -> None:
    assert [spec.code for spec in ERROR_CODE_TABLE] == list(ErrorCode)


def test_the_old_names_are_read_from_the_table() -> None:
    assert dict(DEFAULT_MESSAGES) == {spec.code: spec.message for spec in ERROR_CODE_TABLE}
    assert dict(DEFAULT_OPERATOR_ACTIONS) == {
        spec.code: spec.operator_action for spec in ERROR_CODE_TABLE
    }


def test_every_text_is_filled_in() -> None:
    for spec in ERROR_CODE_TABLE:
        assert spec.message.endswith(".")
        assert spec.meaning
        assert spec.client_action
        assert re.fullmatch(r"[a-z_]+", spec.operator_action)


def test_docs_error_code_table_is_the_table() -> None:
    docs = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    section = docs.split("## errorCode: what clients branch on", 1)[1].split("\n## ", 1)[0]
    rows = [
        [cell.strip().replace("`", "") for cell in line.strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| `")
    ]
    assert rows == [
        [spec.code.value, spec.meaning, spec.client_action] for spec in ERROR_CODE_TABLE
    ]


def test_no_second_copy_of_the_meanings_in_the_package() -> None:
    texts = [spec.meaning for spec in ERROR_CODE_TABLE] + [s.message for s in ERROR_CODE_TABLE]
    copies = [
        (str(path.relative_to(SRC)), text)
        for path in SRC.rglob("*.py")
        if path.name != "codes.py"
        for text in texts
        if text in path.read_text(encoding="utf-8")
    ]
    assert copies == []

"""The JSON Schema of a case file, generated from the case models.

``case_file_schema()`` is the schema; the package ships it as ``case.schema.json`` (next
to this module) for editors and other tools. The file is regenerated with::

    llamon lab schema > src/llamon_agent/lab/case.schema.json

and a test checks the shipped file equals ``render_schema()``. ``load_cases`` validates
with the models the schema is generated from, so a file the schema accepts is a file
``load_cases`` accepts, apart from the checks a schema cannot hold: reasons known to the
catalog at load time, exactly one of ``query``/``parts``, names used once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from llamon_agent.lab.cases import CASE_FILE_ADAPTER

__all__ = ["SCHEMA_PATH", "case_file_schema", "render_schema", "shipped_schema"]

SCHEMA_PATH: Final = Path(__file__).with_name("case.schema.json")
"""Where the package keeps the generated schema."""


def case_file_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a case file."""
    schema = CASE_FILE_ADAPTER.json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "llamon Quality Lab case file",
        "description": "One case, a list of cases, or an object with a 'cases' list.",
        **schema,
    }


def render_schema() -> str:
    """The schema as the shipped file's text (two-space indent, a final newline)."""
    return json.dumps(case_file_schema(), indent=2, ensure_ascii=False) + "\n"


def shipped_schema() -> str:
    """The text of the schema file the package ships."""
    return SCHEMA_PATH.read_text(encoding="utf-8")

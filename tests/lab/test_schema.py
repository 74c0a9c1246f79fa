"""The shipped ``case.schema.json`` is the one the models generate, and it accepts and
rejects what ``load_cases`` does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from llamon_agent.lab import CaseFileError, load_cases
from llamon_agent.lab.schema import SCHEMA_PATH, case_file_schema, render_schema, shipped_schema
from tests.lab.test_cases import FULL_CASE, SEED_SHAPE

VALIDATOR = jsonschema.Draft202012Validator(case_file_schema())


def test_the_shipped_schema_is_the_generated_one() -> None:
    # regenerate with: llamon lab schema > src/llamon_agent/lab/case.schema.json
    assert SCHEMA_PATH.name == "case.schema.json"
    assert shipped_schema() == render_schema()
    jsonschema.Draft202012Validator.check_schema(json.loads(shipped_schema()))


@pytest.mark.parametrize(
    "document",
    [
        SEED_SHAPE,
        FULL_CASE,
        [SEED_SHAPE, FULL_CASE],
        {"cases": [SEED_SHAPE]},
    ],
    ids=["seed-shape", "full", "list", "cases-key"],
)
def test_schema_and_loader_accept_the_same_files(tmp_path: Path, document: Any) -> None:
    VALIDATOR.validate(document)
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    assert load_cases(path)


@pytest.mark.parametrize(
    "document",
    [
        {**SEED_SHAPE, "expected_tool": "x"},
        {**SEED_SHAPE, "mode": "run"},
        {**SEED_SHAPE, "assertions": {"error_code": "RATE_LIMIT"}},
        {**SEED_SHAPE, "assertions": {"final_state": "done"}},
        {**SEED_SHAPE, "assertions": {"max_duration_ms": 0}},
        {**SEED_SHAPE, "faults": [{"kind": "tool_slow", "tool": "t"}]},
        {**SEED_SHAPE, "faults": [{"kind": "model_server_error", "status": 404}]},
        {"cases": [SEED_SHAPE], "extra": 1},
    ],
    ids=[
        "unknown-field",
        "mode",
        "error-code",
        "state",
        "duration",
        "fault-field",
        "status",
        "file-key",
    ],
)
def test_schema_and_loader_reject_the_same_files(tmp_path: Path, document: Any) -> None:
    assert not VALIDATOR.is_valid(document)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(CaseFileError):
        load_cases(path)

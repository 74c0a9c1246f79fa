"""``load_cases``: every field, the three file shapes, JSON and YAML, directories, and
errors that name the file, the case and the field -- all of them at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from a2a.types import TaskState

from llamon_agent.core import catalog
from llamon_agent.core.catalog import ReasonSpec, reason_catalog, register_reason
from llamon_agent.core.codes import ErrorCode, Stage
from llamon_agent.lab import Case, CaseFileError, CaseProblem, load_cases
from llamon_agent.lab.cases import (
    DataPart,
    FilePart,
    McpConnectionDrop,
    ModelRateLimited,
    ModelServerError,
    TextPart,
    ToolSlow,
)

FULL_CASE: dict[str, Any] = {
    "name": "order-detail",
    "mode": "execute",
    "parts": [
        {"kind": "text", "text": "Show order 42"},
        {"kind": "data", "data": {"order": 42}},
        {"kind": "file", "uri": "file:///tmp/receipt.pdf", "mime_type": "application/pdf"},
    ],
    "expected_target": "getOrderDetail",
    "assertions": {
        "selected_target": "getOrderDetail",
        "allowed_failure_reasons": ["auth_failed", "http_4xx"],
        "uncaught_server_error": False,
        "final_state": "failed",
        "error_code": "AUTH_REQUIRED",
        "artifact_contains": ["order", "42"],
        "max_rounds": 5,
        "max_duration_ms": 15000,
    },
    "faults": [
        {"kind": "tool_timeout", "tool": "getOrderDetail"},
        {"kind": "tool_raises", "tool": "getOrderDetail"},
        {"kind": "tool_error", "tool": "getOrderDetail", "message": "no such order"},
        {"kind": "tool_slow", "tool": "getOrderDetail", "delay_ms": 800},
        {"kind": "model_malformed_json"},
        {"kind": "model_empty_answer"},
        {"kind": "model_rate_limited", "retry_after_ms": 2500},
        {"kind": "model_server_error", "status": 502},
        {"kind": "mcp_connection_drop", "server": "orders", "after_calls": 2},
        {"kind": "downstream_failed", "agent": "billing"},
        {"kind": "downstream_unavailable", "agent": "billing"},
        {"kind": "downstream_stream_drop", "agent": "billing", "after_events": 3},
        {"kind": "task_store_fails_once"},
    ],
    "cleanup": [{"tool": "cancelOrder", "arguments": {"order": 42}}],
    "tags": ["orders", "auth"],
}

SEED_SHAPE: dict[str, Any] = {
    "mode": "execute",
    "query": "주문 상세를 보여줘",
    "expected_target": "getOrderDetail",
    "assertions": {
        "selected_target": "getOrderDetail",
        "allowed_failure_reasons": ["auth_context_required", "auth_failed", "http_4xx"],
        "uncaught_server_error": False,
    },
}


def _write(path: Path, content: Any) -> Path:
    path.write_text(json.dumps(content, ensure_ascii=False), encoding="utf-8")
    return path


def _problems(*paths: Path) -> list[CaseProblem]:
    with pytest.raises(CaseFileError) as raised:
        load_cases(*paths)
    assert str(raised.value) == "\n".join(str(p) for p in raised.value.problems)
    return raised.value.problems


def test_every_field_is_read(tmp_path: Path) -> None:
    (case,) = load_cases(_write(tmp_path / "full.json", FULL_CASE))
    assert case.name == "order-detail"
    assert case.label == "order-detail"
    assert case.source == str(tmp_path / "full.json")
    assert case.mode == "execute"
    assert case.query is None
    assert case.parts is not None
    assert [type(part) for part in case.parts] == [TextPart, DataPart, FilePart]
    assert case.parts[1] == DataPart(kind="data", data={"order": 42})
    assert case.expected_target == "getOrderDetail"
    a = case.assertions
    assert a.selected_target == "getOrderDetail"
    assert a.allowed_failure_reasons == ["auth_failed", "http_4xx"]
    assert a.uncaught_server_error is False
    assert a.final_state is TaskState.failed
    assert a.error_code is ErrorCode.AUTH_REQUIRED
    assert a.artifact_contains == ["order", "42"]
    assert (a.max_rounds, a.max_duration_ms) == (5, 15000)
    assert a.count == 8
    assert [fault.kind for fault in case.faults] == [f["kind"] for f in FULL_CASE["faults"]]
    assert case.faults[3] == ToolSlow(kind="tool_slow", tool="getOrderDetail", delay_ms=800)
    assert case.faults[6] == ModelRateLimited(kind="model_rate_limited", retry_after_ms=2500)
    assert case.faults[7] == ModelServerError(kind="model_server_error", status=502)
    assert case.faults[8] == McpConnectionDrop(
        kind="mcp_connection_drop", server="orders", after_calls=2
    )
    assert [(step.tool, step.arguments) for step in case.cleanup] == [
        ("cancelOrder", {"order": 42})
    ]
    assert case.has_cleanup
    assert not case.needs_cleanup_check
    assert case.tags == ["orders", "auth"]
    # what a case dumps is what it loads
    dumped = case.model_dump(mode="json")
    assert Case.model_validate(dumped).model_dump(mode="json") == dumped


def test_the_documented_json_shape_loads_as_written(tmp_path: Path) -> None:
    (case,) = load_cases(_write(tmp_path / "seed.json", SEED_SHAPE))
    assert case.name is None
    assert case.label == "seed.json#0"
    assert case.query == "주문 상세를 보여줘"
    assert case.assertions.allowed_failure_reasons == [
        "auth_context_required",
        "auth_failed",
        "http_4xx",
    ]
    assert case.assertions.uncaught_server_error is False
    assert case.assertions.final_state is None
    assert case.faults == []
    assert case.tags == []
    # an execute case without cleanup is recorded for the runner to judge
    assert case.needs_cleanup_check
    assert not case.has_cleanup


def test_plan_mode_needs_no_cleanup(tmp_path: Path) -> None:
    (case,) = load_cases(_write(tmp_path / "plan.json", {**SEED_SHAPE, "mode": "plan"}))
    assert case.mode == "plan"
    assert not case.needs_cleanup_check


def test_one_case_a_list_and_a_cases_key_all_load(tmp_path: Path) -> None:
    one = _write(tmp_path / "one.json", {**SEED_SHAPE, "name": "a"})
    listed = _write(tmp_path / "list.json", [{**SEED_SHAPE, "name": "b"}, SEED_SHAPE])
    keyed = _write(tmp_path / "keyed.json", {"cases": [{**SEED_SHAPE, "name": "c"}]})
    cases = load_cases(one, listed, keyed)
    assert [case.label for case in cases] == ["a", "b", "list.json#1", "c"]


def test_yaml_files_load_like_json(tmp_path: Path) -> None:
    (tmp_path / "cases.yaml").write_text(
        "cases:\n"
        "  - name: yaml-case\n"
        "    mode: plan\n"
        "    query: find Dune\n"
        "    expected_target: search_books\n"
        "    assertions: {final_state: input-required, error_code: RATE_LIMITED}\n"
        "    faults:\n"
        "      - {kind: tool_slow, tool: search_books, delay_ms: 50}\n"
        "    tags: [yaml]\n",
        encoding="utf-8",
    )
    (tmp_path / "one.yml").write_text("name: yml-case\nmode: execute\nquery: hi\n", "utf-8")
    cases = load_cases(tmp_path / "cases.yaml", tmp_path / "one.yml")
    assert [case.name for case in cases] == ["yaml-case", "yml-case"]
    assert cases[0].assertions.final_state is TaskState.input_required
    assert cases[0].assertions.error_code is ErrorCode.RATE_LIMITED
    assert cases[0].faults == [ToolSlow(kind="tool_slow", tool="search_books", delay_ms=50)]


def test_a_directory_loads_its_case_files_in_order(tmp_path: Path) -> None:
    nested = tmp_path / "more"
    nested.mkdir()
    _write(tmp_path / "b.json", {**SEED_SHAPE, "name": "from-b"})
    (tmp_path / "a.yaml").write_text("name: from-a\nmode: plan\nquery: hi\n", "utf-8")
    _write(nested / "c.json", [{**SEED_SHAPE, "name": "from-c"}])
    (tmp_path / "notes.txt").write_text("not a case", "utf-8")
    assert [case.name for case in load_cases(tmp_path)] == ["from-a", "from-b", "from-c"]
    # a file named again (itself or through its directory) is read once
    twice = load_cases(tmp_path / "b.json", tmp_path, nested / "c.json")
    assert [case.name for case in twice] == ["from-b", "from-a", "from-c"]


def test_every_problem_names_its_file_case_and_field(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "bad.json",
        [
            {
                "name": "broken",
                "mode": "run",
                "query": "hi",
                "assertions": {"max_rounds": 0, "surprise": True},
                "faults": [{"kind": "tool_slow", "tool": "x"}],
            },
            {"mode": "plan", "query": "ok", "cleanup": [{"arguments": {}}]},
            {"name": "fine", "mode": "plan", "query": "ok"},
        ],
    )
    problems = _problems(path)
    assert [(p.file, p.case, p.field, p.message) for p in problems] == [
        (str(path), "broken", "mode", "Input should be 'execute' or 'plan'"),
        (
            str(path),
            "broken",
            "assertions.max_rounds",
            "Input should be greater than or equal to 1",
        ),
        (str(path), "broken", "assertions.surprise", "unknown field"),
        (str(path), "broken", "faults[0].delay_ms", "Field required"),
        (str(path), "#1", "cleanup[0].tool", "Field required"),
    ]
    assert str(problems[0]) == f"{path}: case 'broken': mode: Input should be 'execute' or 'plan'"
    assert str(problems[4]) == f"{path}: case #1: cleanup[0].tool: Field required"


def test_problems_from_several_files_come_together(tmp_path: Path) -> None:
    first = _write(tmp_path / "first.json", {**SEED_SHAPE, "name": "dup", "tags": [""]})
    second = _write(tmp_path / "second.json", {**SEED_SHAPE, "name": "dup"})
    problems = _problems(first, second, tmp_path / "missing.json")
    assert [str(p) for p in problems] == [
        f"{first}: case 'dup': tags[0]: String should have at least 1 character",
        f"{tmp_path / 'missing.json'}: no such file or directory",
    ]
    # fixed tags: now the name used twice is the problem
    _write(first, {**SEED_SHAPE, "name": "dup"})
    assert [str(p) for p in _problems(first, second)] == [
        f"{second}: case 'dup': name: name already used in {first}"
    ]


def test_an_unknown_reason_is_named_with_close_matches(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "reasons.json",
        {
            **SEED_SHAPE,
            "name": "r",
            "assertions": {"allowed_failure_reasons": ["auth_fail", "http_4xx", "zzzz"]},
        },
    )
    assert [(p.field, p.message) for p in _problems(path)] == [
        (
            "assertions.allowed_failure_reasons[0]",
            "unknown reason 'auth_fail'; did you mean 'auth_failed' or 'card_fetch_failed'"
            " or 'cleanup_failed'?",
        ),
        ("assertions.allowed_failure_reasons[2]", "unknown reason 'zzzz'"),
    ]


def test_a_registered_reason_counts_as_known(tmp_path: Path) -> None:
    name = "lab_test_only_reason"
    assert name not in {spec.reason for spec in reason_catalog()}
    path = _write(
        tmp_path / "custom.json",
        {**SEED_SHAPE, "assertions": {"allowed_failure_reasons": [name]}},
    )
    assert _problems(path)[0].message == f"unknown reason {name!r}"
    register_reason(
        ReasonSpec(name, Stage.EXECUTE, ErrorCode.INVALID_INPUT, False, "fix_it", "a test")
    )
    try:
        (case,) = load_cases(path)
    finally:
        catalog._catalog.pop(name)
    assert case.assertions.allowed_failure_reasons == [name]


def test_an_unknown_error_code_state_and_fault_kind_suggest_close_matches(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path / "values.json",
        {
            **SEED_SHAPE,
            "name": "v",
            "assertions": {"error_code": "RATE_LIMIT", "final_state": "complete"},
            "faults": [{"kind": "tool_timout", "tool": "t"}, {"tool": "t"}],
        },
    )
    assert [(p.field, p.message) for p in _problems(path)] == [
        ("assertions.final_state", "unknown task state 'complete'; did you mean 'completed'?"),
        ("assertions.error_code", "unknown errorCode 'RATE_LIMIT'; did you mean 'RATE_LIMITED'?"),
        (
            "faults[0]",
            "unknown kind 'tool_timout'; did you mean 'tool_timeout' or 'tool_slow'?",
        ),
        ("faults[1]", "'kind' is required"),
    ]


def test_union_fields_report_the_member_that_was_meant(tmp_path: Path) -> None:
    texts = {**SEED_SHAPE, "name": "texts", "assertions": {"artifact_contains": ["ok", ""]}}
    number = {**SEED_SHAPE, "name": "number", "assertions": {"artifact_contains": 7}}
    null_parts = {**SEED_SHAPE, "name": "null-parts", "parts": None, "tags": [1]}
    problems = _problems(_write(tmp_path / "union.json", [texts, number, null_parts]))
    assert [(p.case, p.field, p.message) for p in problems] == [
        (
            "texts",
            "assertions.artifact_contains[1]",
            "String should have at least 1 character",
        ),
        ("number", "assertions.artifact_contains", "Input should be a valid string"),
        ("number", "assertions.artifact_contains", "Input should be a valid list"),
        ("null-parts", "tags[0]", "Input should be a valid string"),
    ]


def test_a_case_gives_its_message_as_query_or_parts(tmp_path: Path) -> None:
    neither = {"name": "neither", "mode": "plan"}
    both = {
        "name": "both",
        "mode": "plan",
        "query": "hi",
        "parts": [{"kind": "text", "text": "hi"}],
    }
    both_and_more = {**both, "name": "both-and-more", "tags": 3}
    problems = _problems(_write(tmp_path / "msg.json", [neither, both, both_and_more]))
    one = "give the message as either 'query' or 'parts' (exactly one)"
    assert [(p.case, p.field, p.message) for p in problems] == [
        ("neither", "", one),
        ("both", "", one),
        ("both-and-more", "tags", "Input should be a valid list"),
        ("both-and-more", "", one),
    ]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("broken.json", '{"mode": "plan",', "not valid JSON (line 1, column 17)"),
        ("broken.yaml", "mode: [plan\n", "not valid YAML (line 2, column 1)"),
        ("scalar.json", "42", "expected a case, a list of cases or a mapping with a 'cases' list"),
        ("empty.json", "[]", "holds no case"),
        ("case.txt", "{}", "not a case file: use .json, .yaml or .yml"),
    ],
)
def test_a_file_that_does_not_parse_is_named(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    (problem,) = _problems(tmp_path / name)
    assert (problem.file, problem.case, problem.field) == (str(tmp_path / name), "", "")
    assert problem.message.startswith(message), problem.message


def test_a_directory_without_case_files_is_a_problem(tmp_path: Path) -> None:
    (problem,) = _problems(tmp_path)
    assert str(problem) == f"{tmp_path}: holds no .json, .yaml or .yml file"


def test_case_models_forbid_unknown_fields_when_built_in_code() -> None:
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        Case.model_validate({**SEED_SHAPE, "expected_tool": "x"})
    case = Case(mode="plan", query="hi")
    assert case.label == "<case>#0"
    assert case.source == ""

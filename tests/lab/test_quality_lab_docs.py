"""docs/quality-lab.md and docs/lab-cases/: every block runs as shown, the tables list
every field and fault kind, and the sample cases fit the example agents."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llamon_agent.cli import app
from llamon_agent.examples import demo_agent
from llamon_agent.lab import Case, load_cases
from llamon_agent.lab.cases import Assertions, Fault
from llamon_agent.lab.schema import case_file_schema

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "quality-lab.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", DOC, flags=re.DOTALL)
SAMPLES = ROOT / "docs" / "lab-cases"
runner = CliRunner()


def _blocks(language: str) -> list[str]:
    return [text for lang, text in BLOCKS if lang == language]


def test_every_block_is_a_kind_this_test_runs() -> None:
    assert sorted({lang for lang, _ in BLOCKS}) == ["bash", "json", "python", "text", "yaml"]


def test_the_yaml_and_json_examples_load(tmp_path: Path) -> None:
    (yaml_block,) = _blocks("yaml")
    (json_block,) = _blocks("json")
    (tmp_path / "cases.yaml").write_text(yaml_block, encoding="utf-8")
    (tmp_path / "order-detail.json").write_text(json_block, encoding="utf-8")
    listed, one = load_cases(tmp_path / "cases.yaml"), load_cases(tmp_path / "order-detail.json")
    assert [case.label for case in listed] == ["order-detail-without-credentials", "cancel-order"]
    assert one[0].label == "order-detail.json#0"
    # the JSON block is the YAML's first case without its name and tags
    assert one[0].model_dump(exclude={"name", "tags"}) == listed[0].model_dump(
        exclude={"name", "tags"}
    )
    assert listed[1].has_cleanup
    assert listed[0].needs_cleanup_check


def test_the_bash_commands_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    commands = [line for block in _blocks("bash") for line in block.splitlines() if line]
    assert len(commands) == 3
    outputs = []
    for command in commands:
        program, *args = shlex.split(command)
        assert program == "llamon"
        result = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 0, (command, result.output)
        outputs.append(result.stdout)
    assert outputs[0].splitlines()[-1] == "OK 11 case(s) valid"
    assert [row["name"] for row in json.loads(outputs[1])["cases"]] == [
        "demo-hello",
        "demo-upstream-fails-cleanly",
        "demo-quota-says-when-to-retry",
        "demo-partial-keeps-its-artifact",
        "demo-birthday-asks-for-input",
        "demo-survives-a-task-store-hiccup",
    ]
    assert json.loads(outputs[2]) == case_file_schema()


def test_the_error_listing_is_what_check_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (expected,) = _blocks("text")
    (yaml_block,) = _blocks("yaml")
    # the second case with a misspelt reason and errorCode, and a third without a message
    broken = yaml_block.replace(
        "    assertions:\n      final_state: completed",
        "    assertions:\n      allowed_failure_reasons: [auth_fail]\n      error_code: RATE_LIMIT",
    )
    assert broken != yaml_block
    broken += "  - mode: plan\n"
    (tmp_path / "cases.yaml").write_text(broken, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["lab", "check", "cases.yaml"], env={"COLUMNS": "400"})
    assert result.exit_code == 2
    assert result.stderr == expected


def test_the_python_block_prints_what_its_comments_say(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    (block,) = _blocks("python")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "quality-lab.md", "exec"), {})  # noqa: S102 -- our own docs
    promised = re.findall(r"print\(.*\)  # (.*)", block)
    assert printed.getvalue().splitlines() == promised


def test_the_tables_list_every_assertion_and_fault_kind() -> None:
    rows = set(re.findall(r"^\| `(\w+)` \|", DOC, flags=re.MULTILINE))
    assert set(Assertions.model_fields) <= rows
    assert set(Case.model_fields) <= rows
    union = typing.get_args(typing.get_args(Fault)[0])
    kinds = {typing.get_args(model.model_fields["kind"].annotation)[0] for model in union}
    assert len(kinds) == 13
    assert kinds <= rows


async def test_the_sample_cases_fit_the_example_agents() -> None:
    from llamon_agent.examples.bookshop import build_server
    from llamon_agent.mcp import MCPToolLoader

    cases = load_cases(SAMPLES)
    assert sorted(path.name for path in SAMPLES.iterdir()) == ["bookshop.yaml", "demo-agent.json"]
    bookshop = [case for case in cases if case.source.endswith("bookshop.yaml")]
    demo = [case for case in cases if case.source.endswith("demo-agent.json")]
    assert (len(bookshop), len(demo)) == (5, 6)

    async with MCPToolLoader(build_server()) as loader:
        tools = {tool.name for tool in await loader.to_tools()}
    assert tools == {"search_books", "get_book", "order_book"}
    for case in bookshop:
        assert case.expected_target in tools, case.label
        assert {getattr(fault, "tool", None) for fault in case.faults} <= tools | {None}
    # every demo case sends one of the demo agent's commands
    commands = set(re.findall(r"^\* ``(\w+)``", demo_agent.__doc__ or "", flags=re.MULTILINE))
    assert {case.query for case in demo} <= commands
    assert all(case.expected_target is None for case in demo)

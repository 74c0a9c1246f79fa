"""docs/quality-lab.md and docs/lab-cases/: every block runs as shown, the tables list
every field and fault kind, and the sample cases fit the example agents."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import subprocess
import sys
import typing
from pathlib import Path
from xml.etree import ElementTree

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


def _commands(program: str) -> list[str]:
    lines = [line for block in _blocks("bash") for line in block.splitlines() if line]
    return [line for line in lines if line.startswith(f"{program} ")]


def test_every_bash_line_is_a_command_these_tests_run() -> None:
    lines = [line for block in _blocks("bash") for line in block.splitlines() if line]
    assert len(lines) == len(_commands("llamon")) + len(_commands("pytest")) == 5


def test_the_llamon_commands_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    commands = _commands("llamon")
    assert len(commands) == 4
    outputs = []
    for command in commands:
        _, *args = shlex.split(command)
        args = [str(tmp_path / arg) if arg.startswith("lab-") else arg for arg in args]
        result = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert result.exit_code == 0, (command, result.output)
        outputs.append(result.stdout)
    assert outputs[0].splitlines()[-1] == "OK 12 case(s) valid"
    assert [row["name"] for row in json.loads(outputs[1])["cases"]] == [
        "demo-hello",
        "demo-upstream-fails-cleanly",
        "demo-quota-says-when-to-retry",
        "demo-partial-keeps-its-artifact",
        "demo-birthday-asks-for-input",
        "demo-survives-a-task-store-hiccup",
    ]
    assert json.loads(outputs[2]) == case_file_schema()
    # llamon lab run: every bookshop sample passes; both reports are written
    assert outputs[3].splitlines()[-1] == "OK 6 passed"
    junit = ElementTree.parse(tmp_path / "lab-junit.xml").getroot()  # noqa: S314 -- ours
    assert junit.get("tests") == "6"
    assert junit.get("failures") == "0"
    assert "bookshop-order-is-planned-not-placed" in (tmp_path / "lab-report.html").read_text()


def test_the_pytest_command_runs_the_cases_as_tests() -> None:
    (command,) = _commands("pytest")
    args = shlex.split(command)[1:]
    done = subprocess.run(  # noqa: S603 -- our own docs' command
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 passed" in done.stdout


def test_the_lab_fixture_example_passes(tmp_path: Path) -> None:
    fixture_block = _blocks("python")[-1]
    (tmp_path / "test_example.py").write_text(fixture_block, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "test_example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_the_error_listing_is_what_check_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = _blocks("text")[0]
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


@pytest.mark.parametrize("index", [0, 1])
def test_the_python_blocks_print_what_their_comments_say(
    monkeypatch: pytest.MonkeyPatch, index: int
) -> None:
    monkeypatch.chdir(ROOT)
    block = _blocks("python")[index]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "quality-lab.md", "exec"), {})  # noqa: S102 -- our own docs
    promised = re.findall(r"print\(.*\)  # (.*)", block)
    assert printed.getvalue().splitlines() == promised


def test_the_serve_line_is_the_flag_llamon_serve_takes() -> None:
    line = _blocks("text")[1].strip()
    assert line == "llamon serve myagent:agent --allow-fault-injection"
    result = runner.invoke(app, ["serve", "--help"], env={"COLUMNS": "200"})
    assert "--allow-fault-injection" in result.stdout


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
    assert (len(bookshop), len(demo)) == (6, 6)

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

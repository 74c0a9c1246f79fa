"""docs/quality-lab-learning.md: the case file, the commands, their transcript and the
Python block run as shown, on two lab reports of that case file."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llamon_agent.lab import load_cases
from llamon_agent.lab.results import CaseResult, LabReport

ROOT = Path(__file__).parents[2]
DOC = (ROOT / "docs" / "quality-lab-learning.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", DOC, flags=re.DOTALL)
MONDAY, TUESDAY = 1_795_000_000.0, 1_795_086_400.0
UNAVAILABLE = "upstream_tool_unavailable"
runner = CliRunner()


def _block(language: str) -> str:
    (text,) = [str(text) for lang, text in BLOCKS if lang == language]
    return text


def _nightly_runs(directory: Path) -> None:
    """``cases/lab.yaml`` (the doc's YAML block) and the two reports the doc learns from:
    Monday every case failed, Tuesday every case passed."""
    (directory / "cases").mkdir()
    (directory / "runs").mkdir()
    source = "cases/lab.yaml"
    (directory / source).write_text(_block("yaml"), encoding="utf-8")
    monday = LabReport(
        [
            CaseResult("find-dune", source, outcome="failed", failure_reason=UNAVAILABLE),
            CaseResult("find-emma", source, outcome="failed", failure_reason="timeout"),
            CaseResult("mail-receipt", source, outcome="failed", failure_reason="timeout"),
        ],
        target="shop:agent",
        started_at=MONDAY,
    )
    tuesday = LabReport(
        [
            CaseResult("find-dune", source, selected_target="search_books", rounds=2),
            CaseResult("find-emma", source, selected_target="search_books", rounds=1),
            CaseResult("mail-receipt", source, selected_target="send_mail", rounds=1),
        ],
        target="shop:agent",
        started_at=TUESDAY,
    )
    for name, report in (("monday", monday), ("tuesday", tuesday)):
        text = json.dumps(report.to_dict())
        (directory / "runs" / f"{name}.json").write_text(text, encoding="utf-8")


def _transcript(commands: list[str]) -> str:
    """Run ``commands`` through the ``llamon`` app; the session as a terminal shows it."""
    from llamon_agent.cli import app

    lines: list[str] = []
    for command in commands:
        program, *args = shlex.split(command)
        assert program == "llamon"
        result = runner.invoke(app, args, env={"COLUMNS": "200"})
        lines.append(f"$ {command}")
        lines.extend(line.rstrip() for line in (result.stdout + result.stderr).splitlines())
        if result.exit_code != 0:
            lines += ["$ echo $?", str(result.exit_code)]
    return "\n".join(lines) + "\n"


def test_every_block_is_a_kind_this_test_runs() -> None:
    assert [lang for lang, _ in BLOCKS] == ["yaml", "bash", "text", "python"]


def test_the_commands_print_the_transcript_and_the_python_block_what_it_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _nightly_runs(tmp_path)
    assert [case.name for case in load_cases("cases/lab.yaml")] == [
        "find-dune",
        "find-emma",
        "mail-receipt",
    ]
    commands = [line for line in _block("bash").splitlines() if line]
    assert _transcript(commands) == _block("text")
    assert "example.org" not in (tmp_path / "lab" / "proposals.json").read_text("utf-8")

    block = _block("python")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block, "quality-lab-learning.md", "exec"), {})  # noqa: S102 -- our docs
    promised = re.findall(r"print\(.*\)  # (.*)", block)
    assert printed.getvalue().splitlines() == promised

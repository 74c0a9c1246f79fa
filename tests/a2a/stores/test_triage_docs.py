"""docs/operations.md, "Triage": the TOML example is a valid guide, and every
``llamon triage --reason`` shown prints exactly what the real command prints."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llamon_agent.cli import app
from llamon_agent.core.settings import TRIAGE_GUIDE_ENV
from llamon_agent.core.triage import parse_guide

DOC = (Path(__file__).parents[3] / "docs" / "operations.md").read_text(encoding="utf-8")
SECTION = DOC.split("### Triage\n", 1)[1].split("\n### ", 1)[0]
TOML = re.findall(r"```toml\n(.*?)```", SECTION, flags=re.DOTALL)
TEXT = re.findall(r"```text\n(.*?)```", SECTION, flags=re.DOTALL)


def _sessions(block: str) -> list[tuple[list[str], list[str]]]:
    """``$ command`` lines and the lines printed after each."""
    sessions: list[tuple[list[str], list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            sessions.append((shlex.split(line[2:]), []))
        else:
            sessions[-1][1].append(line)
    return sessions


def test_the_toml_example_is_a_valid_guide() -> None:
    (block,) = TOML
    guide = parse_guide(block, "my_guide.toml")
    assert guide.reasons() == ["timeout", "ledger_locked"]
    assert list(guide.code_rows) == ["INTERNAL_ERROR"]


def test_every_reason_example_prints_what_the_command_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(TRIAGE_GUIDE_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (block,) = TOML
    (tmp_path / "my_guide.toml").write_text(block, encoding="utf-8")
    (tmp_path / "broken.toml").write_text(block.replace("fix =", "fixx =", 1), encoding="utf-8")
    shown = [s for b in TEXT for s in _sessions(b) if "--reason" in s[0]]
    assert len(shown) == 3
    for command, expected in shown:
        assert command[:2] == ["llamon", "triage"]
        result = CliRunner().invoke(app, command[1:])
        assert (result.stdout + result.stderr).splitlines() == expected, command


def test_the_task_example_shows_the_reasons_row_as_the_command_does() -> None:
    ((command, printed),) = [s for b in TEXT for s in _sessions(b) if "--reason" not in s[0]]
    assert command[:2] == ["llamon", "triage"]
    start = printed.index("triage (component_invoke_error)")
    result = CliRunner().invoke(app, ["triage", "--reason", "component_invoke_error"])
    assert result.exit_code == 0, result.output
    expected = result.stdout.splitlines()
    assert printed[start : start + len(expected)] == expected
    assert printed[0] == f"task {command[2]}  state failed"

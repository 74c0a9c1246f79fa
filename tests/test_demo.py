"""`llamon demo` gives every promised answer (it is the README's main job)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from llamon_agent.cli import app
from llamon_agent.demo import run_demo


async def test_every_demo_scenario_answers_as_promised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path))
    results = await run_demo(store="sqlite")
    assert [r.scenario.strip() for r in results] == [
        "success",
        "application-level failure",
        "protocol-level error",
        "failure keeping partial artifacts",
        "stream failing midway",
        "input-required",
        "... resumed with an answer",
    ]
    assert all(r.expected for r in results), results
    assert (tmp_path / "tasks.db").is_file()


@pytest.mark.parametrize("store", ["nosql"])
def test_demo_rejects_an_unknown_store(store: str) -> None:
    result = CliRunner().invoke(app, ["demo", "--store", store])
    assert result.exit_code == 2
    assert "nosql" in result.output


def test_card_lint_is_mounted(tmp_path: Path) -> None:
    card = tmp_path / "card.json"
    card.write_text("{}")
    result = CliRunner().invoke(app, ["card", "lint", str(card)])
    assert result.exit_code == 1
    assert "invalid_card" in result.output

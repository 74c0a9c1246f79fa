"""``llamon lab run --proposals FILE``: learned cases in shadow mode are run and reported,
not counted, and each run moves its proposal's streak toward the promotion gate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llamon_agent.cli import app
from llamon_agent.lab.learn import Proposal
from llamon_agent.lab.proposals import ProposalStore

ROOT = Path(__file__).parents[2]
DEMO = ["--target", "llamon_agent.examples.demo_agent:agent"]
DEMO += ["--card", "llamon_agent.examples.demo_agent:card"]
runner = CliRunner()


def _proposal(name: str, query: str, final_state: str) -> Proposal:
    case = {
        "name": name,
        "mode": "execute",
        "query": query,
        "assertions": {"final_state": final_state},
        "tags": ["learned"],
    }
    return Proposal(id=name, status="shadow", case=case)


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    cases = tmp_path / "cases.json"
    cases.write_text(
        json.dumps([{"name": "hello", "mode": "execute", "query": "hello"}]), encoding="utf-8"
    )
    proposals = tmp_path / "proposals.json"
    ProposalStore(proposals).add(
        [
            _proposal("learned-aaaaaaaaaaaa", "hello", "completed"),  # will pass
            _proposal("learned-bbbbbbbbbbbb", "upstream", "completed"),  # will fail
        ]
    )
    return cases, proposals


@pytest.mark.reason("insufficient_repeated_success")
def test_shadow_cases_are_reported_but_not_counted(files: tuple[Path, Path]) -> None:
    cases, proposals = files
    report = cases.with_name("report.json")
    args = ["lab", "run", str(cases), *DEMO, "--proposals", str(proposals), "--quiet"]
    for _ in range(2):
        result = runner.invoke(app, [*args, "--report-json", str(report)])
        assert result.exit_code == 0, result.output  # the failing shadow case does not count
    data = json.loads(report.read_text(encoding="utf-8"))
    shadow = {row["case"]: row["outcome"] for row in data["results"] if row["shadow"]}
    assert shadow == {"learned-aaaaaaaaaaaa": "passed", "learned-bbbbbbbbbbbb": "failed"}
    assert data["counts"] == {"passed": 1, "failed": 0, "refused": 0, "error": 0}
    assert "FAILED learned-bbbbbbbbbbbb (shadow)" in result.stdout
    streaks = {p.id: (p.streak, p.runs) for p in ProposalStore(proposals).load()}
    assert streaks == {"learned-aaaaaaaaaaaa": (2, 2), "learned-bbbbbbbbbbbb": (0, 2)}
    # two passes in a row are not enough for the default gate of three
    refused = runner.invoke(
        app,
        [
            "lab",
            "accept",
            "learned-aaaaaaaaaaaa",
            "--into",
            str(cases),
            "--proposals",
            str(proposals),
        ],
    )
    assert refused.exit_code == 1
    assert "passed 2 times in a row; needs 3" in refused.output

"""``llamon lab check`` and ``llamon lab schema`` through the real ``llamon`` app."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from llamon_agent.cli import app
from llamon_agent.lab.schema import case_file_schema
from tests.lab.test_cases import FULL_CASE, SEED_SHAPE

runner = CliRunner()


def _write(path: Path, content: object) -> Path:
    path.write_text(json.dumps(content, ensure_ascii=False), encoding="utf-8")
    return path


def test_check_prints_a_table_of_valid_cases(tmp_path: Path) -> None:
    _write(tmp_path / "a.json", [FULL_CASE, SEED_SHAPE])
    result = runner.invoke(app, ["lab", "check", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    (full,) = [line for line in lines if "order-detail" in line]
    cells = [cell.strip() for cell in full.strip("│ ").split("│")]
    assert cells[:5] == ["order-detail", "execute", "getOrderDetail", "orders, auth", "8"]
    assert cells[5].startswith("tool_timeout, tool_raises, tool_error, tool_slow")
    assert cells[6] == "1 step(s)"
    (seed,) = [line for line in lines if "a.json#1" in line]
    assert [c.strip() for c in seed.strip("│ ").split("│")] == [
        "a.json#1",
        "execute",
        "getOrderDetail",
        "-",
        "3",
        "-",
        "-",
    ]
    assert lines[-1] == "OK 2 case(s) valid"


def test_check_prints_every_problem_and_exits_2(tmp_path: Path) -> None:
    bad = _write(
        tmp_path / "bad.json",
        [{**SEED_SHAPE, "name": "x", "assertions": {"error_code": "NOPE"}}, {"mode": "plan"}],
    )
    result = runner.invoke(app, ["lab", "check", str(bad)], env={"COLUMNS": "300"})
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"error: {bad}: case 'x': assertions.error_code: unknown errorCode 'NOPE'",
        f"error: {bad}: case #1: give the message as either 'query' or 'parts' (exactly one)",
        "FAIL 2 problem(s)",
    ]
    # the next check of a fixed file is answered normally
    _write(bad, SEED_SHAPE)
    assert runner.invoke(app, ["lab", "check", str(bad)]).exit_code == 0


def test_check_json_on_success_and_on_failure(tmp_path: Path) -> None:
    good = _write(tmp_path / "good.json", FULL_CASE)
    result = runner.invoke(app, ["lab", "check", "--json", str(good)])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["ok"] is True
    (row,) = document["cases"]
    assert {k: v for k, v in row.items() if k != "case"} == {
        "name": "order-detail",
        "file": str(good),
        "mode": "execute",
        "expectedTarget": "getOrderDetail",
        "tags": ["orders", "auth"],
        "assertions": 8,
        "faults": [fault["kind"] for fault in FULL_CASE["faults"]],
        "cleanupSteps": 1,
    }
    assert row["case"]["assertions"]["final_state"] == "failed"

    missing = tmp_path / "missing.yaml"
    result = runner.invoke(app, ["lab", "check", "--json", str(good), str(missing)])
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {
        "ok": False,
        "errors": [
            {"file": str(missing), "case": "", "field": "", "message": "no such file or directory"}
        ],
    }


def test_schema_prints_the_case_file_schema() -> None:
    result = runner.invoke(app, ["lab", "schema"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == case_file_schema()


def test_the_installed_command_checks_the_sample_cases() -> None:
    samples = Path(__file__).parents[2] / "docs" / "lab-cases"
    done = subprocess.run(  # noqa: S603 - our own interpreter and command
        [sys.executable, "-m", "llamon_agent", "lab", "check", "--json", str(samples)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    names = [row["name"] for row in json.loads(done.stdout)["cases"]]
    assert names[0] == "bookshop-find-by-author"
    assert len(names) == len(set(names)) == 12

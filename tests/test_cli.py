"""`llamon errors` prints the tables (the README's main job at this stage)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from llamon_agent.cli import app

runner = CliRunner()


def test_errors_prints_codes_mapping_and_catalog() -> None:
    result = runner.invoke(app, ["errors"], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    for text in [
        "UPSTREAM_UNAVAILABLE",
        "GraphRecursionError",
        "max_tool_iterations_exceeded",
        "httpx2.ConnectError",
        "-32001",
        "unsatisfied_field",
        "repeated_tool_call",
    ]:
        assert text in result.output


def test_errors_json_is_one_document() -> None:
    result = runner.invoke(app, ["errors", "--json"], env={"COLUMNS": "240"})
    assert result.exit_code == 0, result.output
    model = json.loads(result.output)
    assert model["errorCodes"][0]["code"] == "INVALID_INPUT"
    assert len(model["errorCodes"]) == 8
    rows = {row["exception"]: row for row in model["exceptionMapping"]}
    assert rows["builtins.TimeoutError"]["errorCode"] == "UPSTREAM_TIMEOUT"
    assert {"jsonRpcCode": -32001, "errorCode": "NOT_FOUND"} in model["jsonRpcCodes"]
    assert any(r["reason"] == "worker_lost" for r in model["reasons"])


def test_errors_code_rows_are_the_code_table() -> None:
    from llamon_agent.core.codes import ERROR_CODE_TABLE

    result = runner.invoke(app, ["errors", "--json"], env={"COLUMNS": "240"})
    assert json.loads(result.output)["errorCodes"] == [
        {
            "code": spec.code.value,
            "meaning": spec.meaning,
            "clientAction": spec.client_action,
            "defaultMessage": spec.message,
            "operatorAction": spec.operator_action,
        }
        for spec in ERROR_CODE_TABLE
    ]


def test_errors_import_shows_registered_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_rules.py").write_text(
        "from llamon_agent.core.classify import register_exception\n"
        "from llamon_agent.core.codes import ErrorCode\n"
        "register_exception('vendorx.QuotaError', ErrorCode.RATE_LIMITED, retriable=True)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        result = runner.invoke(app, ["errors", "--json", "--import", "my_rules"])
        assert result.exit_code == 0, result.output
        rows = {row["exception"]: row for row in json.loads(result.output)["exceptionMapping"]}
        assert rows["vendorx.QuotaError"]["errorCode"] == "RATE_LIMITED"
    finally:
        from llamon_agent.core.classify import unregister_exception

        unregister_exception("vendorx.QuotaError")


def test_errors_import_of_a_missing_module_is_a_clear_error() -> None:
    result = runner.invoke(app, ["errors", "--import", "no_such_module_xyz"])
    assert result.exit_code != 0
    assert "no_such_module_xyz" in result.output


def test_serve_refuses_a_key_for_a_card_without_auth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llamon_agent.demo import demo_agent_path

    path = demo_agent_path()
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path))
    result = runner.invoke(
        app,
        ["serve", f"{path}:agent", "--card", f"{path}:card", "--port", "0"],
        env={"LLAMON_API_KEY": "k-123", "COLUMNS": "300"},
    )
    assert result.exit_code == 2
    assert "declares no security scheme" in result.output
    assert "k-123" not in result.output


def test_serve_rejects_an_unknown_target() -> None:
    result = runner.invoke(app, ["serve", "no_such_module_xyz:agent"], env={"COLUMNS": "300"})
    assert result.exit_code == 2
    assert "no_such_module_xyz" in result.output


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        (["--max-finished", "5"], "bound the memory store; the store is sqlite"),
        (
            ["--store", "memory", "--max-finished", "-1"],
            "max_finished must be an int >= 0, got -1",
        ),
    ],
)
def test_serve_memory_limits_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: list[str], expected: str
) -> None:
    from llamon_agent.demo import demo_agent_path

    monkeypatch.setenv("LLAMON_HOME", str(tmp_path))
    path = demo_agent_path()
    result = runner.invoke(app, ["serve", f"{path}:agent", *options], env={"COLUMNS": "300"})
    assert result.exit_code == 2
    assert expected in result.output


def test_serve_refuses_an_events_file_it_cannot_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llamon_agent.demo import demo_agent_path

    path = demo_agent_path()
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path))
    missing = tmp_path / "no-such-dir" / "events.jsonl"
    result = runner.invoke(
        app,
        ["serve", f"{path}:agent", "--card", f"{path}:card", "--events-jsonl", str(missing)],
        env={"COLUMNS": "300"},
    )
    assert result.exit_code == 2
    assert "--events-jsonl: cannot open" in result.output
    assert "No such file or directory" in result.output

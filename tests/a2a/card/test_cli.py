"""`llamon card lint`: table or JSON output and exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from llamon_agent.a2a.card import AuthSpec, build_agent_card, skill
from llamon_agent.a2a.card.cli import EXIT_ERRORS, EXIT_LOAD_FAILED, EXIT_OK, card_app

runner = CliRunner()
WIDE = {"COLUMNS": "240"}


def _card(**changes: Any) -> dict[str, Any]:
    card = build_agent_card(
        name="Flight search agent",
        description=(
            "Searches scheduled passenger flights between two airports on a given date "
            "and returns fares, departure times and carriers."
        ),
        url="https://flights.example.com/a2a",
        version="1.2.0",
        skills=[
            skill(
                "search_flights",
                "Search flights",
                "Finds flights from an origin to a destination airport on one date.",
                tags=["flights"],
                examples=["ICN to NRT on 2025-05-01"],
            )
        ],
        auth=AuthSpec.bearer(),
    ).model_dump(mode="json", exclude_none=True)
    card.update(changes)
    return card


def _write(tmp_path: Path, card: object) -> str:
    path = tmp_path / "agent-card.json"
    path.write_text(json.dumps(card, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_clean_card_exits_0(tmp_path: Path) -> None:
    result = runner.invoke(card_app, ["lint", _write(tmp_path, _card())], env=WIDE)
    assert result.exit_code == EXIT_OK == 0, result.output
    assert "OK" in result.output
    assert "0 error(s), 0 warning(s)" in result.output


def test_warnings_only_exit_0_and_show_the_table(tmp_path: Path) -> None:
    source = _write(tmp_path, _card(description="Searches flights."))
    result = runner.invoke(card_app, ["lint", source], env=WIDE)
    assert result.exit_code == EXIT_OK, result.output
    assert "description_too_short" in result.output
    assert "warning" in result.output
    assert "0 error(s), 1 warning(s)" in result.output


def test_errors_exit_1(tmp_path: Path) -> None:
    source = _write(tmp_path, _card(version="1.0", defaultInputModes=[]))
    result = runner.invoke(card_app, ["lint", source], env=WIDE)
    assert result.exit_code == EXIT_ERRORS == 1, result.output
    for text in ("version_not_semver", "modes_missing", "FAIL", "2 error(s)"):
        assert text in result.output


def test_invalid_card_exits_1(tmp_path: Path) -> None:
    result = runner.invoke(card_app, ["lint", _write(tmp_path, {"name": "x"})], env=WIDE)
    assert result.exit_code == EXIT_ERRORS, result.output
    assert "invalid_card" in result.output


def test_unloadable_card_exits_2(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.json")
    result = runner.invoke(card_app, ["lint", missing], env=WIDE)
    assert result.exit_code == EXIT_LOAD_FAILED == 2, result.output
    assert "cannot load agent card" in result.stderr
    assert result.stdout == ""

    bad = tmp_path / "bad.json"
    bad.write_text("{oops", encoding="utf-8")
    result = runner.invoke(card_app, ["lint", str(bad)], env=WIDE)
    assert result.exit_code == EXIT_LOAD_FAILED, result.output
    assert "invalid JSON" in result.stderr


def test_json_output_is_one_document(tmp_path: Path) -> None:
    source = _write(tmp_path, _card(version="1.0", description="Searches flights."))
    result = runner.invoke(card_app, ["lint", source, "--json"], env=WIDE)
    assert result.exit_code == EXIT_ERRORS, result.output
    report = json.loads(result.stdout)
    assert report["source"] == source
    assert report["ok"] is False
    assert (report["errors"], report["warnings"]) == (1, 1)
    assert report["findings"] == [
        {
            "rule": "description_too_short",
            "severity": "warning",
            "path": "description",
            "message": report["findings"][0]["message"],
        },
        {
            "rule": "version_not_semver",
            "severity": "error",
            "path": "version",
            "message": report["findings"][1]["message"],
        },
    ]


def test_json_output_of_clean_card(tmp_path: Path) -> None:
    result = runner.invoke(card_app, ["lint", _write(tmp_path, _card()), "--json"])
    assert result.exit_code == EXIT_OK, result.output
    assert json.loads(result.stdout)["ok"] is True


def test_json_output_of_unloadable_card(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.json")
    result = runner.invoke(card_app, ["lint", missing, "--json"])
    assert result.exit_code == EXIT_LOAD_FAILED, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert missing in report["loadError"]


def test_markup_like_text_is_printed_verbatim(tmp_path: Path) -> None:
    source = _write(tmp_path, _card(defaultOutputModes=["[bold]x[/bold]"]))
    result = runner.invoke(card_app, ["lint", source], env=WIDE)
    assert result.exit_code == EXIT_ERRORS, result.output
    assert "'[bold]x[/bold]' is not a MIME type" in result.output

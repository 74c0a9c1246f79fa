"""The triage guide: shipped rows cover the catalog, files are validated, users extend it."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamon_agent.core.catalog import reason_catalog
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.settings import TRIAGE_GUIDE_ENV
from llamon_agent.core.triage import (
    TriageGuideError,
    TriageRow,
    load_guide,
    package_guide,
    parse_guide,
    triage_guide,
)

ROW = """
[[row]]
reason = "timeout"
symptom = "Our search is slow."
look_first = "The search dashboard."
fix = "Page the search team."
"""


@pytest.fixture(autouse=True)
def _no_user_guide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TRIAGE_GUIDE_ENV, raising=False)


def test_every_catalog_reason_has_a_row_and_every_row_a_catalog_reason() -> None:
    guide = package_guide()
    catalog = [spec.reason for spec in reason_catalog()]
    assert sorted(set(catalog) - set(guide.reasons())) == []
    assert sorted(set(guide.reasons()) - set(catalog)) == []


def test_every_error_code_has_a_fallback_row() -> None:
    assert sorted(package_guide().code_rows) == sorted(code.value for code in ErrorCode)


def test_a_reason_without_a_row_falls_back_to_its_error_codes_row() -> None:
    guide = package_guide()
    own = guide.row_for("timeout", "INTERNAL_ERROR")
    assert own == (guide.row("timeout"), True)
    fallback = guide.row_for("runtime_error", "INTERNAL_ERROR")
    assert fallback == (guide.code_rows["INTERNAL_ERROR"], False)
    assert fallback[0].reason == "INTERNAL_ERROR"
    assert "incident id" in fallback[0].look_first
    assert guide.row_for("runtime_error", "NOT_A_CODE") is None


def test_every_shipped_row_has_four_non_empty_one_line_texts() -> None:
    guide = package_guide()
    for row in [*guide.rows.values(), *guide.code_rows.values()]:
        for text in (row.symptom, row.look_first, row.fix):
            assert text, row.reason
            assert text.strip() == text, row.reason
            assert "\n" not in text, row.reason


def test_the_shipped_rows_keep_the_guides_words_for_auth_and_selection() -> None:
    guide = package_guide()
    assert guide.row("auth_failed") == TriageRow(
        "auth_failed",
        "The downstream API answered 401 or 403.",
        "The downstream request's header names and the auth profile's freshness"
        " (http_status in the evidence).",
        "Refresh the credential, or check the downstream policy for this caller.",
    )
    selection = guide.row("llm_target_mismatch")
    assert selection is not None
    assert "target_selector.rank_signals" in selection.look_first
    assert guide.row("no_such_reason") is None


def test_to_dict_uses_json_keys() -> None:
    row = parse_guide(ROW, "mine.toml").row("timeout")
    assert row is not None
    assert row.to_dict() == {
        "reason": "timeout",
        "symptom": "Our search is slow.",
        "lookFirst": "The search dashboard.",
        "fix": "Page the search team.",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[[row]]\nreason = 'x'\nsymptom = 's'\nlook_first = 'l'\nfix = 'f'\nfixx = 'f'\n",
            "mine.toml: row 1 (reason 'x'): unknown key(s) fixx; a row has reason, symptom,"
            " look_first, fix",
        ),
        (
            "[[row]]\nreason = 'x'\nsymptom = 's'\n",
            "mine.toml: row 1 (reason 'x'): missing key(s) look_first, fix",
        ),
        (
            "[[row]]\nreason = 'x'\nsymptom = ' '\nlook_first = 'l'\nfix = 'f'\n",
            "mine.toml: row 1 (reason 'x'): symptom must be a non-empty string",
        ),
        (
            "[[row]]\nreason = 'x'\nsymptom = 's'\nlook_first = 3\nfix = 'f'\n",
            "mine.toml: row 1 (reason 'x'): look_first must be a non-empty string",
        ),
        (
            "[[row]]\nsymptom = 's'\nlook_first = 'l'\nfix = 'f'\n",
            "mine.toml: row 1: missing key(s) reason",
        ),
        (ROW + ROW, "mine.toml: row 2: reason 'timeout' given twice"),
        (
            "[rows]\nreason = 'x'\n",
            "mine.toml: unknown top-level key(s) rows; use [[row]] and [[error_code]] tables",
        ),
        (
            "[[error_code]]\nerror_code = 'SLOW'\nsymptom = 's'\nlook_first = 'l'\nfix = 'f'\n",
            "mine.toml: error_code 1 (error_code 'SLOW'): unknown errorCode; use one of"
            " INVALID_INPUT, AUTH_REQUIRED, NOT_FOUND, UPSTREAM_UNAVAILABLE, UPSTREAM_TIMEOUT,"
            " RATE_LIMITED, GUARDRAIL_BLOCKED, INTERNAL_ERROR",
        ),
        (
            "[[error_code]]\nreason = 'x'\nsymptom = 's'\nlook_first = 'l'\nfix = 'f'\n",
            "mine.toml: error_code 1: unknown key(s) reason; an error_code has error_code,"
            " symptom, look_first, fix",
        ),
        ("row = 'x'\n", "mine.toml: row must be an array of tables ([[row]])"),
        ("row = ['x']\n", "mine.toml: row 1: expected a table ([[row]]), got str"),
    ],
)
def test_a_wrong_row_is_an_error_naming_the_file_and_the_row(text: str, message: str) -> None:
    with pytest.raises(TriageGuideError) as raised:
        parse_guide(text, "mine.toml")
    assert str(raised.value) == message


def test_a_file_that_is_not_toml_or_not_there_is_named(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("[[row]\n", encoding="utf-8")
    with pytest.raises(TriageGuideError, match=r"broken\.toml: not valid TOML \("):
        load_guide(broken)
    missing = tmp_path / "missing.toml"
    with pytest.raises(TriageGuideError) as raised:
        load_guide(missing)
    assert str(raised.value) == (
        f"{missing}: cannot read the triage guide (No such file or directory)"
    )


def test_a_users_rows_replace_by_reason_and_add_new_reasons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text(
        ROW + ROW.replace('"timeout"', '"payroll_locked"').replace("search", "payroll"),
        encoding="utf-8",
    )
    shipped = package_guide()
    assert triage_guide() == shipped
    monkeypatch.setenv(TRIAGE_GUIDE_ENV, str(mine))
    guide = triage_guide()
    assert guide.row("timeout") == TriageRow(
        "timeout", "Our search is slow.", "The search dashboard.", "Page the search team."
    )
    assert guide.row("payroll_locked") == TriageRow(
        "payroll_locked", "Our payroll is slow.", "The payroll dashboard.", "Page the payroll team."
    )
    assert guide.row("http_5xx") == shipped.row("http_5xx")
    assert guide.reasons()[-1] == "payroll_locked"
    assert len(guide.rows) == len(shipped.rows) + 1
    assert guide.code_rows == shipped.code_rows

    later = tmp_path / "later.toml"
    later.write_text(ROW.replace("Page the search team.", "Call Ada."), encoding="utf-8")
    row = triage_guide([later]).row("timeout")
    assert row is not None
    assert (row.symptom, row.fix) == ("Our search is slow.", "Call Ada.")


def test_a_broken_user_guide_is_an_error_not_a_silent_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text("[[row]]\nreason = 'timeout'\n", encoding="utf-8")
    monkeypatch.setenv(TRIAGE_GUIDE_ENV, str(mine))
    with pytest.raises(TriageGuideError, match=r"mine\.toml: row 1 \(reason 'timeout'\)"):
        triage_guide()


def test_a_users_error_code_row_replaces_the_fallback(tmp_path: Path) -> None:
    mine = tmp_path / "mine.toml"
    mine.write_text(
        "[[error_code]]\nerror_code = 'INTERNAL_ERROR'\nsymptom = 'A bug.'\n"
        "look_first = 'Sentry.'\nfix = 'Fix it.'\n",
        encoding="utf-8",
    )
    guide = triage_guide([mine])
    assert guide.row_for("runtime_error", "INTERNAL_ERROR") == (
        TriageRow("INTERNAL_ERROR", "A bug.", "Sentry.", "Fix it."),
        False,
    )
    assert guide.rows == package_guide().rows

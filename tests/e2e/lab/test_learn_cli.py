"""``llamon lab learn / proposals / accept / reject`` as their own processes, on what a
real ``llamon serve`` process kept in SQLite: a task fails, the same input later
completes; an input carrying a card number is refused and never printed nor stored.

``agent`` below is the served agent (``tests.e2e.lab.test_learn_cli:agent``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from llamon_agent.lab import load_cases
from llamon_agent.lab.proposals import ProposalStore
from llamon_agent.lab.results import CaseResult, LabReport
from llamon_agent.loop import LoopAgent, ScriptedModel, ToolRegistry, tool, tool_call
from tests._support.serve import llamon_cli, llamon_serve, send_text

CARD = "4111 1111 1111 1111"
SECRET_TEXT = f"order Dune, pay with {CARD}"


@tool
async def search_books(title: str) -> str:
    """Find books by title."""
    return f"{title}: shelf 3"


def _script() -> list[Any]:
    fail = [tool_call("search_books", {"title": "Dune"}), TimeoutError("model too slow")]
    done = [tool_call("search_books", {"title": "Dune"}), "Dune is on shelf 3"]
    return [*fail, *done, *fail, *done]


agent = LoopAgent(ScriptedModel(_script()), ToolRegistry([search_books]))
"""Two pairs of runs: each pair fails (``timeout``), then completes (2 rounds)."""

TARGET = "tests.e2e.lab.test_learn_cli:agent"


async def _served(home: Path) -> dict[str, dict[str, Any]]:
    async with (
        llamon_serve(home, target=TARGET) as (_, url),
        httpx.AsyncClient(timeout=20) as http,
    ):
        tasks = {
            "failed": await send_text(http, url, "find Dune"),
            "done": await send_text(http, url, "find  Dune"),
            "secret_failed": await send_text(http, url, SECRET_TEXT),
            "secret_done": await send_text(http, url, SECRET_TEXT),
        }
    states = {name: task["status"]["state"] for name, task in tasks.items()}
    assert states == {
        "failed": "failed",
        "done": "completed",  # the next request after a failure is answered
        "secret_failed": "failed",
        "secret_done": "completed",
    }
    return tasks


@pytest.mark.reason("scrub_failed", "insufficient_repeated_success", "promotion_rejected")
async def test_learn_then_accept_and_reject_through_the_cli(tmp_path: Path) -> None:
    tasks = await _served(tmp_path)
    home = str(tmp_path)

    status, out, err = await llamon_cli("lab", "learn", "--home", home, "--json")
    assert (status, err) == (0, "")
    document = json.loads(out)
    assert document["file"] == str(tmp_path / "lab" / "proposals.json")
    assert document["candidates"] == 2
    [proposal] = document["proposals"]
    learned_id = proposal["id"]
    assert proposal["status"] == "shadow"
    assert proposal["case"]["query"] == "find  Dune"
    assert proposal["case"]["expected_target"] == "search_books"
    assert proposal["case"]["assertions"]["allowed_failure_reasons"] == ["timeout"]
    assert proposal["case"]["assertions"]["max_rounds"] == 3
    assert proposal["source"]["failed"] == tasks["failed"]["id"]
    [refused] = document["refused"]
    assert refused["reason"] == "scrub_failed"
    assert refused["source"] == {
        "kind": "store",
        "failed": tasks["secret_failed"]["id"],
        "succeeded": tasks["secret_done"]["id"],
        "failure_reason": "timeout",
    }
    assert document["known"] == []
    kept = (tmp_path / "lab" / "proposals.json").read_text(encoding="utf-8")
    for text in (out, kept):
        assert CARD not in text
        assert CARD.replace(" ", "") not in text

    # learning again proposes nothing new
    status, out, err = await llamon_cli("lab", "learn", "--home", home)
    assert (status, err) == (0, "")
    assert out.splitlines()[0] == (
        f"2 candidate(s): 0 new proposal(s), 0 refused, 2 already known"
        f" ({tmp_path / 'lab' / 'proposals.json'})"
    )
    assert f"known    {learned_id}  shadow" in out
    assert CARD not in out

    into = tmp_path / "cases" / "learned.yaml"
    status, out, err = await llamon_cli(
        "lab", "accept", learned_id, "--into", str(into), "--home", home
    )
    assert (status, out) == (1, "")
    assert err == (
        f"llamon lab accept: refused (insufficient_repeated_success): proposal"
        f" {learned_id!r} passed 0 times in a row; needs 3.\n"
    )
    assert not into.exists()

    # the lab runner counts three shadow passes
    store = ProposalStore(tmp_path / "lab" / "proposals.json")
    for _ in range(3):
        store.record(learned_id, True)
    status, out, err = await llamon_cli(
        "lab", "accept", learned_id, "--into", str(into), "--home", home
    )
    assert (status, err) == (0, "")
    assert out == f"accepted {learned_id} into {into} (passed 3 time(s) in a row)\n"
    assert [case.name for case in load_cases(into)] == [learned_id]
    status, out, err = await llamon_cli("lab", "check", str(into))
    assert status == 0, err

    status, out, err = await llamon_cli("lab", "proposals", "--home", home, "--json")
    assert status == 0, err
    rows = {row["id"]: row for row in json.loads(out)["proposals"]}
    assert rows[learned_id]["status"] == "accepted"
    assert rows[learned_id]["accepted_into"] == str(into)
    assert rows[refused["id"]]["status"] == "refused"
    status, out, err = await llamon_cli("lab", "proposals", "--home", home)
    assert status == 0, err
    assert learned_id in out
    assert "scrub_failed" in out

    # a report's candidate, rejected for good
    cases = tmp_path / "suite.yaml"
    cases.write_text("- name: find-emma\n  mode: plan\n  query: find Emma\n", encoding="utf-8")
    report = LabReport(
        [
            CaseResult("find-emma", str(cases), outcome="failed", failure_reason="timeout"),
            CaseResult("find-emma", str(cases), outcome="passed", selected_target="search_books"),
        ],
        started_at=1_800_000_000.0,
    )
    report_file = tmp_path / "report.json"
    report_file.write_text(json.dumps(report.to_dict()), encoding="utf-8")
    status, out, err = await llamon_cli(
        "lab", "learn", "--from-report", str(report_file), "--home", home, "--json"
    )
    assert status == 0, err
    [from_report] = json.loads(out)["proposals"]
    assert from_report["case"]["query"] == "find Emma"
    status, out, err = await llamon_cli(
        "lab", "reject", from_report["id"], "--reason", "Emma is out of print", "--home", home
    )
    assert (status, err) == (0, "")
    assert out == f"rejected {from_report['id']} (promotion_rejected): Emma is out of print\n"
    status, out, err = await llamon_cli(
        "lab", "accept", from_report["id"], "--into", str(into), "--home", home
    )
    assert (status, out) == (1, "")
    assert err.startswith(
        f"llamon lab accept: refused (promotion_rejected): proposal {from_report['id']!r}"
        " it was rejected (Emma is out of print)"
    )
    status, out, err = await llamon_cli(
        "lab", "learn", "--from-report", str(report_file), "--home", home, "--json"
    )
    assert status == 0, err
    again = json.loads(out)
    assert again["proposals"] == again["refused"] == []
    assert sorted((row["id"], row["status"]) for row in again["known"]) == sorted(
        [(learned_id, "accepted"), (refused["id"], "refused"), (from_report["id"], "rejected")]
    )


async def test_usage_problems_exit_2_and_name_what_was_wrong(tmp_path: Path) -> None:
    proposals = str(tmp_path / "p.json")
    into = str(tmp_path / "c.yaml")
    status, out, err = await llamon_cli(
        "lab", "accept", "learned-nope", "--into", into, "--proposals", proposals
    )
    assert (status, out) == (2, "")
    assert err == f"llamon lab accept: no proposal 'learned-nope' in {proposals}\n"

    missing = tmp_path / "nope.json"
    status, out, err = await llamon_cli("lab", "learn", "--from-report", str(missing))
    assert (status, out) == (2, "")
    assert err == f"llamon lab learn: --from-report {missing}: no such file.\n"

    not_a_report = tmp_path / "list.json"
    not_a_report.write_text("[]", encoding="utf-8")
    status, _, err = await llamon_cli("lab", "learn", "--from-report", str(not_a_report))
    assert status == 2
    assert err == (
        f"llamon lab learn: --from-report {not_a_report}: not a lab report (no 'results' list).\n"
    )

    status, out, err = await llamon_cli("lab", "learn", "--home", str(tmp_path / "empty"))
    assert (status, out) == (1, "")
    assert err.startswith(f"llamon lab learn: no task store at {tmp_path / 'empty' / 'tasks.db'}")

    status, out, err = await llamon_cli("lab", "proposals", "--proposals", proposals)
    assert (status, out, err) == (0, f"no proposals in {proposals}.\n", "")

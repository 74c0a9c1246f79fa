"""Learning regression cases: a real served loop agent fails, then the same input
completes; ``find_candidates`` reads the SQLite store it wrote and ``propose`` compacts
the candidate through the security boundary. Lab reports are the other source."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from a2a.types import Message, Task, TaskState

from llamon_agent.a2a.server import create_app
from llamon_agent.a2a.stores import open_stores
from llamon_agent.core.events import EventBus
from llamon_agent.core.scrub import scrub_public_text
from llamon_agent.lab import load_cases
from llamon_agent.lab.learn import (
    Candidate,
    LearnInput,
    find_candidates,
    find_report_candidates,
    input_key,
    learned_case,
    propose,
)
from llamon_agent.lab.proposals import ProposalStore
from llamon_agent.lab.results import CaseResult, LabReport, StepRecord
from llamon_agent.loop import LoopAgent, ScriptedModel, ToolRegistry, tool, tool_call
from tests._support.a2a_server import a2a_client, make_card, running_server, send, user_message
from tests._support.serve import llamon_cli
from tests._support.stores import postgres_schema

API_KEY = "sk-proj-Abc123Def456Ghi789Jkl012Mno345Pqr678"
EMAIL = "ada.lovelace@example.org"
CARD = "4111 1111 1111 1111"
SECRET_INPUTS = {
    "api_key": f"look up Dune with my key {API_KEY}",
    "email": f"find Dune and write to {EMAIL}",
    "card": f"order Dune, pay with {CARD}",
}


@tool
async def search_books(title: str) -> str:
    """Find books by title."""
    return f"{title}: shelf 3"


def flaky_script(pairs: int) -> ScriptedModel:
    """Per pair of runs: the first selects ``search_books``, then the model times out
    (``timeout``); the second selects it and answers (2 rounds)."""
    steps: list[Any] = []
    for _ in range(pairs):
        steps += [tool_call("search_books", {"title": "Dune"}), TimeoutError("model too slow")]
        steps += [tool_call("search_books", {"title": "Dune"}), "Dune is on shelf 3"]
    return ScriptedModel(steps)


async def serve_and_send(home: Path, messages: list[Message], dsn: str | None = None) -> list[Task]:
    """Serve a loop agent over SQLite under ``home`` (or PostgreSQL at ``dsn``; tasks,
    failures and events kept), send ``messages`` in order, stop; the tasks as the caller
    saw them."""
    stores = await open_stores("postgres", dsn=dsn) if dsn else await open_stores(home=home)
    agent = LoopAgent(flaky_script(len(messages) // 2), ToolRegistry([search_books]))
    app = create_app(
        agent,
        make_card(),
        task_store=stores.task_store,
        failure_store=stores.failures,
        events=EventBus(),
        event_store=stores.events,
    )
    try:
        async with running_server(app) as url, a2a_client(url) as client:
            tasks = [await send(client, message) for message in messages]
    finally:
        await stores.close()
    return tasks


async def candidates_of(home: Path, dsn: str | None = None) -> list[Candidate]:
    stores = await open_stores("postgres", dsn=dsn) if dsn else await open_stores(home=home)
    try:
        return await find_candidates(stores)
    finally:
        await stores.close()


async def test_a_failure_that_later_completed_becomes_a_plan_case(tmp_path: Path) -> None:
    failed, completed = await serve_and_send(
        tmp_path, [user_message("find   Dune\n"), user_message("find Dune")]
    )
    # the failure, then the next request is still answered
    assert (failed.status.state, completed.status.state) == (TaskState.failed, TaskState.completed)

    [candidate] = await candidates_of(tmp_path)
    assert (candidate.source, candidate.failed, candidate.succeeded) == (
        "store",
        failed.id,
        completed.id,
    )
    assert (candidate.failure_reason, candidate.target, candidate.rounds) == (
        "timeout",
        "search_books",
        2,
    )
    assert candidate.input.texts == ("find Dune",)  # the completed task's own text
    assert "find Dune" not in repr(candidate)  # the input never shows in a repr

    proposal = propose(candidate)
    assert proposal.status == "shadow"
    assert re.fullmatch(r"learned-[0-9a-f]{12}", proposal.id)
    assert proposal.case == {
        "name": proposal.id,
        "mode": "plan",
        "query": "find Dune",
        "expected_target": "search_books",
        "assertions": {
            "selected_target": "search_books",
            "allowed_failure_reasons": ["timeout"],
            "uncaught_server_error": False,
            "final_state": "completed",
            "max_rounds": 3,
        },
        "faults": [],
        "cleanup": [],
        "tags": ["learned"],
    }
    assert proposal.source == {
        "kind": "store",
        "failed": failed.id,
        "succeeded": completed.id,
        "failure_reason": "timeout",
    }
    # a tool named read-only makes it an execute case; the name stays the input's
    executed = propose(candidate, read_only_tools=["search_books"])
    assert (executed.id, executed.to_case().mode) == (proposal.id, "execute")
    # the same input, whitespace aside, always gets the same name
    spaced = Candidate("report", "a", "b", LearnInput(("find  Dune ",)))
    assert learned_case(spaced).name == proposal.id


async def test_learn_reads_a_shared_postgresql_store(tmp_path: Path) -> None:
    async with postgres_schema() as dsn:
        failed, completed = await serve_and_send(
            tmp_path, [user_message("find Dune"), user_message("find Dune")], dsn
        )
        [candidate] = await candidates_of(tmp_path, dsn)
        proposals = tmp_path / "proposals.json"
        status, out, err = await llamon_cli(
            "lab", "learn", "--database-url", dsn, "--proposals", str(proposals), "--json"
        )
    assert (failed.status.state, completed.status.state) == (TaskState.failed, TaskState.completed)
    assert (candidate.failed, candidate.succeeded) == (failed.id, completed.id)
    assert (candidate.failure_reason, candidate.target, candidate.rounds) == (
        "timeout",
        "search_books",
        2,
    )
    assert (status, err) == (0, "")
    [proposal] = json.loads(out)["proposals"]
    assert proposal["case"] == propose(candidate).case
    assert dsn.split("@")[0] not in out  # the DSN's credentials are never printed


async def test_learning_twice_proposes_once(tmp_path: Path) -> None:
    tasks = await serve_and_send(tmp_path, [user_message("find Dune"), user_message("find Dune")])
    assert [task.status.state for task in tasks] == [TaskState.failed, TaskState.completed]
    store = ProposalStore(tmp_path / "proposals.json")
    first = [propose(c) for c in await candidates_of(tmp_path)]
    new, known = store.add(first)
    assert (len(new), known) == (1, [])
    again, known = store.add([propose(c) for c in await candidates_of(tmp_path)])
    assert again == []
    assert [p.id for p in known] == [new[0].id]
    assert [case.name for case in store.shadow_cases()] == [new[0].id]


async def test_only_a_failure_followed_by_a_completion_is_a_candidate(tmp_path: Path) -> None:
    model = ScriptedModel(["fine", TimeoutError("too slow"), TimeoutError("too slow")])
    stores = await open_stores(home=tmp_path)
    app = create_app(
        LoopAgent(model, ToolRegistry([search_books])),
        make_card(),
        task_store=stores.task_store,
        failure_store=stores.failures,
    )
    try:
        async with running_server(app) as url, a2a_client(url) as client:
            done = await send(client, user_message("find Dune"))  # completed first ...
            failed = await send(client, user_message("find Dune"))  # ... then failed
            other = await send(client, user_message("find Emma"))  # failed, never completed
    finally:
        await stores.close()
    states = [task.status.state for task in (done, failed, other)]
    assert states == [TaskState.completed, TaskState.failed, TaskState.failed]
    assert await candidates_of(tmp_path) == []


async def test_data_parts_are_part_of_the_input_and_of_the_case(tmp_path: Path) -> None:
    order = {"title": "Dune", "copies": 2}
    failed, completed = await serve_and_send(
        tmp_path,
        [user_message("order", data=order), user_message(" order ", data=dict(order))],
    )
    assert completed.status.state == TaskState.completed
    [candidate] = await candidates_of(tmp_path)
    case = propose(candidate).to_case()
    assert case.query is None
    assert [part.model_dump() for part in case.parts or []] == [
        {"kind": "text", "text": " order "},
        {"kind": "data", "data": order},
    ]
    assert candidate.failed == failed.id


@pytest.mark.reason("scrub_failed")
@pytest.mark.parametrize("kind", sorted(SECRET_INPUTS))
async def test_an_input_the_boundary_would_change_is_refused_and_never_stored(
    kind: str, tmp_path: Path
) -> None:
    text = SECRET_INPUTS[kind]
    assert scrub_public_text(text) != text  # the boundary removes something from it
    failed, completed = await serve_and_send(tmp_path, [user_message(text), user_message(text)])
    assert completed.status.state == TaskState.completed

    [candidate] = await candidates_of(tmp_path)
    proposal = propose(candidate)
    assert (proposal.status, proposal.reason, proposal.case) == ("refused", "scrub_failed", None)
    assert re.fullmatch(r"refused-[0-9a-f]{12}", proposal.id)
    assert proposal.source == {
        "kind": "store",
        "failed": failed.id,
        "succeeded": completed.id,
        "failure_reason": "timeout",
    }
    store = ProposalStore(tmp_path / "lab" / "proposals.json")
    new, _ = store.add([proposal])
    assert [p.status for p in new] == ["refused"]
    kept = store.path.read_text(encoding="utf-8")
    for secret in (API_KEY, EMAIL, CARD, CARD.replace(" ", ""), text):
        assert secret not in kept
    assert store.shadow_cases() == []
    # the same two runs learned again are known, not refused twice
    again, known = store.add([propose(c) for c in await candidates_of(tmp_path)])
    assert (again, [p.id for p in known]) == ([], [proposal.id])


@pytest.mark.reason("scrub_failed")
def test_a_data_part_with_a_credential_or_a_file_is_refused() -> None:
    password = LearnInput(("log in",), ({"user": "ada", "password": "hunter2"},))
    nested = LearnInput(("order",), ({"payment": {"card": CARD.replace(" ", "")}},))
    a_file = LearnInput(("read this",), files=1)
    for value in (password, nested, a_file):
        proposal = propose(Candidate("report", "x #0", "x #1", value, "timeout", "t", 1))
        assert (proposal.status, proposal.reason, proposal.case) == (
            "refused",
            "scrub_failed",
            None,
        )


def _result(case: str, source: str, outcome: str, **fields: Any) -> CaseResult:
    return CaseResult(case=case, source=source, outcome=outcome, **fields)  # type: ignore[arg-type]


def _report(started_at: float, *results: CaseResult) -> dict[str, Any]:
    return LabReport(results=list(results), target="app:agent", started_at=started_at).to_dict()


def test_a_lab_report_case_that_failed_then_passed_is_a_candidate(tmp_path: Path) -> None:
    cases = tmp_path / "cases.yaml"
    cases.write_text(
        "- name: find-dune\n  mode: execute\n  query: find Dune\n"
        "- name: mail-me\n  mode: plan\n  query: mail ada.lovelace@example.org\n"
        "- name: steady\n  mode: plan\n  query: hello\n",
        encoding="utf-8",
    )
    failed_run = _report(
        100.0,
        _result("find-dune", "cases.yaml", "failed", failure_reason="upstream_tool_unavailable"),
        _result("mail-me", "cases.yaml", "failed", failure_reason="runtime_error"),
        _result("steady", "cases.yaml", "passed"),
    )
    fixed_run = _report(
        200.0,
        _result(
            "find-dune",
            "cases.yaml",
            "passed",
            selected_target=None,
            steps=[StepRecord(1, "search_books", True), StepRecord(2, "get_book", True)],
            rounds=3,
        ),
        _result("mail-me", "cases.yaml", "passed", selected_target="send_mail", rounds=1),
        _result("steady", "cases.yaml", "failed", failure_reason="timeout"),
    )
    report_file = tmp_path / "fixed.json"
    report_file.write_text(json.dumps(fixed_run), encoding="utf-8")
    # given newest first: the reports are read in the order of their start
    found = find_report_candidates(
        [json.loads(report_file.read_text()), failed_run], base_dirs=[tmp_path, tmp_path]
    )
    assert [(c.failed, c.succeeded) for c in found] == [
        ("find-dune#0@1970-01-01T00:01:40+00:00", "find-dune#0@1970-01-01T00:03:20+00:00"),
        ("mail-me#1@1970-01-01T00:01:40+00:00", "mail-me#1@1970-01-01T00:03:20+00:00"),
    ]
    dune, mail = found
    assert (dune.failure_reason, dune.target, dune.rounds) == (
        "upstream_tool_unavailable",
        "search_books",
        3,
    )
    case = propose(dune).to_case()
    assert (case.query, case.expected_target, case.mode) == ("find Dune", "search_books", "plan")
    assert case.assertions.allowed_failure_reasons == ["upstream_tool_unavailable"]
    assert case.assertions.max_rounds == 4
    assert load_cases(cases)[0].query == case.query

    refused = propose(mail)
    assert (refused.status, refused.reason) == ("refused", "scrub_failed")
    assert "example.org" not in json.dumps(refused.to_dict())


def test_a_reason_the_catalog_does_not_know_is_not_asserted() -> None:
    candidate = Candidate(
        "report", "c #0", "c #1", LearnInput(("find Dune",)), "runtime_error", None, None
    )
    case = propose(candidate).to_case()
    assert case.assertions.allowed_failure_reasons is None
    assert (case.expected_target, case.assertions.selected_target) == (None, None)
    assert case.assertions.max_rounds is None
    assert input_key(candidate.input) == input_key(LearnInput(("find\tDune",)))


def test_learn_read_only_tools_make_execute_cases(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from llamon_agent.cli import app

    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([{"name": "find", "mode": "plan", "query": "find Dune"}]), "utf-8")
    report = _report(
        1.0,
        _result("find", str(cases), "failed", failure_reason="timeout"),
        _result("find", str(cases), "passed", selected_target="search_books", rounds=1),
    )
    (tmp_path / "r.json").write_text(json.dumps(report), encoding="utf-8")
    proposals = str(tmp_path / "p.json")
    args = ["lab", "learn", "--from-report", str(tmp_path / "r.json"), "--proposals", proposals]
    result = CliRunner().invoke(app, [*args, "--read-only", "search_books", "--json"])
    assert result.exit_code == 0, result.output
    [proposal] = json.loads(result.stdout)["proposals"]
    assert (proposal["case"]["mode"], proposal["case"]["assertions"]["max_rounds"]) == (
        "execute",
        2,
    )

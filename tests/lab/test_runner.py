"""The lab runner in process: every assertion holding and failing, with its message, on
real agents (the demo agent, the bookshop tool-loop agent over its MCP server)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llamon_agent.a2a.agent import AgentContext, AgentOutput
from llamon_agent.examples import demo_agent
from llamon_agent.examples.bookshop_agent import agent as bookshop_agent
from llamon_agent.examples.bookshop_agent import card as bookshop_card
from llamon_agent.lab import Case
from llamon_agent.lab.results import CaseResult
from llamon_agent.lab.runner import Lab, run_cases


def case(**fields: Any) -> Case:
    fields.setdefault("mode", "execute")
    return Case.model_validate(fields)


async def run_demo(*cases: Case) -> list[CaseResult]:
    report = await run_cases(demo_agent.agent, cases, card=demo_agent.card)
    return report.results


async def run_bookshop(*cases: Case) -> list[CaseResult]:
    report = await run_cases(bookshop_agent, cases, card=bookshop_card)
    return report.results


async def crash(ctx: AgentContext) -> AgentOutput:
    """Crashes with a secret in its exception text."""
    raise RuntimeError("database password is hunter2-secret")


def failed(result: CaseResult) -> dict[str, str]:
    return {item.name: item.message for item in result.failed_assertions}


async def test_a_case_that_holds_passes_with_every_assertion_listed() -> None:
    (result,) = await run_demo(
        case(
            name="hello",
            query="hello",
            assertions={
                "final_state": "completed",
                "artifact_contains": ["Hello!", "hello"],
                "max_duration_ms": 10_000,
            },
        )
    )
    assert result.outcome == "passed"
    assert [item.name for item in result.assertions] == [
        "uncaught_server_error",
        "final_state",
        "artifact_contains",
        "max_duration_ms",
    ]
    assert all(item.passed for item in result.assertions)
    assert result.event_source == "events"
    assert [event["type"] for event in result.events][-1] == "task.completed"
    assert result.task_id is not None


async def test_final_state_and_error_code_that_do_not_hold_say_what_happened() -> None:
    (result,) = await run_demo(
        case(
            name="upstream",
            query="upstream",
            assertions={"final_state": "completed", "error_code": "RATE_LIMITED"},
        )
    )
    assert result.outcome == "failed"
    assert failed(result) == {
        "final_state": "ended failed",
        "error_code": "it failed with UPSTREAM_UNAVAILABLE / component_invoke_error",
    }
    assert result.failure is not None
    assert result.failure["errorCode"] == "UPSTREAM_UNAVAILABLE"
    assert result.failure["errorReason"] == "component_invoke_error"
    assert result.triage is not None
    assert result.triage["reason"] == "component_invoke_error"


@pytest.mark.parametrize(
    ("allowed", "passes"),
    [(["component_invoke_error", "tool_error"], True), (["tool_error"], False)],
)
async def test_allowed_failure_reasons(allowed: list[str], passes: bool) -> None:
    (result,) = await run_demo(
        case(name="up", query="upstream", assertions={"allowed_failure_reasons": allowed})
    )
    assert result.passed is passes
    if not passes:
        assert failed(result) == {
            "allowed_failure_reasons": (
                "failed with reason 'component_invoke_error', not one of the allowed reasons"
            )
        }


async def test_allowed_failure_reasons_hold_for_a_run_that_did_not_fail() -> None:
    (result,) = await run_demo(
        case(name="ok", query="hello", assertions={"allowed_failure_reasons": ["tool_error"]})
    )
    assert result.passed


async def test_an_unmapped_server_error_fails_a_case_that_does_not_mention_it() -> None:
    report = await run_cases(crash, [case(name="crash", query="hi")])
    (result,) = report.results
    assert result.outcome == "failed"
    assert result.error_code == "INTERNAL_ERROR"
    assert result.incident_id is not None
    assert failed(result) == {
        "uncaught_server_error": (
            f"an unmapped server error escaped (incident {result.incident_id})"
        )
    }
    assert "hunter2" not in json.dumps(report.to_dict())  # the text never left the agent
    assert not report.ok


async def test_a_case_can_expect_an_unmapped_server_error() -> None:
    expecting = case(name="crash", query="hi", assertions={"uncaught_server_error": True})
    (result,) = (await run_cases(crash, [expecting])).results
    assert result.passed
    (mapped,) = await run_demo(
        case(name="mapped", query="upstream", assertions={"uncaught_server_error": True})
    )
    assert failed(mapped) == {
        "uncaught_server_error": (
            "expected an unmapped server error; it failed with UPSTREAM_UNAVAILABLE / "
            "component_invoke_error"
        )
    }


async def test_artifact_contains_names_the_missing_texts() -> None:
    (result,) = await run_demo(
        case(
            name="partial",
            query="partial",
            assertions={"artifact_contains": ["Ada Lovelace", "Grace Hopper", "Alan Turing"]},
        )
    )
    assert failed(result) == {
        "artifact_contains": "no artifact contains 'Grace Hopper', 'Alan Turing'"
    }
    (kept,) = [item for item in result.assertions if item.name == "artifact_contains"]
    assert kept.actual == ["Grace Hopper", "Alan Turing"]


async def test_max_duration_ms_fails_a_slow_run() -> None:
    (result,) = await run_demo(case(name="fast", query="hello", assertions={"max_duration_ms": 1}))
    (duration,) = result.assertions[1:]
    if result.duration_ms <= 1:  # pragma: no cover - an in-memory run under a millisecond
        assert duration.passed
    else:
        assert failed(result)["max_duration_ms"] == f"took {result.duration_ms:.0f} ms"


async def test_input_required_is_a_final_state() -> None:
    (result,) = await run_demo(
        case(name="bday", query="birthday", assertions={"final_state": "input-required"})
    )
    assert result.passed
    assert result.final_state == "input-required"


async def test_selected_target_and_rounds_come_from_the_runner_events() -> None:
    (found, wrong) = await run_bookshop(
        case(
            name="by-author",
            query="Which books by William Gibson do you have?",
            assertions={
                "selected_target": "search_books",
                "max_rounds": 2,
                "artifact_contains": "Neuromancer",
            },
        ),
        case(
            name="misspelt",
            query='How much is "Dunes"?',
            assertions={"selected_target": "search_books", "max_rounds": 2},
        ),
    )
    assert found.passed, found.message
    assert found.selected_target == "search_books"
    assert found.rounds == 2
    assert [(s.tool, s.ok) for s in found.steps] == [("search_books", True)]
    assert wrong.outcome == "failed"
    assert failed(wrong) == {
        "selected_target": "selected 'get_book' first",
        "max_rounds": "took 4 rounds",
    }
    assert [(s.tool, s.ok, s.reason) for s in wrong.steps] == [
        ("get_book", False, "tool_error"),
        ("search_books", True, None),
        ("get_book", True, None),
    ]


async def test_a_request_refused_before_a_task_has_no_final_state() -> None:
    # the demo agent's card takes text only: a data part is refused before any task
    (result,) = await run_demo(
        case(
            name="data",
            parts=[{"kind": "data", "data": {"x": 1}}],
            assertions={"final_state": "completed", "selected_target": "x"},
        )
    )
    assert result.error_code == "INVALID_INPUT"
    assert result.task_id is None
    assert failed(result) == {
        "final_state": "ended no task (the request was answered with an error)",
        "selected_target": (
            "cannot be checked: the agent offers no event stream and the task has no "
            "tool_results artifact"
        ),
    }
    assert result.event_source == "none"


async def test_repeat_and_concurrency_keep_the_order_of_the_cases() -> None:
    cases = [case(name=f"c{n}", query="hello") for n in range(3)]
    seen: list[str] = []
    async with Lab(demo_agent.agent, card=demo_agent.card) as lab:
        report = await lab.run(
            cases, concurrency=3, repeat=2, on_result=lambda r: seen.append(r.case)
        )
    assert [(r.case, r.repeat) for r in report.results] == [
        ("c0", 0),
        ("c0", 1),
        ("c1", 0),
        ("c1", 1),
        ("c2", 0),
        ("c2", 1),
    ]
    assert sorted(seen) == ["c0", "c0", "c1", "c1", "c2", "c2"]
    assert report.ok
    assert report.counts() == {"passed": 6, "failed": 0, "refused": 0, "error": 0}


async def test_a_case_that_takes_too_long_is_an_error_and_the_next_case_runs() -> None:
    async with Lab(demo_agent.agent, card=demo_agent.card, timeout=0.2) as lab:
        hung = await lab.run_case(case(name="hang", query="hang"))
        after = await lab.run_case(case(name="next", query="hello"))
    assert (hung.outcome, hung.message) == ("error", "no answer within 0.2 s")
    assert after.passed


def test_a_lab_needs_exactly_one_target() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        Lab()
    with pytest.raises(ValueError, match="exactly one"):
        Lab(demo_agent.agent, url="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="timeout must be positive"):
        Lab(demo_agent.agent, timeout=0)


async def test_running_outside_the_context_manager_says_how_to_use_it() -> None:
    with pytest.raises(RuntimeError, match="async with Lab"):
        await Lab(demo_agent.agent).run_case(case(query="hello"))

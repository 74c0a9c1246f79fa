"""``chain``'s parts that need no server: the mode check between neighbours, the error a
failing step raises (its own class, its data, where it failed), and the chain's result."""

from __future__ import annotations

import pytest
from a2a.types import AgentCard, AgentSkill, TaskState

from llamon_agent.client import (
    ChainFailedError,
    ChainResult,
    RemoteAgentError,
    RemoteApplicationErrorData,
    RemoteNotFoundError,
    RemoteRateLimitedError,
    RemoteResult,
    RemoteTimeoutError,
)
from llamon_agent.client.agent_client import CardMismatchError
from llamon_agent.client.chaining import check_chain
from llamon_agent.core.classify import classify_exception, mark_retried
from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.failures import FailureRecord
from tests._support.a2a_server import make_card


def _card(name: str, inputs: list[str], outputs: list[str], *skills: AgentSkill) -> AgentCard:
    return make_card().model_copy(
        update={
            "name": name,
            "default_input_modes": inputs,
            "default_output_modes": outputs,
            "skills": [*make_card().skills, *skills],
        }
    )


def _skill(skill_id: str, inputs: list[str] | None, outputs: list[str] | None) -> AgentSkill:
    return AgentSkill(
        id=skill_id,
        name=skill_id,
        description="A test skill.",
        tags=["test"],
        input_modes=inputs,
        output_modes=outputs,
    )


TEXT, DATA = ["text/plain"], ["application/json"]


@pytest.mark.parametrize(
    ("given", "taken"),
    [
        (TEXT, TEXT),
        (["text/plain", "application/json"], DATA),
        (["text/*"], ["text/markdown"]),
        (["image/png"], ["image/*"]),
        (["*/*"], DATA),
        (DATA, ["*"]),
    ],
)
def test_neighbours_with_a_mode_in_common_fit(given: list[str], taken: list[str]) -> None:
    check_chain([_card("a", TEXT, given), _card("b", taken, TEXT)], [None, None])


@pytest.mark.reason("card_mismatch_error")
def test_neighbours_with_no_mode_in_common_are_named_with_both_cards_modes() -> None:
    cards = [_card("a", TEXT, TEXT), _card("b", TEXT, TEXT), _card("c", DATA, DATA)]
    with pytest.raises(CardMismatchError) as caught:
        check_chain(cards, [None, None, None])
    assert str(caught.value) == (
        "agent 'b' cannot feed agent 'c': 'b' default output modes: text/plain; "
        "'c' default input modes: application/json; no mode in common, nothing was sent"
    )
    assert isinstance(caught.value, ValueError)
    assert classify_exception(caught.value).code is ErrorCode.INVALID_INPUT
    with pytest.raises(CardMismatchError, match="'x' default output modes: none"):
        check_chain([_card("x", TEXT, []), _card("y", TEXT, TEXT)], [None, None])


def test_a_chosen_skill_decides_its_modes_and_the_defaults_fill_in() -> None:
    a = _card("a", TEXT, TEXT, _skill("tabulate", None, DATA), _skill("talk", None, None))
    b = _card("b", TEXT, TEXT, _skill("load", DATA, None))
    check_chain([a, b], ["tabulate", "load"])
    check_chain([a, b], ["talk", None])  # the skill lists no modes: the card's defaults
    with pytest.raises(CardMismatchError) as caught:
        check_chain([a, b], ["tabulate", None])
    assert str(caught.value) == (
        "agent 'a' cannot feed agent 'b': 'a' skill 'tabulate' output modes: "
        "application/json; 'b' default input modes: text/plain; no mode in common, "
        "nothing was sent"
    )
    with pytest.raises(CardMismatchError) as unknown:
        check_chain([a, b], [None, "nope"])
    assert str(unknown.value) == "agent 'b' has no skill 'nope' (skills: answer, load)"


def _result(text: str, state: TaskState = TaskState.completed) -> RemoteResult:
    return RemoteResult(state=state, task_id="t", context_id="c", text=text)


def test_a_chain_result_is_complete_only_when_every_step_completed() -> None:
    done = ChainResult((_result("a"), _result("b")), 2)
    paused = ChainResult((_result("a"), _result("?", TaskState.input_required)), 3)
    cut = ChainResult((_result("a"),), 2)
    assert (done.complete, done.last.text) == (True, "b")
    assert (paused.complete, paused.last.state) == (False, TaskState.input_required)
    assert not cut.complete


def _limited() -> RemoteRateLimitedError:
    raw = {
        "errorCode": "RATE_LIMITED",
        "errorReason": "quota_exhausted",
        "errorMessage": "quota used up",
        "retriable": True,
        "retryAfterMs": 1500,
        "errorSource": "llm:classifier",
        "cause": [{"agent": "c", "errorCode": "RATE_LIMITED", "errorReason": "quota"}],
        "domainCode": "DOC_5",
    }
    return RemoteRateLimitedError(
        "quota used up",
        reason="quota_exhausted",
        retriable=True,
        retry_after_ms=1500,
        task_id="task-b",
        context_id="ctx-b",
        agent="b",
        data=RemoteApplicationErrorData.model_validate(raw),
        raw_data=raw,
    )


def test_a_failed_step_raises_its_own_class_with_its_data_and_where_it_failed() -> None:
    step = _limited()
    mark_retried(step, 2, attempt_codes=["RATE_LIMITED"] * 3)
    before = (_result("A"),)
    error = ChainFailedError(step, step=2, steps=3, results=before)

    assert isinstance(error, RemoteRateLimitedError)
    assert isinstance(error, ChainFailedError)
    assert not isinstance(error, RemoteNotFoundError)
    assert type(error) is type(ChainFailedError(_limited(), step=1, steps=1))  # made once
    assert (error.step, error.steps, error.results, error.error) == (2, 3, before, step)
    assert error.message == "chain step 2 of 3 (agent 'b') failed: quota used up"
    assert (error.code, error.reason, error.retriable, error.retry_after_ms) == (
        ErrorCode.RATE_LIMITED,
        "quota_exhausted",
        True,
        1500,
    )
    assert (error.task_id, error.context_id, error.agent) == ("task-b", "ctx-b", "b")
    assert error.data is step.data
    assert error.raw_data == step.raw_data
    assert error.data is not None
    assert error.data.error_source == "llm:classifier"
    assert error.cause_hops == step.cause_hops
    assert [hop["agent"] for hop in error.cause_hops] == ["b", "c"]

    found = classify_exception(error)
    assert (found.code, found.reason, found.retriable, found.retry_after_ms) == (
        ErrorCode.RATE_LIMITED,
        "quota_exhausted",
        True,
        1500,
    )
    record = FailureRecord.from_exception(error)
    evidence = record.evidence
    assert (record.reason, evidence["chain_step_index"], evidence["chain_step_count"]) == (
        "quota_exhausted",
        2,
        3,
    )
    assert evidence["retried"] == 2
    assert evidence["cause"] == error.cause_hops


def test_a_failed_step_of_a_subclass_keeps_every_base() -> None:
    slow = RemoteTimeoutError("no answer", reason="timeout", retriable=True)
    error = ChainFailedError(slow, step=1, steps=2)
    assert isinstance(error, TimeoutError)
    assert isinstance(error, RemoteAgentError)
    assert error.message == "chain step 1 of 2 failed: no answer"
    assert error.results == ()
    again = ChainFailedError(error, step=1, steps=1)  # already a chain failure: same class
    assert type(again) is type(error)

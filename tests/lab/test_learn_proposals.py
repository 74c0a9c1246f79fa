"""The proposal store and its promotion gate: shadow runs count a streak, ``accept`` is
refused until K passes in a row, then writes the case into a case file that still loads;
``reject`` keeps the rejection so the input is never proposed again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.failures import FailureRecord
from llamon_agent.lab import Case, load_cases
from llamon_agent.lab.learn import Candidate, LearnInput, Proposal, propose
from llamon_agent.lab.proposals import (
    PromotionRefused,
    ProposalError,
    ProposalStore,
    default_proposals_path,
)

EXISTING_YAML = """\
# hand-written cases: this comment stays
- name: hello
  mode: execute
  query: hello   # and this one
"""


def learned(text: str = "find Dune", reason: str | None = "timeout") -> Proposal:
    return propose(Candidate("store", "t-failed", "t-done", LearnInput((text,)), reason, "t", 2))


def store_with(tmp_path: Path, *proposals: Proposal) -> ProposalStore:
    store = ProposalStore(tmp_path / "lab" / "proposals.json")
    store.add(proposals)
    return store


def passes(store: ProposalStore, proposal_id: str, *outcomes: bool) -> None:
    for passed in outcomes:
        assert store.record(proposal_id, passed) is not None


@pytest.mark.reason("insufficient_repeated_success")
def test_accept_is_refused_until_the_case_passed_k_times_in_a_row(tmp_path: Path) -> None:
    proposal = learned()
    store = store_with(tmp_path, proposal)
    into = tmp_path / "cases" / "learned.yaml"

    passes(store, proposal.id, True)
    with pytest.raises(PromotionRefused) as refused:
        store.accept(proposal.id, into=into, k=3)
    assert (refused.value.reason, str(refused.value)) == (
        "insufficient_repeated_success",
        "passed 1 time in a row; needs 3",
    )
    assert refused.value.operator_action == "keep_shadow_mode"
    record = FailureRecord.from_exception(refused.value)
    assert (record.stage, record.reason, record.error_code) == (
        "learn",
        "insufficient_repeated_success",
        ErrorCode.INTERNAL_ERROR,
    )

    passes(store, proposal.id, True, False)  # a fail resets the streak
    kept = store.get(proposal.id)
    assert kept is not None
    assert (kept.streak, kept.runs, kept.status) == (0, 3, "shadow")
    with pytest.raises(PromotionRefused, match=r"^passed 0 times in a row; needs 3$"):
        store.accept(proposal.id, into=into)
    assert not into.exists()

    passes(store, proposal.id, True, True, True)
    accepted = store.accept(proposal.id, into=into, k=3)
    assert (accepted.status, accepted.streak, accepted.accepted_into) == ("accepted", 3, str(into))
    [case] = load_cases(into)
    assert case.model_dump() == proposal.to_case().model_dump()
    assert store.shadow_cases() == []
    assert store.record(proposal.id, True) is None  # no longer in shadow mode
    with pytest.raises(ProposalError, match="already accepted"):
        store.accept(proposal.id, into=into)


def test_shadow_cases_are_the_shadow_proposals_cases(tmp_path: Path) -> None:
    first, second = learned("find Dune"), learned("find Emma")
    store = store_with(tmp_path, first, second)
    assert [case.name for case in store.shadow_cases()] == [first.id, second.id]
    assert all(isinstance(case, Case) and case.tags == ["learned"] for case in store.shadow_cases())
    store.reject(first.id, "duplicates an existing case")
    assert [case.name for case in store.shadow_cases()] == [second.id]
    assert store.record("learned-000000000000", True) is None


def test_accept_appends_to_a_yaml_file_and_keeps_its_comments(tmp_path: Path) -> None:
    proposal = learned()
    store = store_with(tmp_path, proposal)
    passes(store, proposal.id, True, True)
    into = tmp_path / "cases.yaml"
    into.write_text(EXISTING_YAML, encoding="utf-8")

    store.accept(proposal.id, into=into, k=2)
    text = into.read_text(encoding="utf-8")
    assert text.startswith(EXISTING_YAML)  # comments and layout kept
    assert [case.name for case in load_cases(into)] == ["hello", proposal.id]
    assert load_cases(into)[1].model_dump() == proposal.to_case().model_dump()


def test_accept_appends_to_a_cases_mapping_and_to_json(tmp_path: Path) -> None:
    first, second = learned("find Dune"), learned("find Emma")
    store = store_with(tmp_path, first, second)
    passes(store, first.id, True)
    passes(store, second.id, True)
    mapping = tmp_path / "suite.yml"
    mapping.write_text("cases:\n    - name: hello\n      mode: plan\n      query: hi\n", "utf-8")
    store.accept(first.id, into=mapping, k=1)
    assert mapping.read_text(encoding="utf-8").startswith("cases:\n    - name: hello\n")
    assert [case.name for case in load_cases(mapping)] == ["hello", first.id]

    single = tmp_path / "one.json"
    single.write_text(json.dumps({"name": "hello", "mode": "plan", "query": "hi"}), "utf-8")
    store.accept(second.id, into=single, k=1)
    assert [case.name for case in load_cases(single)] == ["hello", second.id]
    assert isinstance(json.loads(single.read_text(encoding="utf-8")), list)


def test_a_case_file_that_does_not_load_is_left_as_it_was(tmp_path: Path) -> None:
    proposal = learned()
    store = store_with(tmp_path, proposal)
    passes(store, proposal.id, True)
    broken = tmp_path / "broken.yaml"
    broken.write_text("- name: x\n  mode: sometimes\n  query: hi\n", encoding="utf-8")
    with pytest.raises(ProposalError) as problem:
        store.accept(proposal.id, into=broken, k=1)
    assert str(problem.value).startswith(f"{broken} does not load, so no case is added to it:")
    assert "mode" in str(problem.value)
    assert broken.read_text(encoding="utf-8") == "- name: x\n  mode: sometimes\n  query: hi\n"
    kept = store.get(proposal.id)
    assert kept is not None
    assert kept.status == "shadow"
    # the same case twice in one file is refused too; the next accept is served
    twice = tmp_path / "twice.json"
    twice.write_text(json.dumps([proposal.case]), encoding="utf-8")
    with pytest.raises(ProposalError, match="already holds a case named"):
        store.accept(proposal.id, into=twice, k=1)
    with pytest.raises(ProposalError, match=r"not a case file name: use \.json, \.yaml or \.yml"):
        store.accept(proposal.id, into=tmp_path / "cases.txt", k=1)
    assert store.accept(proposal.id, into=tmp_path / "new.json", k=1).status == "accepted"


@pytest.mark.reason("promotion_rejected")
def test_a_rejected_proposal_is_kept_and_never_proposed_again(tmp_path: Path) -> None:
    proposal = learned()
    store = store_with(tmp_path, proposal)
    passes(store, proposal.id, True, True, True)
    rejected = store.reject(proposal.id, "asks ada.lovelace@example.org; not a regression")
    assert (rejected.status, rejected.reason) == ("rejected", "promotion_rejected")
    assert rejected.rejection_reason == "asks [REDACTED:email]; not a regression"
    assert "example.org" not in store.path.read_text(encoding="utf-8")

    with pytest.raises(PromotionRefused) as refused:
        store.accept(proposal.id, into=tmp_path / "cases.yaml", k=1)
    assert refused.value.reason == "promotion_rejected"
    assert refused.value.operator_action == "store_rejection_reason"
    assert str(refused.value).startswith("it was rejected (asks [REDACTED:email]")
    assert not (tmp_path / "cases.yaml").exists()

    # learning the same input again proposes nothing
    new, known = store.add([learned()])
    assert (new, [p.status for p in known]) == ([], ["rejected"])
    with pytest.raises(ProposalError, match="only a proposal in shadow mode can be rejected"):
        store.reject(proposal.id, "again")


@pytest.mark.reason("scrub_failed")
def test_a_refused_proposal_cannot_be_accepted(tmp_path: Path) -> None:
    refused = learned("mail me at ada.lovelace@example.org")
    store = store_with(tmp_path, refused)
    with pytest.raises(PromotionRefused) as problem:
        store.accept(refused.id, into=tmp_path / "cases.yaml", k=1)
    assert problem.value.reason == "scrub_failed"
    assert str(problem.value) == "its input did not pass the security boundary; it has no case"


def test_requests_the_store_cannot_serve_name_the_problem(tmp_path: Path) -> None:
    store = store_with(tmp_path, learned())
    with pytest.raises(ProposalError, match=r"^no proposal 'learned-nope' in .*proposals\.json$"):
        store.accept("learned-nope", into=tmp_path / "c.yaml")
    with pytest.raises(ProposalError, match="the reason must not be empty"):
        store.reject(learned().id, "  ")
    with pytest.raises(ProposalError, match="at least 1, got 0"):
        store.accept(learned().id, into=tmp_path / "c.yaml", k=0)
    store.path.write_text("{not json", encoding="utf-8")
    not_json = r"proposals\.json: not valid JSON \(line 1, column 2\)"
    with pytest.raises(ProposalError, match=not_json):
        store.load()
    store.path.write_text('{"proposals": {}}', encoding="utf-8")
    with pytest.raises(ProposalError, match="not a proposals file"):
        store.shadow_cases()


def test_writes_are_atomic_and_leave_no_temporary_file(tmp_path: Path) -> None:
    proposal = learned()
    store = store_with(tmp_path, proposal)
    passes(store, proposal.id, True, False, True)
    store.accept(proposal.id, into=tmp_path / "lab" / "cases.json", k=1)
    assert sorted(p.name for p in store.path.parent.iterdir()) == [
        "cases.json",
        "proposals.json",
        "proposals.json.lock",
    ]
    document = json.loads(store.path.read_text(encoding="utf-8"))
    assert document["version"] == 1
    [kept] = document["proposals"]
    assert (kept["id"], kept["status"], kept["streak"], kept["runs"]) == (
        proposal.id,
        "accepted",
        1,
        3,
    )
    assert kept["created"] <= kept["updated"]


def test_the_default_file_is_under_llamon_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMON_HOME", str(tmp_path))
    assert default_proposals_path() == tmp_path / "lab" / "proposals.json"
    assert ProposalStore().path == tmp_path / "lab" / "proposals.json"
    assert default_proposals_path(tmp_path / "x") == tmp_path / "x" / "lab" / "proposals.json"

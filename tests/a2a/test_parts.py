"""The executor's part builders (``llamon_agent.a2a.parts``): what each output becomes."""

from __future__ import annotations

from datetime import date

from a2a.types import DataPart, Part, TextPart

from llamon_agent.a2a.agent import Completed
from llamon_agent.a2a.parts import (
    chunk_to_part,
    completed_parts,
    interrupt_parts,
    output_to_parts,
    progress_parts,
)
from llamon_agent.core.hitl import HITLInterrupt


def _wire(parts: list[Part]) -> list[dict[str, object]]:
    return [part.model_dump(mode="json", exclude_none=True) for part in parts]


def test_a_chunk_is_text_data_or_the_part_itself() -> None:
    part = Part(root=TextPart(text="as is"))
    assert chunk_to_part(part) is part
    assert _wire([chunk_to_part("hi")]) == [{"kind": "text", "text": "hi"}]
    assert _wire([chunk_to_part({"on": date(2026, 1, 2)})]) == [
        {"kind": "data", "data": {"on": "2026-01-02"}}
    ]


def test_an_output_becomes_an_artifacts_parts() -> None:
    parts = [Part(root=TextPart(text="a")), Part(root=DataPart(data={"b": 1}))]
    assert output_to_parts(parts) == parts
    assert _wire(output_to_parts([1, "two"])) == [{"kind": "data", "data": {"items": [1, "two"]}}]
    assert _wire(output_to_parts("text")) == [{"kind": "text", "text": "text"}]
    assert _wire(output_to_parts({"k": "v"})) == [{"kind": "data", "data": {"k": "v"}}]
    assert _wire(output_to_parts(42)) == [{"kind": "data", "data": {"value": 42}}]


def test_progress_is_its_text_then_its_data() -> None:
    assert _wire(progress_parts("step 1", None)) == [{"kind": "text", "text": "step 1"}]
    assert _wire(progress_parts("step 1", {"done": 1})) == [
        {"kind": "text", "text": "step 1"},
        {"kind": "data", "data": {"done": 1}},
    ]


def test_a_pause_is_its_question_then_its_payload() -> None:
    asked = HITLInterrupt(payload={"question": "Which size?"})
    assert _wire(interrupt_parts(asked)) == [
        {"kind": "text", "text": "Which size?"},
        {"kind": "data", "data": {"question": "Which size?"}},
    ]
    silent = HITLInterrupt(payload={"field": "size"})
    assert _wire(interrupt_parts(silent))[0] == {"kind": "text", "text": "More input is needed."}


def test_completed_is_its_text_then_its_data() -> None:
    assert _wire(completed_parts(Completed(data={"hits": 0}, text="no results"))) == [
        {"kind": "text", "text": "no results"},
        {"kind": "data", "data": {"hits": 0}},
    ]
    assert _wire(completed_parts(Completed(data={"hits": 0}))) == [
        {"kind": "data", "data": {"hits": 0}}
    ]

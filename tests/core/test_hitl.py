"""HITLInterrupt is a value, as the documented example shows it."""

from __future__ import annotations

import pytest

from llamon_agent.core.hitl import HITLInterrupt


async def ask_birthday(state: dict[str, object]) -> HITLInterrupt | None:
    birthday = state.get("birthday")
    if not birthday:
        return HITLInterrupt(
            payload={"question": "생년월일을 알려주세요."},
            thread_id=str(state["thread_id"]),
        )
    return None


async def test_the_documented_example_returns_an_input_required_interrupt() -> None:
    interrupt = await ask_birthday({"thread_id": "t-1"})
    assert interrupt == HITLInterrupt(
        payload={"question": "생년월일을 알려주세요."}, thread_id="t-1"
    )
    assert interrupt is not None
    assert interrupt.kind == "input-required"


def test_auth_required_kind() -> None:
    assert HITLInterrupt({"url": "https://login"}, kind="auth-required").kind == "auth-required"


def test_bad_kind_and_payload_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="kind"):
        HITLInterrupt({}, kind="failed")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="payload must be a mapping"):
        HITLInterrupt("question?")  # type: ignore[arg-type]


def test_resume_key_names_a_state_key() -> None:
    assert HITLInterrupt({}, resume_key="birthday").resume_key == "birthday"
    assert HITLInterrupt({}).resume_key is None
    with pytest.raises(ValueError, match="resume_key must be a non-empty string"):
        HITLInterrupt({}, resume_key="")


def test_is_not_an_exception() -> None:
    assert not isinstance(HITLInterrupt(), BaseException)

"""The exception hierarchy: every public name, and docstrings that tell the truth."""

from __future__ import annotations

import inspect

import pytest

from llamon_agent import exceptions
from llamon_agent.core.classify import python_exc_to_error_code
from llamon_agent.exceptions import GuardrailBlockedError, LlamonApplicationError, LlamonError

PUBLIC_NAMES = [
    "ComponentInvokeError",
    "ComponentLoadError",
    "ConfigValidationError",
    "MissingFieldError",
    "MissingAPIKeyError",
    "RegistryUnauthorizedError",
    "RegistryNotFoundError",
    "RegistryTimeoutError",
    "GuardrailBlockedError",
    "MaxIterationError",
    "MergeStrategyError",
    "RoutingError",
    "A2AProtocolError",
]

CLASSES = [getattr(exceptions, name) for name in exceptions.__all__]


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_public_name_is_a_llamon_error(name: str) -> None:
    assert issubclass(getattr(exceptions, name), LlamonError)


def test_hierarchy_drawing_names_every_class() -> None:
    doc = exceptions.__doc__ or ""
    assert all(cls.__name__ in doc for cls in CLASSES)


@pytest.mark.parametrize(
    "cls", [c for c in CLASSES if c is not LlamonApplicationError], ids=lambda c: c.__name__
)
def test_docstring_states_code_and_retriable(cls: type[LlamonError]) -> None:
    code, _, retriable = python_exc_to_error_code(cls("x"))
    doc = inspect.getdoc(cls) or ""
    first = doc.split("\n\n")[0]
    assert code.value in first
    assert ("not retriable" in first) is (not retriable)
    assert ("retriable" in first) is True


def test_details_become_scrubbed_envelope_keys() -> None:
    exc = exceptions.ComponentInvokeError(
        "lookup failed", tool="check_account", api_key="sk-abcdefghijklmnopqrstuv"
    )
    envelope = exc.to_dict()
    assert envelope["reason"] == "component_invoke_error"
    assert envelope["tool"] == "check_account"
    assert envelope["api_key_present"] is True
    assert "sk-abcdefghijklmnop" not in str(envelope)


def test_guardrail_error_carries_its_violation() -> None:
    exc = GuardrailBlockedError("no", violation_category="pii", policy_id="POL_1")
    assert (exc.violation_category, exc.policy_id, exc.severity) == ("pii", "POL_1", None)
    assert exc.to_dict()["violation_category"] == "pii"


def test_application_error_envelope() -> None:
    exc = LlamonApplicationError("NOT_FOUND", "doc_missing", message="no doc", domain="docs")
    assert exc.to_dict() | {} == {
        "reason": "doc_missing",
        "message": "no doc",
        "error_code": "NOT_FOUND",
        "retryable": False,
    }
    assert exc.extras == {"domain": "docs"}

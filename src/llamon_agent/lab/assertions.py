"""The Quality Lab's assertions: what each one checks, and the sentence it fails with.

``check_assertions(case, result)`` fills ``result.assertions`` (one ``AssertionResult`` per
assertion the case sets, in the order of the table below) and sets ``result.outcome`` to
``failed`` when one does not hold:

==========================  ===============================================================
assertion                   holds when
==========================  ===============================================================
``selected_target``         the first tool the agent selected is this one (from the steps)
``allowed_failure_reasons`` the run did not fail, or failed with one of these reasons
``uncaught_server_error``   ``false``: no unmapped server error (``INTERNAL_ERROR`` with an
                            ``incidentId``); ``true``: there was one. Checked even when the
                            case leaves it out (as ``false``): a crash never passes silently
``final_state``             the task ended in this state
``error_code``              the failure's ``errorCode`` is this one
``artifact_contains``       some artifact (or the reply) contains this text, each of a list
``max_rounds``              the tool loop took at most this many rounds
``max_duration_ms``         the run took at most this many milliseconds
==========================  ===============================================================

A plan-mode case that stopped before a tool with side effects does not check
``final_state``, ``error_code`` and ``artifact_contains`` (the run was not carried through);
they are reported as not checked, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from llamon_agent.core.codes import ErrorCode
from llamon_agent.lab.cases import Assertions, Case
from llamon_agent.lab.results import AssertionResult, CaseResult

__all__ = ["ASSERTION_NAMES", "check_assertions", "uncaught_server_error"]

ASSERTION_NAMES: Final = tuple(Assertions.model_fields)
"""Every assertion a case can set, in the order they are checked."""

_NOT_CARRIED_THROUGH: Final = frozenset({"final_state", "error_code", "artifact_contains"})


def uncaught_server_error(result: CaseResult) -> bool:
    """The run ended in an unmapped server error: ``INTERNAL_ERROR`` with an incident id."""
    return result.error_code == ErrorCode.INTERNAL_ERROR.value and result.incident_id is not None


def _failure_text(result: CaseResult) -> str:
    if result.error_code is None:
        return "it did not fail"
    return f"it failed with {result.error_code} / {result.failure_reason}"


def _no_steps(result: CaseResult) -> str | None:
    if result.event_source == "none":
        return (
            "cannot be checked: the agent offers no event stream and the task has no "
            "tool_results artifact"
        )
    return None


def _selected_target(expected: str, result: CaseResult) -> AssertionResult:
    actual = result.selected_target
    missing = _no_steps(result)
    if missing is not None:
        return AssertionResult("selected_target", expected, None, False, missing)
    ok = actual == expected
    said = "no tool" if actual is None else repr(actual)
    return AssertionResult(
        "selected_target", expected, actual, ok, "" if ok else f"selected {said} first"
    )


def _allowed(expected: list[str], result: CaseResult) -> AssertionResult:
    actual = result.failure_reason
    ok = result.error_code is None or actual in expected
    message = "" if ok else f"failed with reason {actual!r}, not one of the allowed reasons"
    return AssertionResult("allowed_failure_reasons", expected, actual, ok, message)


def _uncaught(expected: bool, result: CaseResult) -> AssertionResult:
    actual = uncaught_server_error(result)
    ok = actual == expected
    if ok:
        message = ""
    elif actual:
        message = f"an unmapped server error escaped (incident {result.incident_id})"
    else:
        message = "expected an unmapped server error; " + _failure_text(result)
    return AssertionResult("uncaught_server_error", expected, actual, ok, message)


def _final_state(expected: str, result: CaseResult) -> AssertionResult:
    actual = result.final_state
    ok = actual == expected
    said = "no task (the request was answered with an error)" if actual is None else actual
    return AssertionResult("final_state", expected, actual, ok, "" if ok else f"ended {said}")


def _error_code(expected: str, result: CaseResult) -> AssertionResult:
    actual = result.error_code
    ok = actual == expected
    return AssertionResult("error_code", expected, actual, ok, "" if ok else _failure_text(result))


def _artifact(expected: str | list[str], result: CaseResult) -> AssertionResult:
    wanted = [expected] if isinstance(expected, str) else list(expected)
    missing = [text for text in wanted if not any(text in found for found in result.artifact_texts)]
    ok = not missing
    shown = ", ".join(repr(text) for text in missing)
    message = "" if ok else f"no artifact contains {shown}"
    return AssertionResult("artifact_contains", expected, None if ok else missing, ok, message)


def _max_rounds(expected: int, result: CaseResult) -> AssertionResult:
    actual = result.rounds
    if actual is None:
        missing = _no_steps(result)
        if missing is not None:
            return AssertionResult("max_rounds", expected, None, False, missing)
        return AssertionResult("max_rounds", expected, None, True)  # no tool-loop round ran
    ok = actual <= expected
    message = "" if ok else f"took {actual} rounds"
    return AssertionResult("max_rounds", expected, actual, ok, message)


def _max_duration(expected: int, result: CaseResult) -> AssertionResult:
    actual = result.duration_ms
    ok = actual <= expected
    message = "" if ok else f"took {actual:.0f} ms"
    return AssertionResult("max_duration_ms", expected, round(actual, 1), ok, message)


_CHECKS: Final[dict[str, Callable[[Any, CaseResult], AssertionResult]]] = {
    "selected_target": _selected_target,
    "allowed_failure_reasons": _allowed,
    "uncaught_server_error": _uncaught,
    "final_state": _final_state,
    "error_code": _error_code,
    "artifact_contains": _artifact,
    "max_rounds": _max_rounds,
    "max_duration_ms": _max_duration,
}


def check_assertions(case: Case, result: CaseResult) -> None:
    """Check every assertion ``case`` sets against ``result`` (see the module docstring)."""
    given = case.assertions.model_dump(mode="json", exclude_none=True)
    given.setdefault("uncaught_server_error", False)
    stopped = case.mode == "plan" and result.stopped_before is not None
    for name in ASSERTION_NAMES:
        if name not in given:
            continue
        if stopped and name in _NOT_CARRIED_THROUGH:
            note = f"not checked: plan mode stopped before {result.stopped_before}"
            result.assertions.append(AssertionResult(name, given[name], None, True, note))
            continue
        result.assertions.append(_CHECKS[name](given[name], result))
    failed = result.failed_assertions
    if failed:
        result.outcome = "failed"
        result.message = "; ".join(f"{item.name}: {item.message}" for item in failed)

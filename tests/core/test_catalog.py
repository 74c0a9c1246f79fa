"""The reason catalog covers every workflow and tool-loop reason and every static table reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamon_agent.core import catalog
from llamon_agent.core.catalog import ReasonSpec, reason_catalog, reason_spec, register_reason
from llamon_agent.core.classify import BUILTIN_RULES
from llamon_agent.core.codes import ErrorCode, ErrorRule, Stage, snake_case

WORKFLOW_REASONS = {
    "retrieve": ["no_candidates", "not_retrieved", "low_confidence"],
    "select_target": [
        "llm_target_mismatch",
        "llm_target_not_in_candidates",
        "ambiguous_target",
        "selector_mismatch",
    ],
    "synthesize": [
        "unknown_target",
        "unsatisfied_field",
        "enum_required",
        "dynamic_option_required",
        "cycle",
        "max_depth",
        "user_input_fallback",
    ],
    "bind_request": ["binding_failed", "argument_coercion_failed", "missing_required_argument"],
    "auth_preflight": [
        "auth_context_required",
        "auth_profile_missing",
        "auth_header_resolution_failed",
    ],
    "execute": ["auth_failed", "http_4xx", "http_5xx", "timeout", "network_error"],
    "cleanup": ["cleanup_failed", "cleanup_not_configured"],
    "learn": ["scrub_failed", "promotion_rejected", "insufficient_repeated_success"],
    "service": ["uncaught_server_error"],
}
TOOL_LOOP_REASONS = [
    "unknown_tool",
    "invalid_arguments",
    "tool_error",
    "malformed_arguments",
    "repeated_tool_call",
    "side_effect_not_run",
    "invalid_model_response",
    "max_rounds_exceeded",
]


@pytest.mark.parametrize(
    ("stage", "reason"), [(stage, r) for stage, rs in WORKFLOW_REASONS.items() for r in rs]
)
def test_every_workflow_reason_with_its_stage(stage: str, reason: str) -> None:
    spec = reason_spec(reason)
    assert spec is not None
    assert spec.stage == stage


@pytest.mark.parametrize("reason", TOOL_LOOP_REASONS)
def test_every_tool_loop_reason(reason: str) -> None:
    assert reason_spec(reason) is not None


def test_every_static_reason_of_the_table_is_in_the_catalog() -> None:
    for key, rule, _ in BUILTIN_RULES:
        if not isinstance(rule, ErrorRule):
            continue
        reason = rule.reason or snake_case(key.__name__ if isinstance(key, type) else key)
        if reason == "llamon_error":
            continue  # the base class: subclasses carry their own names
        assert reason_spec(reason) is not None, reason


def test_dynamic_reasons_are_in_the_catalog() -> None:
    for reason in [
        "rate_limited",
        "auth_failed",
        "http_not_found",
        "http_4xx",
        "http_5xx",
        "connection_closed",
        "mcp_error",
        "error_data_build_failed",
        "worker_lost",
        "max_tool_iterations_exceeded",
    ]:
        assert reason_spec(reason) is not None, reason


def test_catalog_entries_are_consistent() -> None:
    seen = set()
    for spec in reason_catalog():
        assert spec.reason not in seen
        seen.add(spec.reason)
        assert spec.reason == snake_case(spec.reason)
        assert Stage(spec.stage)
        assert spec.operator_action
        assert spec.meaning


def test_register_reason() -> None:
    spec = ReasonSpec(
        "ledger_locked",
        "execute",
        ErrorCode.UPSTREAM_UNAVAILABLE,
        True,
        "wait_for_ledger_unlock",
        "the ledger is locked by a batch job",
    )
    register_reason(spec)
    try:
        assert reason_spec("ledger_locked") == spec
    finally:
        catalog._catalog.pop("ledger_locked")
    with pytest.raises(ValueError, match="non-empty ASCII"):
        register_reason(ReasonSpec("", "execute", ErrorCode.NOT_FOUND, False, "a", "m"))


def test_docs_list_every_catalog_reason() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "errors.md").read_text(encoding="utf-8")
    assert [s.reason for s in reason_catalog() if f"`{s.reason}`" not in docs] == []

"""Reasons a tool-call workflow raises (retrieve, select, synthesize, bind, auth preflight,
cleanup, learn): the SDK never produces them itself, but an engine exception that names one
in its ``to_dict()`` envelope becomes a ``FailureRecord`` with the stage, ``errorCode``,
retryability and operator action docs/errors.md lists for it."""

from __future__ import annotations

import pytest

from llamon_agent.core.codes import ErrorCode
from llamon_agent.core.failures import FailureRecord

E = ErrorCode


class WorkflowError(Exception):
    """An engine exception: its envelope names the stage and reason, nothing else."""

    def __init__(self, stage: str, reason: str) -> None:
        super().__init__("text adapters never parse")
        self.stage = stage
        self.reason = reason

    def to_dict(self) -> dict[str, object]:
        return {"stage": self.stage, "reason": self.reason, "message": f"{self.reason} at plan_01"}


@pytest.mark.parametrize(
    ("reason", "stage", "code", "retryable", "operator_action"),
    [
        pytest.param(
            "no_candidates",
            "retrieve",
            E.NOT_FOUND,
            False,
            "check_catalog_index_coverage",
            marks=pytest.mark.reason("no_candidates"),
        ),
        pytest.param(
            "not_retrieved",
            "retrieve",
            E.NOT_FOUND,
            False,
            "add_semantic_metadata_or_alias",
            marks=pytest.mark.reason("not_retrieved"),
        ),
        pytest.param(
            "low_confidence",
            "retrieve",
            E.NOT_FOUND,
            False,
            "widen_top_k_or_add_evidence",
            marks=pytest.mark.reason("low_confidence"),
        ),
        pytest.param(
            "llm_target_mismatch",
            "select_target",
            E.INTERNAL_ERROR,
            False,
            "check_target_selector_diagnostic",
            marks=pytest.mark.reason("llm_target_mismatch"),
        ),
        pytest.param(
            "llm_target_not_in_candidates",
            "select_target",
            E.INTERNAL_ERROR,
            False,
            "pass_selector_ranked_catalog_to_llm",
            marks=pytest.mark.reason("llm_target_not_in_candidates"),
        ),
        pytest.param(
            "ambiguous_target",
            "select_target",
            E.INVALID_INPUT,
            False,
            "confirm_with_user_or_keep_llm_target",
            marks=pytest.mark.reason("ambiguous_target"),
        ),
        pytest.param(
            "selector_mismatch",
            "select_target",
            E.INTERNAL_ERROR,
            False,
            "adjust_selector_policy_or_metadata",
            marks=pytest.mark.reason("selector_mismatch"),
        ),
        pytest.param(
            "unknown_target",
            "synthesize",
            E.NOT_FOUND,
            False,
            "rebuild_artifact_or_repair_target_selection",
            marks=pytest.mark.reason("unknown_target"),
        ),
        pytest.param(
            "unsatisfied_field",
            "synthesize",
            E.INVALID_INPUT,
            False,
            "ask_user_or_add_context_default",
            marks=pytest.mark.reason("unsatisfied_field"),
        ),
        pytest.param(
            "enum_required",
            "synthesize",
            E.INVALID_INPUT,
            False,
            "map_enum_labels_or_ask_user",
            marks=pytest.mark.reason("enum_required"),
        ),
        pytest.param(
            "dynamic_option_required",
            "synthesize",
            E.INVALID_INPUT,
            False,
            "show_option_picker",
            marks=pytest.mark.reason("dynamic_option_required"),
        ),
        pytest.param(
            "cycle",
            "synthesize",
            E.INTERNAL_ERROR,
            False,
            "check_graph_edges_and_ranking",
            marks=pytest.mark.reason("cycle"),
        ),
        pytest.param(
            "max_depth",
            "synthesize",
            E.INTERNAL_ERROR,
            False,
            "reduce_graph_noise_or_raise_depth",
            marks=pytest.mark.reason("max_depth"),
        ),
        pytest.param(
            "user_input_fallback",
            "synthesize",
            E.INVALID_INPUT,
            False,
            "add_ux_slot_or_context_default",
            marks=pytest.mark.reason("user_input_fallback"),
        ),
        pytest.param(
            "binding_failed",
            "bind_request",
            E.INVALID_INPUT,
            False,
            "fix_field_mapping",
            marks=pytest.mark.reason("binding_failed"),
        ),
        pytest.param(
            "argument_coercion_failed",
            "bind_request",
            E.INVALID_INPUT,
            False,
            "fix_runtime_argument_builder",
            marks=pytest.mark.reason("argument_coercion_failed"),
        ),
        pytest.param(
            "missing_required_argument",
            "bind_request",
            E.INVALID_INPUT,
            False,
            "fix_schema_contract",
            marks=pytest.mark.reason("missing_required_argument"),
        ),
        pytest.param(
            "auth_context_required",
            "auth_preflight",
            E.AUTH_REQUIRED,
            False,
            "show_login_or_use_service_account",
            marks=pytest.mark.reason("auth_context_required"),
        ),
        pytest.param(
            "auth_profile_missing",
            "auth_preflight",
            E.AUTH_REQUIRED,
            False,
            "configure_collection_auth_profile",
            marks=pytest.mark.reason("auth_profile_missing"),
        ),
        pytest.param(
            "auth_header_resolution_failed",
            "auth_preflight",
            E.AUTH_REQUIRED,
            True,
            "check_session_header_resolver",
            marks=pytest.mark.reason("auth_header_resolution_failed"),
        ),
        pytest.param(
            "cleanup_failed",
            "cleanup",
            E.INTERNAL_ERROR,
            False,
            "fix_cleanup_step",
            marks=pytest.mark.reason("cleanup_failed"),
        ),
        pytest.param(
            "cleanup_not_configured",
            "cleanup",
            E.INTERNAL_ERROR,
            False,
            "disable_case_or_add_cleanup",
            marks=pytest.mark.reason("cleanup_not_configured"),
        ),
        pytest.param(
            "scrub_failed",
            "learn",
            E.INTERNAL_ERROR,
            False,
            "reject_learning_record",
            marks=pytest.mark.reason("scrub_failed"),
        ),
        pytest.param(
            "insufficient_repeated_success",
            "learn",
            E.INTERNAL_ERROR,
            False,
            "keep_shadow_mode",
            marks=pytest.mark.reason("insufficient_repeated_success"),
        ),
        pytest.param(
            "promotion_rejected",
            "learn",
            E.INTERNAL_ERROR,
            False,
            "store_rejection_reason",
            marks=pytest.mark.reason("promotion_rejected"),
        ),
    ],
)
def test_a_workflow_reason_gets_its_documented_record(
    reason: str, stage: str, code: ErrorCode, retryable: bool, operator_action: str
) -> None:
    record = FailureRecord.from_exception(WorkflowError(stage, reason), tool="getOrderDetail")
    assert (record.stage, record.reason, record.error_code) == (stage, reason, code)
    assert (record.retryable, record.operator_action) == (retryable, operator_action)
    assert record.message == f"{reason} at plan_01"
    assert record.tool == "getOrderDetail"
    assert record.evidence["exception_type"] == "WorkflowError"

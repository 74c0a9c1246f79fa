"""The reason catalog: every ``reason`` code, where it happens and what to do about it.

A reason is a stable, machine-readable name for one kind of failure (exception
messages are never a contract). Each entry gives its stage, the ``ErrorCode`` a
client sees, whether retrying may help, and the operator action. ``FailureRecord`` takes
its defaults from here; reasons not in the catalog get defaults from their ``ErrorCode``.
Add your own with ``register_reason``. ``llamon errors`` prints the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from llamon_agent.core.codes import ERROR_CODE_TABLE, ErrorCode, Stage

__all__ = [
    "DEFAULT_OPERATOR_ACTIONS",
    "ReasonSpec",
    "reason_catalog",
    "reason_spec",
    "register_reason",
]


@dataclass(frozen=True, slots=True)
class ReasonSpec:
    """One catalog entry."""

    reason: str
    stage: Stage | str
    error_code: ErrorCode
    retryable: bool
    operator_action: str
    meaning: str


DEFAULT_OPERATOR_ACTIONS: Final[MappingProxyType[ErrorCode, str]] = MappingProxyType(
    {spec.code: spec.operator_action for spec in ERROR_CODE_TABLE}
)
"""Operator action for a reason the catalog does not know, by its ``ErrorCode``
(``codes.ERROR_CODE_TABLE``'s ``operator_action``)."""

_S, _E = Stage, ErrorCode
_ENTRIES: Final[tuple[tuple[str, Stage, ErrorCode, bool, str, str], ...]] = (
    # search and selection
    (
        "no_candidates",
        _S.RETRIEVE,
        _E.NOT_FOUND,
        False,
        "check_catalog_index_coverage",
        "retrieval returned no tool",
    ),
    (
        "not_retrieved",
        _S.RETRIEVE,
        _E.NOT_FOUND,
        False,
        "add_semantic_metadata_or_alias",
        "the expected target is not in the top-k",
    ),
    (
        "low_confidence",
        _S.RETRIEVE,
        _E.NOT_FOUND,
        False,
        "widen_top_k_or_add_evidence",
        "candidate scores are weak",
    ),
    (
        "llm_target_mismatch",
        _S.SELECT_TARGET,
        _E.INTERNAL_ERROR,
        False,
        "check_target_selector_diagnostic",
        "the model chose another tool than expected",
    ),
    (
        "llm_target_not_in_candidates",
        _S.SELECT_TARGET,
        _E.INTERNAL_ERROR,
        False,
        "pass_selector_ranked_catalog_to_llm",
        "the model chose a tool outside the catalog",
    ),
    (
        "ambiguous_target",
        _S.SELECT_TARGET,
        _E.INVALID_INPUT,
        False,
        "confirm_with_user_or_keep_llm_target",
        "several tools have similar evidence",
    ),
    (
        "selector_mismatch",
        _S.SELECT_TARGET,
        _E.INTERNAL_ERROR,
        False,
        "adjust_selector_policy_or_metadata",
        "the deterministic selector chose wrongly",
    ),
    # plan synthesis
    (
        "unknown_target",
        _S.SYNTHESIZE,
        _E.NOT_FOUND,
        False,
        "rebuild_artifact_or_repair_target_selection",
        "the target tool is not in the graph",
    ),
    (
        "unsatisfied_field",
        _S.SYNTHESIZE,
        _E.INVALID_INPUT,
        False,
        "ask_user_or_add_context_default",
        "a required field cannot be supplied",
    ),
    (
        "enum_required",
        _S.SYNTHESIZE,
        _E.INVALID_INPUT,
        False,
        "map_enum_labels_or_ask_user",
        "a required enum value was not chosen",
    ),
    (
        "dynamic_option_required",
        _S.SYNTHESIZE,
        _E.INVALID_INPUT,
        False,
        "show_option_picker",
        "a producer can list options for a missing field",
    ),
    (
        "cycle",
        _S.SYNTHESIZE,
        _E.INTERNAL_ERROR,
        False,
        "check_graph_edges_and_ranking",
        "the dependency chain revisits a tool",
    ),
    (
        "max_depth",
        _S.SYNTHESIZE,
        _E.INTERNAL_ERROR,
        False,
        "reduce_graph_noise_or_raise_depth",
        "dependency search exceeded the depth limit",
    ),
    (
        "user_input_fallback",
        _S.SYNTHESIZE,
        _E.INVALID_INPUT,
        False,
        "add_ux_slot_or_context_default",
        "the planner continues with a user input slot",
    ),
    # binding
    (
        "binding_failed",
        _S.BIND_REQUEST,
        _E.INVALID_INPUT,
        False,
        "fix_field_mapping",
        "the request could not be bound to the schema",
    ),
    (
        "argument_coercion_failed",
        _S.BIND_REQUEST,
        _E.INVALID_INPUT,
        False,
        "fix_runtime_argument_builder",
        "an argument could not be converted",
    ),
    (
        "missing_required_argument",
        _S.BIND_REQUEST,
        _E.INVALID_INPUT,
        False,
        "fix_schema_contract",
        "a required argument is missing",
    ),
    # auth and execution
    (
        "auth_context_required",
        _S.AUTH_PREFLIGHT,
        _E.AUTH_REQUIRED,
        False,
        "show_login_or_use_service_account",
        "auth is needed but no user/session context exists",
    ),
    (
        "auth_profile_missing",
        _S.AUTH_PREFLIGHT,
        _E.AUTH_REQUIRED,
        False,
        "configure_collection_auth_profile",
        "the tool needs auth but has no profile",
    ),
    (
        "auth_header_resolution_failed",
        _S.AUTH_PREFLIGHT,
        _E.AUTH_REQUIRED,
        True,
        "check_session_header_resolver",
        "the profile exists but no header could be made",
    ),
    (
        "auth_failed",
        _S.EXECUTE,
        _E.AUTH_REQUIRED,
        False,
        "refresh_credential_or_check_downstream_policy",
        "the downstream API answered 401/403",
    ),
    (
        "http_4xx",
        _S.EXECUTE,
        _E.UPSTREAM_UNAVAILABLE,
        False,
        "check_request_arguments_and_business_validation",
        "the downstream API rejected the request",
    ),
    (
        "http_not_found",
        _S.EXECUTE,
        _E.NOT_FOUND,
        False,
        "check_resource_exists",
        "the downstream API answered 404/410",
    ),
    (
        "http_5xx",
        _S.EXECUTE,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "retry_if_safe_and_check_api_logs",
        "the downstream API failed server-side",
    ),
    (
        "a2a_upstream_error",
        _S.EXECUTE,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_called_agent_health",
        "a called A2A agent answered a JSON-RPC internal or server error",
    ),
    (
        "a2a_request_rejected",
        _S.EXECUTE,
        _E.UPSTREAM_UNAVAILABLE,
        False,
        "check_request_sent_to_called_agent",
        "a called A2A agent refused the request (params, method, unsupported operation)",
    ),
    (
        "a2a_upstream_auth_failed",
        _S.EXECUTE,
        _E.UPSTREAM_UNAVAILABLE,
        False,
        "check_credentials_for_called_agent",
        "a called A2A agent refused this agent's credentials (not the caller's login)",
    ),
    (
        "a2a_task_not_found",
        _S.EXECUTE,
        _E.NOT_FOUND,
        False,
        "check_called_agent_task_id",
        "a called A2A agent does not know the task",
    ),
    (
        "a2a_invalid_response",
        _S.EXECUTE,
        _E.UPSTREAM_UNAVAILABLE,
        False,
        "check_called_agent_version",
        "a called A2A agent's answer is not JSON-RPC",
    ),
    (
        "push_wait_timeout",
        _S.A2A_CALL,
        _E.UPSTREAM_TIMEOUT,
        True,
        "check_called_agent_push_delivery",
        "no push notification ended a task within the wait's timeout (wait again, or tasks/get)",
    ),
    (
        "remote_task_failed",
        _S.A2A_CALL,
        _E.INTERNAL_ERROR,
        False,
        "check_called_agent_logs",
        "a called A2A agent ended the task failed without error data (not a llamon agent)",
    ),
    (
        "remote_task_rejected",
        _S.A2A_CALL,
        _E.INVALID_INPUT,
        False,
        "check_request_sent_to_called_agent",
        "a called A2A agent rejected the task without error data (not a llamon agent)",
    ),
    (
        "remote_wait_deadline_exceeded",
        _S.A2A_CALL,
        _E.UPSTREAM_TIMEOUT,
        True,
        "raise_wait_deadline_or_use_push",
        "a called A2A agent's task was still running when the wait's deadline passed",
    ),
    (
        "remote_task_not_cancelable",
        _S.A2A_CALL,
        _E.INVALID_INPUT,
        False,
        "none_task_already_ended",
        "a called A2A agent refused to cancel a task (it had already ended)",
    ),
    (
        "card_mismatch_error",
        _S.A2A_CALL,
        _E.INVALID_INPUT,
        False,
        "check_called_agent_card",
        "a call did not fit the called agent's card (input modes, skill); nothing was sent",
    ),
    (
        "remote_stream_lost",
        _S.A2A_CALL,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "read_the_task_later_by_its_id",
        "a called A2A agent's stream was cut and its task could not be followed again",
    ),
    (
        "rate_limited",
        _S.EXECUTE,
        _E.RATE_LIMITED,
        True,
        "back_off_or_raise_quota",
        "the downstream API answered 429",
    ),
    (
        "timeout",
        _S.EXECUTE,
        _E.UPSTREAM_TIMEOUT,
        True,
        "check_timeout_paging_and_downstream_latency",
        "the request exceeded its timeout",
    ),
    (
        "network_error",
        _S.EXECUTE,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_dns_tls_proxy_allowlist",
        "the transport failed before a meaningful response",
    ),
    (
        "shelf_full_error",
        _S.A2A_CALL,
        _E.RATE_LIMITED,
        True,
        "raise_shelf_bounds_or_end_other_chains",
        "the caller's artifact shelf has no room for a by-reference artifact; nothing was sent",
    ),
    (
        "artifact_too_large_error",
        _S.A2A_CALL,
        _E.INVALID_INPUT,
        False,
        "raise_shelf_max_bytes_or_split_the_artifact",
        "an artifact is larger than the caller's whole artifact shelf; nothing was sent",
    ),
    (
        "connection_closed",
        _S.MCP_CALL,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_mcp_server_process",
        "the MCP server closed the connection (MCPError -32000)",
    ),
    (
        "session_lost",
        _S.MCP_CALL,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "reconnect_or_check_mcp_server_restarts",
        "the MCP server lost the HTTP session (restarted or expired)",
    ),
    (
        "http_error",
        _S.MCP_CALL,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_proxy_and_mcp_server_http_status",
        "the MCP server's HTTP layer answered an error status with no JSON-RPC body",
    ),
    (
        "mcp_error",
        _S.MCP_CALL,
        _E.UPSTREAM_UNAVAILABLE,
        False,
        "check_mcp_server_log",
        "the MCP server answered with a protocol error",
    ),
    # quality lab and learning
    (
        "cleanup_failed",
        _S.CLEANUP,
        _E.INTERNAL_ERROR,
        False,
        "fix_cleanup_step",
        "a mutating case could not restore state",
    ),
    (
        "cleanup_not_configured",
        _S.CLEANUP,
        _E.INTERNAL_ERROR,
        False,
        "disable_case_or_add_cleanup",
        "a mutating case has no cleanup plan",
    ),
    (
        "scrub_failed",
        _S.LEARN,
        _E.INTERNAL_ERROR,
        False,
        "reject_learning_record",
        "a trace payload could not be compacted safely",
    ),
    (
        "insufficient_repeated_success",
        _S.LEARN,
        _E.INTERNAL_ERROR,
        False,
        "keep_shadow_mode",
        "the promotion threshold is not met yet",
    ),
    (
        "promotion_rejected",
        _S.LEARN,
        _E.INTERNAL_ERROR,
        False,
        "store_rejection_reason",
        "a person or policy rejected the suggestion",
    ),
    (
        "database_unavailable",
        _S.SERVICE,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_disk_space_and_other_writers_of_the_database",
        "the task database does not answer: PostgreSQL stopped or unreachable, or the"
        " SQLite file locked past the busy timeout, full or unwritable",
    ),
    # the Agent Catalog service (llamon catalog serve): what a publish or a lookup is refused with
    (
        "invalid_catalog_request",
        _S.SERVICE,
        _E.INVALID_INPUT,
        False,
        "fix_request_to_the_catalog",
        "a catalog request is malformed: not JSON, an unknown field, a bad query parameter",
    ),
    (
        "invalid_agent_name",
        _S.SERVICE,
        _E.INVALID_INPUT,
        False,
        "use_a_lowercase_catalog_name",
        "a catalog name is not lowercase words joined by '-' (optionally namespace/name)",
    ),
    (
        "invalid_version",
        _S.SERVICE,
        _E.INVALID_INPUT,
        False,
        "use_a_semantic_version",
        "a card's version or a version range is not SemVer (MAJOR.MINOR.PATCH)",
    ),
    (
        "invalid_card",
        _S.SERVICE,
        _E.INVALID_INPUT,
        False,
        "fix_the_card_and_publish_again",
        "a published card is not a valid A2A AgentCard, or fails a lint rule of severity error",
    ),
    (
        "card_too_large",
        _S.SERVICE,
        _E.INVALID_INPUT,
        False,
        "shorten_the_card_or_raise_the_catalog_limit",
        "a publish request or a fetched card is larger than the catalog accepts",
    ),
    (
        "version_exists",
        _S.SERVICE,
        _E.INVALID_INPUT,
        False,
        "publish_a_new_version_number",
        "the version is already published with a different card (a number is never reused)",
    ),
    (
        "version_understates_change",
        _S.SERVICE,
        _E.INVALID_INPUT,
        False,
        "bump_the_version_the_refusal_names",
        "the version number is a smaller bump than the card's change needs (SemVer rule)",
    ),
    (
        "invalid_status_change",
        _S.SERVICE,
        _E.INVALID_INPUT,
        False,
        "publish_a_new_version_instead",
        "a status change the catalog does not allow (a deleted version stays deleted)",
    ),
    (
        "catalog_key_required",
        _S.SERVICE,
        _E.AUTH_REQUIRED,
        False,
        "send_a_catalog_key",
        "a catalog request had no key, or a key the catalog does not know",
    ),
    (
        "name_not_owned",
        _S.SERVICE,
        _E.AUTH_REQUIRED,
        False,
        "publish_under_a_name_your_key_owns",
        "a publisher key tried to publish or change a name outside its namespace or owned by"
        " another publisher",
    ),
    (
        "agent_not_found",
        _S.SERVICE,
        _E.NOT_FOUND,
        False,
        "check_the_name_and_the_keys_visibility",
        "no agent of that name the caller may see",
    ),
    (
        "version_not_found",
        _S.SERVICE,
        _E.NOT_FOUND,
        False,
        "list_the_agents_versions",
        "the agent has no version (or no version in the range) the caller may see",
    ),
    (
        "card_fetch_failed",
        _S.SERVICE,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_the_agent_serves_its_card",
        "publishing by URL: the agent's card could not be fetched from its well-known path",
    ),
    (
        "event_relay_unavailable",
        _S.SERVICE,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_redis_reachability",
        "Redis, which relays the events of tasks other replicas run, did not answer",
    ),
    (
        "uncaught_server_error",
        _S.SERVICE,
        _E.INTERNAL_ERROR,
        False,
        "inspect_server_log_by_incident_id",
        "an adapter or service bug",
    ),
    # the tool loop
    (
        "unknown_tool",
        _S.TOOL_LOOP,
        _E.INVALID_INPUT,
        True,
        "check_tool_view_and_prompt",
        "the model called a tool that is not in this run's view (observation)",
    ),
    (
        "invalid_arguments",
        _S.TOOL_LOOP,
        _E.INVALID_INPUT,
        True,
        "check_tool_schema_and_prompt",
        "the arguments broke the tool's contract (observation)",
    ),
    (
        "tool_error",
        _S.TOOL_LOOP,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_tool_handler",
        "the tool's handler raised (observation)",
    ),
    (
        "malformed_arguments",
        _S.TOOL_LOOP,
        _E.INVALID_INPUT,
        True,
        "check_model_output_format",
        "the arguments were not valid JSON (observation)",
    ),
    (
        "repeated_tool_call",
        _S.TOOL_LOOP,
        _E.INVALID_INPUT,
        True,
        "check_prompt_for_loops",
        "the same call as the previous one was blocked (observation)",
    ),
    (
        "side_effect_not_run",
        _S.TOOL_LOOP,
        _E.INVALID_INPUT,
        True,
        "none_plan_mode_runs_no_side_effects",
        "a plan-mode case stopped a tool with side effects before it ran (observation)",
    ),
    (
        "invalid_model_response",
        _S.MODEL_CALL,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_model_and_prompt",
        "no tool call and empty content (terminal)",
    ),
    (
        "max_rounds_exceeded",
        _S.TOOL_LOOP,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "raise_max_rounds_or_simplify_task",
        "rounds ran out before a final answer (terminal)",
    ),
    # added by llamon-agent
    (
        "max_tool_iterations_exceeded",
        _S.FLOW_NODE,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "raise_recursion_limit_or_fix_loop",
        "a graph hit its recursion limit",
    ),
    (
        "upstream_tool_unavailable",
        _S.MCP_CALL,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_mcp_server_health",
        "an MCP tool's transport failed below the escalation threshold",
    ),
    (
        "guardrail_blocked",
        _S.GUARDRAIL,
        _E.GUARDRAIL_BLOCKED,
        False,
        "review_guardrail_policy",
        "a guardrail blocked the request or answer",
    ),
    (
        "error_data_build_failed",
        _S.SERVICE,
        _E.INTERNAL_ERROR,
        False,
        "fix_error_data_values_at_raise_site",
        "error data broke a value convention",
    ),
    (
        "worker_lost",
        _S.A2A_SERVE,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_worker_crash_logs",
        "the process running the task died before it ended",
    ),
    (
        "worker_shutdown",
        _S.A2A_SERVE,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "resend_the_task",
        "the server stopped gracefully while the task was running",
    ),
    (
        "task_busy",
        _S.A2A_SERVE,
        _E.RATE_LIMITED,
        True,
        "retry_once_the_running_request_ended",
        "a message on a task that is still running another request",
    ),
    # the SDK's own exceptions (reason = snake_case of the type name)
    (
        "component_invoke_error",
        _S.EXECUTE,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_upstream_health",
        "calling a component (MCP, RAG, DB, LLM) failed",
    ),
    (
        "component_load_error",
        _S.EXECUTE,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_component_configuration",
        "a component could not be loaded or connected",
    ),
    (
        "config_validation_error",
        _S.BIND_REQUEST,
        _E.INVALID_INPUT,
        False,
        "fix_request_input",
        "input or configuration failed validation",
    ),
    (
        "missing_field_error",
        _S.BIND_REQUEST,
        _E.INVALID_INPUT,
        False,
        "fix_request_input",
        "a required field is missing",
    ),
    (
        "missing_api_key_error",
        _S.AUTH_PREFLIGHT,
        _E.AUTH_REQUIRED,
        False,
        "configure_api_key",
        "an API key or credential is not configured",
    ),
    (
        "registry_unauthorized_error",
        _S.EXECUTE,
        _E.AUTH_REQUIRED,
        False,
        "refresh_registry_credentials",
        "the registry refused our credentials",
    ),
    (
        "registry_not_found_error",
        _S.EXECUTE,
        _E.NOT_FOUND,
        False,
        "check_registry_entry",
        "the registry has no such entry",
    ),
    (
        "registry_timeout_error",
        _S.EXECUTE,
        _E.UPSTREAM_TIMEOUT,
        True,
        "check_registry_latency",
        "the registry did not answer in time",
    ),
    (
        "registry_unavailable_error",
        _S.EXECUTE,
        _E.UPSTREAM_UNAVAILABLE,
        True,
        "check_registry_health",
        "the registry could not be reached or answered with a server error",
    ),
    (
        "guardrail_blocked_error",
        _S.GUARDRAIL,
        _E.GUARDRAIL_BLOCKED,
        False,
        "review_guardrail_policy",
        "a guardrail blocked the request or answer",
    ),
    (
        "max_iteration_error",
        _S.FLOW_NODE,
        _E.INTERNAL_ERROR,
        False,
        "fix_flow_loop_condition",
        "a flow loop exceeded its iteration limit",
    ),
    (
        "merge_strategy_error",
        _S.FLOW_NODE,
        _E.INTERNAL_ERROR,
        False,
        "fix_merge_strategy",
        "parallel results could not be merged",
    ),
    (
        "routing_error",
        _S.FLOW_NODE,
        _E.INTERNAL_ERROR,
        False,
        "fix_flow_routing",
        "no route matched the flow state",
    ),
    (
        "a2a_protocol_error",
        _S.A2A_CALL,
        _E.INTERNAL_ERROR,
        False,
        "check_remote_agent_version",
        "another agent answered outside the A2A protocol",
    ),
)

_catalog: dict[str, ReasonSpec] = {entry[0]: ReasonSpec(*entry) for entry in _ENTRIES}


def register_reason(spec: ReasonSpec) -> None:
    """Add or replace a catalog entry (your own reasons, or a different operator action)."""
    if not spec.reason or not spec.reason.isascii():
        raise ValueError(f"reason must be non-empty ASCII, got {spec.reason!r}")
    _catalog[spec.reason] = spec


def reason_spec(reason: str) -> ReasonSpec | None:
    """The catalog entry for ``reason``, or None."""
    return _catalog.get(reason)


def reason_catalog() -> list[ReasonSpec]:
    """Every entry, built-in first, in catalog order."""
    return list(_catalog.values())

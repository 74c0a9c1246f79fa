"""Small helpers shared by the provider adapters: API keys and usage counters."""

from __future__ import annotations

import os

from llamon_agent.exceptions import ConfigValidationError, MissingAPIKeyError

__all__ = ["check_client_options", "resolve_api_key", "usage_counts"]


def resolve_api_key(api_key: str | None, env_var: str, provider: str) -> str:
    """``api_key``, else the environment variable; raise ``MissingAPIKeyError`` if neither.

    The error names the variable, never a value.
    """
    key = api_key if api_key else os.environ.get(env_var, "")
    if not key.strip():
        raise MissingAPIKeyError(
            f"{provider} API key is not configured: set {env_var} or pass the api_key argument",
            env_var=env_var,
        )
    return key


def check_client_options(client: object, api_key: str | None, base_url: str | None) -> None:
    """A ready ``client`` carries its own key and URL; giving them again is a mistake."""
    if client is not None and (api_key is not None or base_url is not None):
        raise ConfigValidationError(
            "pass either client=... or api_key/base_url, not both "
            "(a client carries its own key and base URL)"
        )


def usage_counts(input_tokens: object, output_tokens: object) -> dict[str, int]:
    """Provider-neutral usage: ``input_tokens``, ``output_tokens``, ``total_tokens``."""
    usage: dict[str, int] = {}
    if isinstance(input_tokens, int):
        usage["input_tokens"] = input_tokens
    if isinstance(output_tokens, int):
        usage["output_tokens"] = output_tokens
    if len(usage) == 2:
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    return usage
